"""Small ResNets (Flax) with batch norm, and fixed ResNet image-classification tasks.

:class:`ResNet` follows the configurable ResNet of the notes' library (itself Haiku's
ResNet with more options): an initial convolution (and, for v1, batch norm + ReLU),
an optional 3x3 / stride-2 max pool, four groups of residual blocks with strides
1, 2, 2, 2 (v1: conv-BN-ReLU, v2: pre-activation BN-ReLU-conv; optional bottleneck
and 1x1 projection shortcuts), for v2 a final BN + ReLU, global average pooling and a
zero-initialized linear layer. Convolutions have no bias. Batch norm uses decay 0.9 and
eps 1e-5: batch statistics in training, the running averages are the task's
``model_state`` (He et al. 2016, "Deep Residual Learning for Image Recognition";
"Identity Mappings in Deep Residual Networks").

Tasks are configured by a dict as in the library (``blocks_per_group``,
``channels_per_group``, ``use_projection``, ``initial_conv_kernel_size``, ...); the
registered ones run offline on ``mnist5k``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from learnopt.tasks.fixed import _common
from learnopt.tasks.fixed.conv import haiku_default_init

__all__ = [
    "ResNet",
    "ResnetTask",
    "Block",
]


def _batch_norm(train: bool, name: str, scale_init: Any = nn.initializers.ones) -> nn.Module:
    return nn.BatchNorm(
        use_running_average=not train,
        momentum=0.9,
        epsilon=1e-5,
        scale_init=scale_init,
        name=name,
    )


def _conv(channels: int, kernel: int, stride: int, name: str) -> nn.Module:
    return nn.Conv(
        channels,
        (kernel, kernel),
        strides=stride,
        padding="SAME",
        use_bias=False,
        kernel_init=haiku_default_init,
        name=name,
    )


class Block(nn.Module):
    """A residual block, v1 (post-activation) or v2 (pre-activation), optional bottleneck.

    Attributes:
      channels: output channels (a bottleneck's inner convs have ``channels // 4``).
      stride: stride of the block's first 3x3 conv (and of the projection).
      use_projection: a 1x1 conv shortcut instead of the identity.
      bottleneck: 1x1-3x3-1x1 convs instead of two 3x3.
      resnet_v2: pre-activation (BN-ReLU-conv) instead of conv-BN-ReLU.
    """

    channels: int
    stride: int
    use_projection: bool
    bottleneck: bool
    resnet_v2: bool

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        """Applies the block.

        Args:
          x: features ``[B, H, W, C]``.
          train: batch statistics (updating the running averages) when True, the running
            averages when False.

        Returns:
          ``[B, ceil(H / stride), ceil(W / stride), channels]``.
        """
        div = 4 if self.bottleneck else 1
        if self.bottleneck:
            specs = [
                (self.channels // div, 1, 1),
                (self.channels // div, 3, self.stride),
                (self.channels, 1, 1),
            ]
        else:
            specs = [(self.channels, 3, self.stride), (self.channels, 3, 1)]
        if not self.resnet_v2:
            shortcut = x
            if self.use_projection:
                shortcut = _conv(self.channels, 1, self.stride, "shortcut_conv")(x)
                shortcut = _batch_norm(train, "shortcut_batchnorm")(shortcut)
            out = x
            for i, (ch, k, s) in enumerate(specs):
                out = _conv(ch, k, s, f"conv_{i}")(out)
                last = i == len(specs) - 1
                zero = nn.initializers.zeros if (last and self.bottleneck) else nn.initializers.ones
                out = _batch_norm(train, f"batchnorm_{i}", zero)(out)
                if not last:
                    out = jax.nn.relu(out)
            return jax.nn.relu(out + shortcut)
        shortcut = out = x
        for i, (ch, k, s) in enumerate(specs):
            out = jax.nn.relu(_batch_norm(train, f"batchnorm_{i}")(out))
            if i == 0 and self.use_projection:
                shortcut = _conv(self.channels, 1, self.stride, "shortcut_conv")(out)
            out = _conv(ch, k, s, f"conv_{i}")(out)
        return out + shortcut


class ResNet(nn.Module):
    """A configurable ResNet classifier (see the module docstring).

    Attributes:
      blocks_per_group, channels_per_group, use_projection: one entry per group (4).
      num_classes: output width.
      resnet_v2: pre-activation (BN-ReLU-conv) blocks instead of v1's conv-BN-ReLU.
      bottleneck: 1x1-3x3-1x1 blocks (inner width ``channels // 4``) instead of two 3x3
        convs (default True).
      initial_conv_channels, initial_conv_kernel_size, initial_conv_stride: the stem.
      max_pool: 3x3 / stride-2 max pool after the stem.
      act_fn: activation of the stem and of the v2 head.
    """

    blocks_per_group: Sequence[int]
    num_classes: int
    channels_per_group: Sequence[int] = (256, 512, 1024, 2048)
    use_projection: Sequence[bool] = (True, True, True, True)
    resnet_v2: bool = False
    bottleneck: bool = True
    initial_conv_channels: int = 64
    initial_conv_kernel_size: int = 7
    initial_conv_stride: int = 2
    max_pool: bool = True
    act_fn: Callable[[jax.Array], jax.Array] = jax.nn.relu

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
        """Logits of a batch of images.

        Args:
          x: images ``[B, H, W, C]``.
          train: batch statistics (updating the running averages) when True, the running
            averages when False.

        Returns:
          Logits ``[B, num_classes]``.

        Raises:
          ValueError: a per-group field without 4 entries.
        """
        for field in ("blocks_per_group", "channels_per_group", "use_projection"):
            if len(getattr(self, field)) != 4:
                raise ValueError(f"{field} must have 4 entries, got {getattr(self, field)}")
        x = _conv(
            self.initial_conv_channels,
            self.initial_conv_kernel_size,
            self.initial_conv_stride,
            "initial_conv",
        )(x)
        if not self.resnet_v2:
            x = self.act_fn(_batch_norm(train, "initial_batchnorm")(x))
        if self.max_pool:
            x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
        for g, (blocks, channels, stride) in enumerate(
            zip(self.blocks_per_group, self.channels_per_group, (1, 2, 2, 2), strict=True)
        ):
            for b in range(blocks):
                x = Block(
                    channels,
                    stride if b == 0 else 1,
                    self.use_projection[g] and b == 0,
                    self.bottleneck,
                    self.resnet_v2,
                    name=f"block_group_{g}_block_{b}",
                )(x, train)
        if self.resnet_v2:
            x = self.act_fn(_batch_norm(train, "final_batchnorm")(x))
        x = jnp.mean(x, axis=(-3, -2))
        return nn.Dense(self.num_classes, kernel_init=nn.initializers.zeros, name="logits")(x)


_MODULE_KEYS = (
    "blocks_per_group",
    "channels_per_group",
    "use_projection",
    "resnet_v2",
    "bottleneck",
    "initial_conv_channels",
    "initial_conv_kernel_size",
    "initial_conv_stride",
    "max_pool",
)


class ResnetTask(_common.ImageClassifierTask):
    """A :class:`ResNet` image classifier configured by a dict, as in the library.

    ``cfg`` holds ``dataset`` (e.g. ``"mnist5k"``), ``image_size`` (an int: square
    images), ``batch_size`` and the :class:`ResNet` fields (``bottleneck`` defaults to
    False here, the other fields to the module's defaults).

    Args:
      cfg: the configuration (unknown keys raise ValueError).
      name: the task's name.
      param_dtype: dtype of the parameters.
    """

    def __init__(
        self,
        cfg: Mapping[str, Any],
        name: str = "ResnetTask",
        *,
        param_dtype: Any = jnp.float32,
    ):
        unknown = set(cfg) - {"dataset", "image_size", "batch_size", *_MODULE_KEYS}
        if unknown:
            raise ValueError(f"unknown ResNet config keys {sorted(unknown)}")
        self.cfg = dict(cfg)
        size = int(cfg["image_size"])
        make, image_shape, num_classes = _common.image_datasets_factory(
            cfg["dataset"], (size, size), int(cfg["batch_size"])
        )
        kwargs = {"bottleneck": False, **{k: cfg[k] for k in _MODULE_KEYS if k in cfg}}
        module = ResNet(num_classes=num_classes, **kwargs)
        super().__init__(
            lambda: module,
            make,
            image_shape=image_shape,
            num_classes=num_classes,
            batch_size=int(cfg["batch_size"]),
            param_dtype=param_dtype,
            name=name,
        )


def _register(name: str, doc: str, cfg: Mapping[str, Any]) -> None:
    def make(param_dtype: Any = jnp.float32) -> ResnetTask:
        return ResnetTask(cfg, name, param_dtype=param_dtype)

    _common.publish(globals(), name, make, _common.factory_doc(doc, "ResnetTask"))


# The smallest of the library's Resnet_MultiRuntime configs (groups of one block,
# channels 8-16-16-16, 3x3 / stride-2 stem, max pool, v2) with a 16-channel stem, on
# 16x16 mnist5k instead of ImageNet.
_SMALL = {
    "dataset": "mnist5k",
    "image_size": 16,
    "batch_size": 64,
    "blocks_per_group": (1, 1, 1, 1),
    "use_projection": (True, True, True, True),
    "channels_per_group": (8, 16, 16, 16),
    "initial_conv_channels": 16,
    "initial_conv_kernel_size": 3,
    "initial_conv_stride": 2,
    "max_pool": True,
    "resnet_v2": True,
}
_register(
    "Resnet_Mnist5k_16_8x16x16x16",
    "ResNet v2 (4 groups of 1 block, 8-16-16-16 channels) on 16x16 mnist5k, batch 64.",
    _SMALL,
)
_register(
    "Resnet_Mnist5k_16_8x16x16x16_V1",
    "ResNet v1 (4 groups of 1 block, 8-16-16-16 channels) on 16x16 mnist5k, batch 64.",
    {**_SMALL, "resnet_v2": False, "max_pool": False},
)
