"""MLP image classifiers in plain JAX, and the fixed ``ImageMLP_*`` tasks.

The ``ImageMLP_*`` tasks mean what they mean in the notes' library
(``learned_optimization``'s ``tasks/fixed/image_mlp.py``), plus learnopt's offline
``ImageMLP_Digits8_Relu32``; each is a zero-argument class registered in
``learnopt.tasks.base.TASKS`` under its own name. They are built on the models of
:mod:`learnopt.tasks.fixed.image_mlp_models`, :class:`ImageMLPTask` and
:class:`ImageMLPNormTask` (parameter layout, initialization, losses, normalizers and
dtypes are described there), re-exported here with ``LOSS_TYPES`` and ``NORM_TYPES``.

Data: building a registered task touches no file. ``task.datasets`` is a lazy
:class:`~learnopt.tasks.datasets.base.Datasets` whose ``abstract_batch`` and
``extra_info`` are known from the dataset's spec; the data is checked, prepared and
loaded at the first batch (raising
:class:`~learnopt.tasks.datasets.base.DatasetNotFoundError` if it is missing). The
registered tasks resize bilinearly without antialiasing, as the library's
``tf.image.resize`` did, and make CIFAR-10 black and white by averaging its channels.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from learnopt.tasks import base as tasks_base
from learnopt.tasks.datasets import base as datasets_base
from learnopt.tasks.fixed.image_mlp_models import BATCH_NORM_DECAY as BATCH_NORM_DECAY
from learnopt.tasks.fixed.image_mlp_models import (
    LOSS_TYPES,
    NORM_TYPES,
    ImageMLPNormTask,
    ImageMLPTask,
)
from learnopt.tasks.fixed.image_mlp_models import NORM_EPS as NORM_EPS
from learnopt.tasks.fixed.image_mlp_models import DatasetsOrFactory as DatasetsOrFactory
from learnopt.tasks.fixed.image_mlp_models import Params as Params

# ``X as X`` above: importable here as before, not part of the API (the norms' constants
# and the type aliases of the models' signatures).
__all__ = [
    "ImageMLPTask",
    "ImageMLPNormTask",
    "LOSS_TYPES",
    "NORM_TYPES",
    "ImageMLP_Digits8_Relu32",
    "ImageMLP_FashionMnist_Relu128x128",
    "ImageMLP_FashionMnist8_Relu32",
    "ImageMLP_FashionMnist_Relu32",
    "ImageMLP_Mnist_128x128x128_Relu",
    "ImageMLP_Cifar10_8_Relu32",
    "ImageMLP_Cifar10BW8_Relu32",
    "ImageMLP_Cifar10_128x128x128_Relu",
    "ImageMLP_Imagenet16_Relu256x256x256",
    "ImageMLP_Cifar10_128x128x128_Tanh_bs64",
    "ImageMLP_Cifar10_128x128x128_Tanh_bs128",
    "ImageMLP_Cifar10_128x128x128_Tanh_bs256",
    "ImageMLP_Cifar10_128x128x128_Relu_MSE",
    "ImageMLP_Cifar10_128x128_Dropout02_Relu_MSE",
    "ImageMLP_Cifar10_128x128_Dropout05_Relu_MSE",
    "ImageMLP_Cifar10_128x128_Dropout08_Relu_MSE",
    "ImageMLP_Cifar10_128x128x128_LayerNorm_Relu",
    "ImageMLP_Cifar10_128x128x128_LayerNorm_Tanh",
    "ImageMLP_Cifar10_128x128x128_BatchNorm_Relu",
    "ImageMLP_Cifar10_128x128x128_BatchNorm_Tanh",
]

# ------------------------------------------------------------------ registered tasks


class _Fixed:
    """A registered, zero-argument task: the dataset and architecture are class attributes."""

    dataset: str
    image_size: tuple[int, int] | None = None  # None: the dataset's native size
    hidden: tuple[int, ...]
    batch_size: int = 128
    act_fn: Callable[[jax.Array], jax.Array] = staticmethod(jax.nn.relu)
    black_and_white: bool = False

    def _datasets(self) -> datasets_base.Datasets:
        return datasets_base.image_classification_datasets(
            self.dataset,
            image_size=self.image_size,
            batch_size=self.batch_size,
            antialias=False,  # tf.image.resize's default in the library
            convert_to_black_and_white=self.black_and_white,
        )


class _FixedImageMLP(_Fixed, ImageMLPTask):
    dropout_rate: float = 0.0
    loss_type: str = "softmax_cross_entropy"

    def __init__(self):
        ImageMLPTask.__init__(
            self,
            self._datasets(),
            self.hidden,
            self.act_fn,
            dropout_rate=self.dropout_rate,
            loss_type=self.loss_type,
        )


class _FixedImageMLPNorm(_Fixed, ImageMLPNormTask):
    norm_type: str

    def __init__(self):
        ImageMLPNormTask.__init__(self, self._datasets(), self.hidden, self.norm_type, self.act_fn)


_register = tasks_base.register_task


@_register
class ImageMLP_Digits8_Relu32(_FixedImageMLP):
    """scikit-learn's 8x8 digits (embedded, offline), MLP 64-32-10, ReLU, batch 128.

    learnopt's own: the offline stand-in for ``ImageMLP_FashionMnist8_Relu32``.
    """

    dataset, hidden = "digits8", (32,)


@_register
class ImageMLP_FashionMnist_Relu128x128(_FixedImageMLP):
    """Fashion-MNIST 28x28, MLP 784-128-128-10, ReLU, batch 128."""

    dataset, hidden = "fashion_mnist", (128, 128)


@_register
class ImageMLP_FashionMnist8_Relu32(_FixedImageMLP):
    """Fashion-MNIST resized to 8x8, MLP 64-32-10, ReLU, batch 128."""

    dataset, image_size, hidden = "fashion_mnist", (8, 8), (32,)


@_register
class ImageMLP_FashionMnist_Relu32(_FixedImageMLP):
    """Fashion-MNIST 28x28, MLP 784-32-10, ReLU, batch 128 (the name used in the notes)."""

    dataset, hidden = "fashion_mnist", (32,)


@_register
class ImageMLP_Mnist_128x128x128_Relu(_FixedImageMLP):
    """MNIST 28x28, MLP 784-128-128-128-10, ReLU, batch 128."""

    dataset, hidden = "mnist", (128, 128, 128)


@_register
class ImageMLP_Cifar10_8_Relu32(_FixedImageMLP):
    """CIFAR-10 resized to 8x8x3, MLP 192-32-10, ReLU, batch 128."""

    dataset, image_size, hidden = "cifar10", (8, 8), (32,)


@_register
class ImageMLP_Cifar10BW8_Relu32(_FixedImageMLP):
    """CIFAR-10 resized to 8x8 in black and white (mean of RGB), MLP 64-32-10, ReLU, batch 128."""

    dataset, image_size, hidden, black_and_white = "cifar10", (8, 8), (32,), True


@_register
class ImageMLP_Cifar10_128x128x128_Relu(_FixedImageMLP):
    """CIFAR-10 32x32x3, MLP 3072-128-128-128-10, ReLU, batch 128."""

    dataset, hidden = "cifar10", (128, 128, 128)


@_register
class ImageMLP_Imagenet16_Relu256x256x256(_FixedImageMLP):
    """ImageNet 16x16x3, MLP 768-256-256-256-1000, ReLU, batch 128 (needs the npz files).

    Data: :func:`~learnopt.tasks.datasets.base.imagenet16_datasets`.
    """

    dataset, hidden = "imagenet16", (256, 256, 256)


@_register
class ImageMLP_Cifar10_128x128x128_Tanh_bs64(_FixedImageMLP):
    """CIFAR-10 32x32x3, MLP 3072-128-128-128-10, tanh, batch 64."""

    dataset, hidden, act_fn, batch_size = "cifar10", (128, 128, 128), staticmethod(jnp.tanh), 64


@_register
class ImageMLP_Cifar10_128x128x128_Tanh_bs128(_FixedImageMLP):
    """CIFAR-10 32x32x3, MLP 3072-128-128-128-10, tanh, batch 128."""

    dataset, hidden, act_fn = "cifar10", (128, 128, 128), staticmethod(jnp.tanh)


@_register
class ImageMLP_Cifar10_128x128x128_Tanh_bs256(_FixedImageMLP):
    """CIFAR-10 32x32x3, MLP 3072-128-128-128-10, tanh, batch 256."""

    dataset, hidden, act_fn, batch_size = "cifar10", (128, 128, 128), staticmethod(jnp.tanh), 256


@_register
class ImageMLP_Cifar10_128x128x128_Relu_MSE(_FixedImageMLP):
    """CIFAR-10 32x32x3, MLP 3072-128-128-128-10, ReLU, MSE loss on one-hot labels."""

    dataset, hidden, loss_type = "cifar10", (128, 128, 128), "mse"


@_register
class ImageMLP_Cifar10_128x128_Dropout02_Relu_MSE(_FixedImageMLP):
    """CIFAR-10 32x32x3, MLP 3072-128-128-10, ReLU, dropout 0.2, MSE loss."""

    dataset, hidden, loss_type, dropout_rate = "cifar10", (128, 128), "mse", 0.2


@_register
class ImageMLP_Cifar10_128x128_Dropout05_Relu_MSE(_FixedImageMLP):
    """CIFAR-10 32x32x3, MLP 3072-128-128-10, ReLU, dropout 0.5, MSE loss."""

    dataset, hidden, loss_type, dropout_rate = "cifar10", (128, 128), "mse", 0.5


@_register
class ImageMLP_Cifar10_128x128_Dropout08_Relu_MSE(_FixedImageMLP):
    """CIFAR-10 32x32x3, MLP 3072-128-128-10, ReLU, dropout 0.8, MSE loss."""

    dataset, hidden, loss_type, dropout_rate = "cifar10", (128, 128), "mse", 0.8


@_register
class ImageMLP_Cifar10_128x128x128_LayerNorm_Relu(_FixedImageMLPNorm):
    """CIFAR-10 32x32x3, MLP 3072-128-128-128-10 with layer norm, ReLU, batch 128."""

    dataset, hidden, norm_type = "cifar10", (128, 128, 128), "layer_norm"


@_register
class ImageMLP_Cifar10_128x128x128_LayerNorm_Tanh(_FixedImageMLPNorm):
    """CIFAR-10 32x32x3, MLP 3072-128-128-128-10 with layer norm, tanh, batch 128."""

    dataset, hidden, norm_type, act_fn = (
        "cifar10",
        (128, 128, 128),
        "layer_norm",
        staticmethod(jnp.tanh),
    )


@_register
class ImageMLP_Cifar10_128x128x128_BatchNorm_Relu(_FixedImageMLPNorm):
    """CIFAR-10 32x32x3, MLP 3072-128-128-128-10 with batch norm, ReLU, batch 128."""

    dataset, hidden, norm_type = "cifar10", (128, 128, 128), "batch_norm"


@_register
class ImageMLP_Cifar10_128x128x128_BatchNorm_Tanh(_FixedImageMLPNorm):
    """CIFAR-10 32x32x3, MLP 3072-128-128-128-10 with batch norm, tanh, batch 128."""

    dataset, hidden, norm_type, act_fn = (
        "cifar10",
        (128, 128, 128),
        "batch_norm",
        staticmethod(jnp.tanh),
    )
