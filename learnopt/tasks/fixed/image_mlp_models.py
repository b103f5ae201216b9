"""The MLP image classifiers in plain JAX: :class:`ImageMLPTask` and :class:`ImageMLPNormTask`.

The tasks mean what they mean in the notes' library (``learned_optimization``'s
``tasks/fixed/image_mlp.py``, written with Haiku): same architectures, same parameter
layout and initialization, same losses and normalizers. Two models:

:class:`ImageMLPTask` (Haiku's ``hk.nets.MLP``). Params
``{"mlp/~/linear_i": {"w": [fan_in, fan_out], "b": [fan_out]}}`` for
``i = 0 .. len(hidden_sizes)``; the image is flattened, and every layer but the last
is followed by dropout (if ``dropout_rate > 0``; before the activation, as Haiku's MLP
does it) and the activation. Dropout is always on (the library's losses are training
losses); layer ``i`` draws its mask from ``jax.random.split(key, num_hidden)[i]`` of
the loss key and keeps a unit with probability ``1 - dropout_rate``, scaling it by
``1 / (1 - dropout_rate)``.

:class:`ImageMLPNormTask` (Haiku ``hk.Linear`` + ``hk.LayerNorm`` / ``hk.BatchNorm``
called in sequence). Params ``linear``, ``linear_1``, ... (``w``, ``b``) and
``layer_norm``, ``layer_norm_1``, ... or ``batch_norm``, ``batch_norm_1``, ...
(``scale``, ``offset``; ``[H]`` for layer norm, ``[1, H]`` for batch norm); every hidden
layer is ``act(norm(linear(x)))``. Layer norm normalizes each example over its
features; batch norm normalizes each feature over the batch with the batch's own
statistics (training mode, also when evaluating, as in the library) and keeps
exponential moving averages (decay 0.9, zero-debiased) of the batch mean and variance
in ``model_state`` (``batch_norm/~/mean_ema`` and ``batch_norm/~/var_ema``, each
``{"counter", "hidden", "average"}``) through ``init_with_state`` /
``loss_with_state``. Both norms use ``eps = 1e-5`` and ``var + eps`` under the rsqrt;
batch norm's variance is ``E[x^2] - E[x]^2``.

Initialization (Haiku's defaults): ``w`` from a normal truncated at two standard
deviations with scale ``1 / sqrt(fan_in)``, ``b`` and ``offset`` zero, ``scale`` one.
Keys are split per layer (``jax.random.split(key, num_layers)``), so params are the
library's distribution, not its bits.

Losses: ``"softmax_cross_entropy"`` is the batch mean of
``-sum(one_hot(label) * log_softmax(logits))``; ``"mse"`` is the mean over batch and
classes of ``(logits - one_hot(label))^2``. Normalizers: cross-entropy is clipped to
``[0, 1.5 log(num_classes)]`` (NaN maps to the top), MSE to ``10 * min(loss, 1)``
(non-finite values count as 1).

Dtypes: params are created in ``param_dtype`` (float32 by default); matmuls run in
each layer's parameter dtype (bfloat16 params give bfloat16 matmuls); norms, the
log-softmax / MSE and the mean run in at least float32, so the loss is float32 for
bfloat16, float16 and float32 params and float64 for float64 params; batch-norm
statistics in ``model_state`` are kept in that dtype too.

The fixed, registered ``ImageMLP_*`` tasks built on them are in
:mod:`learnopt.tasks.fixed.image_mlp`, which re-exports this module's names.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from learnopt import _validate
from learnopt.tasks import base as tasks_base
from learnopt.tasks.datasets import base as datasets_base

__all__ = ["ImageMLPTask", "ImageMLPNormTask", "LOSS_TYPES", "NORM_TYPES"]

DatasetsOrFactory = datasets_base.Datasets | Callable[[], datasets_base.Datasets]
Params = dict[str, dict[str, jax.Array]]

LOSS_TYPES = ("softmax_cross_entropy", "mse")
NORM_TYPES = ("layer_norm", "batch_norm")
#: Haiku's LayerNorm / BatchNorm epsilon.
NORM_EPS = 1e-5
#: Decay of the batch-norm moving averages (the library's ``decay_rate``).
BATCH_NORM_DECAY = 0.9


def _wide(x: jax.Array) -> jax.Array:
    """``x`` in at least float32."""
    return x.astype(jnp.promote_types(x.dtype, jnp.float32))


def _linear(x: jax.Array, layer: dict[str, jax.Array]) -> jax.Array:
    w = layer["w"]
    return jnp.matmul(x.astype(w.dtype), w) + layer["b"].astype(w.dtype)


def _dropout(key: jax.Array, rate: float, x: jax.Array) -> jax.Array:
    keep_rate = 1.0 - rate
    keep = jax.random.bernoulli(key, keep_rate, x.shape)
    return jnp.where(keep, x / jnp.asarray(keep_rate, x.dtype), jnp.zeros((), x.dtype))


def _truncated_normal_init(key: jax.Array, fan_in: int, fan_out: int, dtype: Any) -> jax.Array:
    sample_dtype = jnp.promote_types(dtype, jnp.float32)
    w = jax.random.truncated_normal(key, -2.0, 2.0, (fan_in, fan_out), sample_dtype)
    return (w / math.sqrt(fan_in)).astype(dtype)


class ImageMLPTask(tasks_base.Task):
    """A multi-layer perceptron classifying images (the library's ``_MLPImageTask``).

    See the module docstring for the parameter layout, dropout, losses and dtypes.

    Args:
      datasets: a :class:`~learnopt.tasks.datasets.base.Datasets`, or a zero-argument
        callable returning one (called on first access of ``task.datasets``).
      hidden_sizes: widths of the hidden layers.
      act_fn: activation between layers.
      num_classes: output width; default ``datasets.extra_info["num_classes"]``.
      dropout_rate: probability of dropping a hidden unit, in ``[0, 1)``.
      loss_type: ``"softmax_cross_entropy"`` (the library's ``_MLPImageTask``) or
        ``"mse"`` (its ``_MLPImageTaskMSE``); also picks the normalizer.
      image_shape: ``(H, W, C)`` of one image; default from ``datasets.abstract_batch``.
        Give it (and ``num_classes``) with a callable ``datasets`` so that ``init`` and
        ``loss`` never call it.
      param_dtype: dtype of the parameters made by ``init``.
      name: the task's name (default: the class name).
    """

    def __init__(
        self,
        datasets: DatasetsOrFactory,
        hidden_sizes: Sequence[int],
        act_fn: Callable[[jax.Array], jax.Array] = jax.nn.relu,
        num_classes: int | None = None,
        *,
        dropout_rate: float = 0.0,
        loss_type: str = "softmax_cross_entropy",
        image_shape: Sequence[int] | None = None,
        param_dtype: Any = jnp.float32,
        name: str | None = None,
    ):
        self._datasets = datasets if isinstance(datasets, datasets_base.Datasets) else None
        self._datasets_fn = None if self._datasets is not None else datasets
        if self._datasets is None and not callable(datasets):
            raise TypeError(f"datasets must be a Datasets or a callable, got {datasets!r}")
        if num_classes is None:
            num_classes = self.datasets.extra_info["num_classes"]
        if image_shape is None:
            image_shape = self.datasets.abstract_batch["image"].shape[1:]
        if not 0.0 <= dropout_rate < 1.0:
            raise ValueError(f"dropout_rate must be in [0, 1), got {dropout_rate}")
        if loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {loss_type!r}")
        self.hidden_sizes = tuple(int(h) for h in hidden_sizes)
        self.act_fn = act_fn
        self.num_classes = int(num_classes)
        self.image_shape = tuple(int(s) for s in image_shape)
        self.dropout_rate = float(dropout_rate)
        self.loss_type = loss_type
        self.param_dtype = jnp.dtype(param_dtype)
        self._name = name
        if not jnp.issubdtype(self.param_dtype, jnp.floating):
            raise ValueError(f"param_dtype must be a float dtype, got {self.param_dtype}")

    @property
    def datasets(self) -> datasets_base.Datasets:
        """The task's datasets, created by the factory on first access."""
        if self._datasets is None:
            self._datasets = self._datasets_fn()
        return self._datasets

    @property
    def layer_sizes(self) -> tuple[int, ...]:
        """``(input, *hidden, classes)``."""
        return (math.prod(self.image_shape), *self.hidden_sizes, self.num_classes)

    def _linear_names(self) -> list[str]:
        return [f"mlp/~/linear_{i}" for i in range(len(self.layer_sizes) - 1)]

    def _init_linears(self, key: jax.Array) -> Params:
        sizes = self.layer_sizes
        keys = jax.random.split(key, len(sizes) - 1)
        return {
            name: {
                "w": _truncated_normal_init(k, fan_in, fan_out, self.param_dtype),
                "b": jnp.zeros((fan_out,), self.param_dtype),
            }
            for name, k, fan_in, fan_out in zip(
                self._linear_names(), keys, sizes[:-1], sizes[1:], strict=True
            )
        }

    def init(self, key: jax.Array) -> Params:
        """Initial params (Haiku's defaults; see the module docstring).

        Args and returns as in :meth:`~learnopt.tasks.base.Task.init`.
        """
        return self._init_linears(key)

    def _check_batch(self, batch: Any) -> tuple[jax.Array, jax.Array]:
        try:
            image, label = batch["image"], batch["label"]
        except (TypeError, KeyError, IndexError) as e:
            raise ValueError(
                f"{self.name}: batch must be a dict with 'image' and 'label', got "
                f"{type(batch).__name__}"
            ) from e
        image_shape = tuple(jnp.shape(image))
        if len(image_shape) < 4 or image_shape[-3:] != self.image_shape:
            raise ValueError(
                f"{self.name}: batch['image'] must have shape [batch, "
                f"{', '.join(map(str, self.image_shape))}] (images {self.image_shape}), got "
                f"{image_shape}"
            )
        if tuple(np.shape(label)) != image_shape[:-3]:
            raise ValueError(
                f"{self.name}: batch['label'] must have shape {image_shape[:-3]} to match "
                f"batch['image'] {image_shape}, got {tuple(np.shape(label))}"
            )
        _validate.float_images(f"{self.name}: batch['image']", image)
        _validate.labels_in_range(f"{self.name}: batch['label']", label, self.num_classes)
        return image, label

    @staticmethod
    def _flatten(image: jax.Array) -> jax.Array:
        return jnp.reshape(image, (*jnp.shape(image)[:-3], -1))

    def logits(self, params: Params, image: jax.Array, key: jax.Array | None = None) -> jax.Array:
        """Logits ``[..., num_classes]`` of images ``[..., H, W, C]``.

        ``key`` draws the dropout masks; it is needed only when ``dropout_rate > 0``.

        Args:
          params: the params of :meth:`init`.
          image: images ``[..., H, W, C]``.
          key: a PRNG key, or None without dropout.

        Returns:
          The logits, in the last layer's parameter dtype.

        Raises:
          ValueError: dropout without a key.
        """
        x = self._flatten(image)
        names = self._linear_names()
        num_hidden = len(names) - 1
        keys = None
        if self.dropout_rate > 0 and num_hidden:
            if key is None:
                raise ValueError(f"{self.name}: dropout needs a PRNG key")
            keys = jax.random.split(key, num_hidden)
        for i, name in enumerate(names):
            x = _linear(x, params[name])
            if i < num_hidden:
                if keys is not None:
                    x = _dropout(keys[i], self.dropout_rate, x)
                x = self.act_fn(x)
        return x

    def _loss_from_logits(self, logits: jax.Array, label: jax.Array) -> jax.Array:
        logits = _wide(logits)
        one_hot = jax.nn.one_hot(jnp.asarray(label), self.num_classes, dtype=logits.dtype)
        if self.loss_type == "mse":
            return jnp.mean(jnp.square(logits - one_hot))
        return jnp.mean(-jnp.sum(one_hot * jax.nn.log_softmax(logits, axis=-1), axis=-1))

    def loss(self, params: Params, key: jax.Array, batch: Any) -> jax.Array:
        """The batch's cross-entropy or MSE (``loss_type``), dropout on.

        Args:
          params: the params of :meth:`init`.
          key: a PRNG key for the dropout masks, or None without dropout.
          batch: ``{"image": float [B, H, W, C], "label": int [B]}``.

        Returns:
          A scalar, in float32 (float64 for float64 params).

        Raises:
          ValueError: a batch of the wrong keys or shapes, or (concrete) out-of-range labels.
          TypeError: integer images or non-integer labels.
        """
        image, label = self._check_batch(batch)
        return self._loss_from_logits(self.logits(params, image, key), label)

    def normalizer(self, loss: jax.Array) -> jax.Array:
        """Maps the loss onto ``[0, 1.5 log(num_classes)]`` (cross-entropy) or ``[0, 10]`` (MSE).

        Cross-entropy is clipped to ``[0, 1.5x its value at chance]`` and NaN maps to the
        top; MSE is ``10 * min(loss, 1)`` with NaN and infinities counted as 1.

        Args:
          loss: a loss of this task.

        Returns:
          The normalized loss.
        """
        if self.loss_type == "mse":
            loss = jnp.nan_to_num(loss, nan=1.0, posinf=1.0, neginf=1.0)
            return jnp.minimum(loss, 1.0) * 10
        maxval = 1.5 * math.log(self.num_classes)
        loss = jnp.clip(loss, 0, maxval)
        return jnp.nan_to_num(loss, nan=maxval, posinf=maxval, neginf=maxval)


def _haiku_name(base: str, i: int) -> str:
    """Haiku's name for the ``i``-th module of a kind: ``base``, ``base_1``, ``base_2``..."""
    return base if i == 0 else f"{base}_{i}"


class ImageMLPNormTask(ImageMLPTask):
    """An MLP with layer or batch norm after each hidden layer (library: ``_MLPImageTaskNorm``).

    ``norm_type`` is ``"layer_norm"`` or ``"batch_norm"``. Batch norm keeps moving
    averages of its statistics in ``model_state`` (use ``init_with_state`` /
    ``loss_with_state``; ``loss`` without a state computes the same value and drops
    the statistics). See the module docstring for the layout and maths.

    Args:
      datasets: a :class:`~learnopt.tasks.datasets.base.Datasets`, or a zero-argument
        callable returning one (called on first access of ``task.datasets``).
      hidden_sizes: widths of the hidden layers.
      norm_type: ``"layer_norm"`` or ``"batch_norm"``.
      act_fn: activation between layers.
      num_classes: output width; default ``datasets.extra_info["num_classes"]``.
      loss_type: ``"softmax_cross_entropy"`` or ``"mse"``; also picks the normalizer.
      image_shape: ``(H, W, C)`` of one image; default from ``datasets.abstract_batch``.
      param_dtype: float dtype of the parameters made by ``init`` (default float32).
      name: the task's name (default: the class name).

    Unlike :class:`ImageMLPTask` it has no dropout.
    """

    def __init__(
        self,
        datasets: DatasetsOrFactory,
        hidden_sizes: Sequence[int],
        norm_type: str,
        act_fn: Callable[[jax.Array], jax.Array] = jax.nn.relu,
        num_classes: int | None = None,
        *,
        loss_type: str = "softmax_cross_entropy",
        image_shape: Sequence[int] | None = None,
        param_dtype: Any = jnp.float32,
        name: str | None = None,
    ):
        if norm_type not in NORM_TYPES:
            raise ValueError(f"norm_type must be one of {NORM_TYPES}, got {norm_type!r}")
        super().__init__(
            datasets,
            hidden_sizes,
            act_fn,
            num_classes,
            loss_type=loss_type,
            image_shape=image_shape,
            param_dtype=param_dtype,
            name=name,
        )
        self.norm_type = norm_type

    def _linear_names(self) -> list[str]:
        return [_haiku_name("linear", i) for i in range(len(self.layer_sizes) - 1)]

    def _norm_names(self) -> list[str]:
        return [_haiku_name(self.norm_type, i) for i in range(len(self.hidden_sizes))]

    @property
    def _stats_dtype(self) -> jnp.dtype:
        return jnp.promote_types(self.param_dtype, jnp.float32)

    def init_with_state(self, key: jax.Array) -> tuple[Params, Any]:
        """Initial params and, for batch norm, the moving averages' state.

        Args:
          key: a PRNG key, split per linear layer.

        Returns:
          ``(params, model_state)``: the linear layers plus ``scale`` (ones) and ``offset``
          (zeros) per norm; ``model_state`` holds zeroed ``mean_ema`` / ``var_ema`` per batch
          norm, or is None for layer norm.
        """
        params = self._init_linears(key)
        model_state = {}
        for name, width in zip(self._norm_names(), self.hidden_sizes, strict=True):
            shape = (width,) if self.norm_type == "layer_norm" else (1, width)
            params[name] = {
                "scale": jnp.ones(shape, self.param_dtype),
                "offset": jnp.zeros(shape, self.param_dtype),
            }
            if self.norm_type == "batch_norm":
                for ema in ("mean_ema", "var_ema"):
                    model_state[f"{name}/~/{ema}"] = {
                        "counter": jnp.zeros((), jnp.int32),
                        "hidden": jnp.zeros(shape, self._stats_dtype),
                        "average": jnp.zeros(shape, self._stats_dtype),
                    }
        return params, (model_state if self.norm_type == "batch_norm" else None)

    def init(self, key: jax.Array) -> Params:
        """Initial params (the first half of :meth:`init_with_state`).

        Args and returns as in :meth:`~learnopt.tasks.base.Task.init`.
        """
        return self.init_with_state(key)[0]

    @staticmethod
    def _ema(state: dict[str, jax.Array], value: jax.Array) -> dict[str, jax.Array]:
        """One zero-debiased moving-average step (Haiku's ``ExponentialMovingAverage``)."""
        decay = jnp.asarray(BATCH_NORM_DECAY, value.dtype)
        counter = state["counter"] + 1
        hidden = state["hidden"] * decay + value * (1 - decay)
        average = hidden / (1 - decay ** counter.astype(value.dtype))
        return {"counter": counter, "hidden": hidden, "average": average}

    def _norm(
        self, x: jax.Array, p: dict[str, jax.Array], name: str, state: Any
    ) -> tuple[jax.Array, Any]:
        out_dtype = x.dtype
        x = _wide(x)
        scale, offset = _wide(p["scale"]), _wide(p["offset"])
        if self.norm_type == "layer_norm":
            mean = jnp.mean(x, axis=-1, keepdims=True)
            var = jnp.var(x, axis=-1, keepdims=True)
            out = scale * jax.lax.rsqrt(var + NORM_EPS) * (x - mean) + offset
            return out.astype(out_dtype), state
        axes = tuple(range(x.ndim - 1))  # every axis but the features
        mean = jnp.mean(x, axis=axes, keepdims=True)
        var = jnp.mean(jnp.square(x), axis=axes, keepdims=True) - jnp.square(mean)
        out = (x - mean) * (scale * jax.lax.rsqrt(var + NORM_EPS)) + offset
        if state is not None:
            width = x.shape[-1]
            state = dict(state)
            for ema, value in (("mean_ema", mean), ("var_ema", var)):
                key = f"{name}/~/{ema}"
                value = value.reshape(1, width).astype(state[key]["hidden"].dtype)
                state[key] = self._ema(state[key], value)
        return out.astype(out_dtype), state

    def _forward(self, params: Params, state: Any, image: jax.Array) -> tuple[jax.Array, Any]:
        x = self._flatten(image)
        names = self._linear_names()
        norms = self._norm_names()
        for i, name in enumerate(names):
            x = _linear(x, params[name])
            if i < len(norms):
                x, state = self._norm(x, params[norms[i]], norms[i], state)
                x = self.act_fn(x)
        return x, state

    def logits(self, params: Params, image: jax.Array, key: jax.Array | None = None) -> jax.Array:
        """Logits ``[..., num_classes]`` of images ``[..., H, W, C]`` (batch statistics).

        Args:
          params: the params of :meth:`init`.
          image: images ``[..., H, W, C]``.
          key: unused (no dropout).

        Returns:
          The logits.
        """
        del key
        return self._forward(params, None, image)[0]

    def loss_with_state(
        self, params: Params, state: Any, key: jax.Array, data: Any
    ) -> tuple[jax.Array, Any]:
        """The loss and, for batch norm, the moving averages updated with this batch.

        Args:
          params: the params of :meth:`init`.
          state: the ``model_state`` of :meth:`init_with_state` (None: nothing is tracked).
          key: unused (no dropout).
          data: ``{"image": float [B, H, W, C], "label": int [B]}``.

        Returns:
          ``(loss, new_state)``.

        Raises:
          ValueError: a malformed batch (as for :meth:`ImageMLPTask.loss`).
        """
        del key
        image, label = self._check_batch(data)
        logits, state = self._forward(params, state, image)
        return self._loss_from_logits(logits, label), state

    def loss(self, params: Params, key: jax.Array, batch: Any) -> jax.Array:
        """The loss without a model state (the same value; the statistics are dropped).

        Args:
          params: the params of :meth:`init`.
          key: unused.
          batch: one batch.

        Returns:
          A scalar.
        """
        return self.loss_with_state(params, None, key, batch)[0]
