"""Sampled conv-net image classifiers: :class:`ParametricImageConv`, ``sample_image_conv``.

Shapes (channels, kernel sizes, strides, dataset, image and batch size) are fixed per
family; ``family.sample(key)`` draws, traced, the activation and the conv weights'
initializer and scale. The network: conv layers (``SAME`` padding, activation after
each), global average pooling, a linear layer (Haiku's default init), as in the notes'
library.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from learnopt.tasks import base as tasks_base
from learnopt.tasks.fixed import _common
from learnopt.tasks.parametric import _family, cfgobject, parametric_utils

__all__ = [
    "ConvNet",
    "ParametricImageConv",
    "ParametricImageConv_Digits8_16x32",
    "sample_image_conv",
]


class ConvNet(nn.Module):
    """Convs (given channels, kernels, strides) -> activation -> mean pool -> linear.

    Attributes:
      hidden_sizes: channels of each conv layer.
      kernel_sizes: ``(kh, kw)`` of each conv layer.
      strides: stride of each conv layer.
      num_classes: output width.
      activation: applied after each conv.
      kernel_init: initializer of the conv weights.
    """

    hidden_sizes: tuple[int, ...]
    kernel_sizes: tuple[tuple[int, int], ...]
    strides: tuple[int, ...]
    num_classes: int
    activation: Callable[[jax.Array], jax.Array]
    kernel_init: Any

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
        """Logits of a batch of images.

        Args:
          x: images ``[B, H, W, C]``.
          train: unused (no dropout or batch norm).

        Returns:
          Logits ``[B, num_classes]``.
        """
        for hs, ks, stride in zip(self.hidden_sizes, self.kernel_sizes, self.strides, strict=True):
            x = nn.Conv(hs, ks, strides=stride, padding="SAME", kernel_init=self.kernel_init)(x)
            x = self.activation(x)
        x = jnp.mean(x, axis=(-3, -2))
        return nn.Dense(self.num_classes, kernel_init=_common.haiku_default_init)(x)


@cfgobject.configurable
class ParametricImageConv(_family.ImageFamily):
    """Conv nets of fixed shape on ``datasets``; sampled activation and initializer.

    Args:
      datasets: a :class:`~learnopt.tasks.datasets.base.Datasets` or a zero-argument
        factory returning one.
      num_classes: output width (default: the data's ``extra_info["num_classes"]``).
      hidden_sizes: channels of each conv layer.
      kernel_sizes: each conv layer's kernel ``(h, w)``.
      strides: each conv layer's stride.
      name: the family's name (default: the class name).
    """

    def __init__(
        self,
        datasets: Any,
        num_classes: int | None = None,
        hidden_sizes: Sequence[int] = (16, 32),
        kernel_sizes: Sequence[Any] = ((3, 3), (3, 3)),
        strides: Sequence[int] = (2, 1),
        name: str | None = None,
    ):
        super().__init__(datasets, num_classes, name)
        if not len(hidden_sizes) == len(kernel_sizes) == len(strides):
            raise ValueError(
                "hidden_sizes, kernel_sizes and strides need one entry per layer, got "
                f"{hidden_sizes}, {kernel_sizes}, {strides}"
            )
        self.hidden_sizes = tuple(int(h) for h in hidden_sizes)
        self.kernel_sizes = tuple(
            (int(k), int(k)) if isinstance(k, int) else tuple(int(x) for x in k)
            for k in kernel_sizes
        )
        self.strides = tuple(int(s) for s in strides)

    def make_module(self, act: Callable, init: Callable) -> nn.Module:
        """The :class:`ConvNet` of this family's shapes.

        See :meth:`~learnopt.tasks.parametric._family.ImageFamily.make_module`.
        """
        return ConvNet(
            self.hidden_sizes, self.kernel_sizes, self.strides, self.num_classes, act, init
        )


@_family.host_sampler
def sample_image_conv(key: jax.Array) -> cfgobject.CFGObject:
    """A random :class:`ParametricImageConv` configuration (host side), as the library."""
    keys = jax.random.split(key, 6)
    hidden_size = parametric_utils.log_int(keys[0], 4, 64)
    num_layers = parametric_utils.choice(keys[1], [0, 1, 2, 3])
    num_stride = min(num_layers, int(parametric_utils.choice(keys[2], [0, 1, 2])))
    model = {
        "hidden_sizes": cfgobject.LogFeature(num_layers * [hidden_size]),
        "strides": [2] * num_stride + [1] * (num_layers - num_stride),
        "kernel_sizes": [(3, 3)] * num_layers,
    }
    return _family.image_config(
        "ParametricImageConv", model, image_key=keys[3], dataset_key=keys[4], batch_key=keys[5]
    )


@tasks_base.TASK_FAMILIES.register
def ParametricImageConv_Digits8_16x32() -> ParametricImageConv:  # noqa: N802
    """Convs 16 (stride 2) - 32 on 8x8 digits, batch 128; sampled activation and initializer.

    Returns:
      The task family, a :class:`ParametricImageConv`.
    """
    fn = cfgobject.CONFIGURABLES.constructor("digits8_datasets")
    return ParametricImageConv(
        lambda: fn(batch_size=128, image_size=(8, 8)),
        hidden_sizes=(16, 32),
        kernel_sizes=((3, 3), (3, 3)),
        strides=(2, 1),
        name="ParametricImageConv_Digits8_16x32",
    )
