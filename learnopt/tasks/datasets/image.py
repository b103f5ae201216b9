"""The notes' library's ``tasks/datasets/image`` path: its image dataset constructors.

Research code written on learned_optimization builds datasets with
``from learned_optimization.tasks.datasets import image`` and
``image.mnist_datasets(batch_size, image_size=...)``; with the prefix changed it gets
learnopt's constructors (:mod:`learnopt.tasks.datasets.base`, same names and arguments).
The library's constructors of datasets learnopt does not provide (CIFAR-100, SVHN,
Food-101, ImageNet at 8, 32 and 64 pixels) raise an ``AttributeError`` naming the ones
it does.
"""

from __future__ import annotations

from typing import Any

from learnopt.tasks.datasets.base import (
    cifar10_datasets,
    fashion_mnist_datasets,
    imagenet16_datasets,
    mnist_datasets,
)

__all__ = ["mnist_datasets", "fashion_mnist_datasets", "cifar10_datasets", "imagenet16_datasets"]

_NOT_PROVIDED = (
    "cifar100_datasets",
    "svhn_cropped_datasets",
    "food101_datasets",
    "imagenet8_datasets",
    "imagenet32_datasets",
    "imagenet64_datasets",
)


def __getattr__(name: str) -> Any:
    if name in _NOT_PROVIDED:
        raise AttributeError(
            f"learnopt.tasks.datasets.image.{name}: learned_optimization's {name} has no "
            f"learnopt counterpart; the image datasets learnopt provides are {', '.join(__all__)} "
            "(and the others of learnopt.tasks.datasets.base)"
        )
    raise AttributeError(f"module 'learnopt.tasks.datasets.image' has no attribute {name!r}")
