"""Building blocks of task families: host-side samplers and traced choices.

Two levels of sampling, as in the notes' library:

* **Host side** (a concrete key, Python values): :func:`choice`, :func:`log_int`,
  :func:`log_float` and :class:`SampleImageDataset` pick *shapes* (widths, depths,
  image and batch sizes, datasets) for a family configuration
  (:class:`~learnopt.tasks.parametric.cfgobject.CFGObject`). Members of one family share
  these, so a population of them is one ``vmap``.
* **Traced** (inside ``jit`` / ``vmap``): :class:`SampleActivation` and
  :class:`SampleInitializer` draw an activation function and a weight initializer (and
  its scale) as arrays; the task applies them with ``lax.switch``, so members of one
  family differ in these without recompiling.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from learnopt.tasks import base as tasks_base
from learnopt.tasks.datasets import base as datasets_base
from learnopt.tasks.parametric import cfgobject

__all__ = [
    "SampleActivation",
    "SampleImageDataset",
    "SampleInitializer",
    "choice",
    "log_float",
    "log_int",
    "orth_init",
    "orthonormalize_columns",
    "parametric_normalizer",
    "task_from_sample_task_family_fn",
    "truncated_normal_init",
    "uniform_scale_init",
    "variance_scale_init",
]


# ------------------------------------------------------------------------ host side


def choice(key: jax.Array, vals: Sequence[Any]) -> Any:
    """One of ``vals``, uniformly (host side: returns the element itself).

    Args:
      key: a concrete PRNG key.
      vals: the choices.

    Returns:
      The chosen element.
    """
    return vals[int(jax.random.randint(key, (), 0, len(vals)))]


def log_int(key: jax.Array, lower: int, upper: int) -> int:
    """An integer log-uniform in ``[lower, upper)`` (rounded down).

    ``floor(exp(u))``, ``u ~ U[log lower, log upper)``.

    Args:
      key: a concrete PRNG key.
      lower: the smallest value (positive).
      upper: the bound (exclusive).

    Returns:
      A Python int.
    """
    return int(log_float(key, lower, upper))


def log_float(key: jax.Array, lower: float, upper: float) -> float:
    """A float log-uniform in ``[lower, upper)``.

    ``exp(u)``, ``u ~ U[log lower, log upper)``.

    Args:
      key: a concrete PRNG key.
      lower: the smallest value (positive).
      upper: the bound (exclusive).

    Returns:
      A Python float.
    """
    val = jax.random.uniform(key, (), minval=math.log(lower), maxval=math.log(upper))
    return float(np.exp(np.asarray(val, np.float64)))


def _image_fn(name: str) -> Callable[..., datasets_base.Datasets]:
    def make(batch_size: int = 128, image_size: Sequence[int] | None = None, **kw):
        return datasets_base.image_classification_datasets(
            name, image_size=image_size, batch_size=batch_size, **kw
        )

    make.__name__ = f"{name}_datasets"
    return make


_IMAGE_FNS = {
    f"{n}_datasets": _image_fn(n)
    for n in ("digits8", "mnist5k", "mnist", "fashion_mnist", "cifar10")
}
for _name, _fn in _IMAGE_FNS.items():
    cfgobject.configurable(_fn, name=_name)


@cfgobject.configurable(name="pystdlib_bytes_datasets")
def _pystdlib_bytes_datasets(batch_size: int, sequence_length: int, **kw):
    from learnopt.tasks.datasets import language

    return language.pystdlib_bytes_datasets(batch_size, sequence_length, **kw)


class SampleImageDataset:
    """Samples an image dataset name (host side).

    ``dataset_fns`` maps a configurable name to ``(constructor, num_classes)``.
    ``sample`` draws from the offline ones (``digits8_datasets``, ``mnist5k_datasets``)
    unless ``names`` is given (the library's list also had MNIST, Fashion-MNIST, CIFAR
    and ImageNet, which need downloaded files here).
    """

    dataset_fns: Mapping[str, tuple[Callable[..., Any], int]] = {
        name: (fn, 10) for name, fn in _IMAGE_FNS.items()
    }
    offline: tuple[str, ...] = ("digits8_datasets", "mnist5k_datasets")

    @classmethod
    def sample(cls, key: jax.Array, names: Sequence[str] | None = None) -> str:
        """Draws a dataset's configurable name, uniformly among the sorted names.

        Args:
          key: a concrete PRNG key.
          names: the candidates (default: :attr:`offline`).

        Returns:
          The name (e.g. ``"digits8_datasets"``).
        """
        return choice(key, sorted(names or cls.offline))

    @classmethod
    def num_classes(cls, cfg: str) -> int:
        """The number of classes of a sampled dataset.

        Args:
          cfg: a name drawn by :meth:`sample`.

        Returns:
          The number of classes.
        """
        return cls.dataset_fns[cfg][1]

    @classmethod
    def get_dataset(cls, cfg: str, batch_size: int, image_size: Sequence[int]):
        """Builds the datasets of a sampled name.

        Args:
          cfg: a name drawn by :meth:`sample`.
          batch_size: examples per batch.
          image_size: ``(H, W)`` to resize to.

        Returns:
          The :class:`~learnopt.tasks.datasets.base.Datasets`.
        """
        return cls.dataset_fns[cfg][0](batch_size=batch_size, image_size=image_size)


# -------------------------------------------------------------------- traced choices


class SampleActivation:
    """A traced choice among activation functions (ReLU twice as likely), as the library."""

    acts: tuple[Callable[[jax.Array], jax.Array], ...] = (
        jax.nn.relu,
        jax.nn.relu,
        jax.nn.relu6,
        jax.nn.selu,
        jnp.tanh,
        jnp.cos,
        jnp.sin,
        jax.nn.sigmoid,
        jax.nn.silu,
        jax.nn.swish,
        jax.nn.gelu,
        functools.partial(jax.nn.leaky_relu, negative_slope=-0.5),
    )

    @classmethod
    def sample(cls, key: jax.Array) -> dict[str, jax.Array]:
        """Draws, traced, the index of an activation in :attr:`acts`.

        Args:
          key: a PRNG key (may be traced).

        Returns:
          ``{"index": int32 scalar}``.
        """
        return {"index": jax.random.randint(key, (), 0, len(cls.acts), jnp.int32)}

    @classmethod
    def get_dynamic(cls, act: Mapping[str, jax.Array]) -> Callable[[jax.Array], jax.Array]:
        """The activation as a function of a traced index (``lax.switch``).

        Args:
          act: a sample of :meth:`sample` (its index may be traced).

        Returns:
          ``x -> acts[index](x)``.
        """

        def fn(x: jax.Array) -> jax.Array:
            return jax.lax.switch(act["index"], cls.acts, x)

        return fn

    @classmethod
    def get_static(cls, act: Mapping[str, Any]) -> Callable[[jax.Array], jax.Array]:
        """The activation of a concrete sample.

        Args:
          act: a sample of :meth:`sample` with a concrete index.

        Returns:
          The activation function ``acts[index]``.
        """
        return cls.acts[int(act["index"])]


def _fans(shape: Sequence[int]) -> tuple[int, int]:
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[:-2])  # conv kernels: (..., in, out)
    return shape[-2] * receptive, shape[-1] * receptive


def orthonormalize_columns(a: jax.Array) -> jax.Array:
    """The ``Q`` of ``a = QR`` with ``diag(R) > 0``, for ``a`` of shape ``(m, n)``, ``m >= n``.

    Classical Gram-Schmidt with one reorthogonalization pass ("CGS2"; Giraud et al. 2005,
    "Rounding error analysis of the classical Gram-Schmidt orthogonalization process"),
    in plain XLA operations. Not ``jnp.linalg.qr``: batched (under ``vmap``) inside a loop,
    its LAPACK kernel fans out over XLA:CPU's intra-op thread pool from a thread of that
    pool and, on a 2-core machine, can deadlock (every inner-run reset of a parametric
    family with orthogonal initialization runs inside the truncation's loop).

    Args:
      a: ``[m, n]`` with ``m >= n`` and full column rank.

    Returns:
      ``Q``, ``[m, n]`` with orthonormal columns, in ``a``'s dtype.
    """
    n = a.shape[1]

    def column(j, q):
        v = jax.lax.dynamic_index_in_dim(a, j, axis=1, keepdims=False)
        for _ in range(2):  # columns >= j of q are still zero: no mask needed
            v = v - q @ (q.T @ v)
        return jax.lax.dynamic_update_index_in_dim(q, v / jnp.linalg.norm(v), j, axis=1)

    return jax.lax.fori_loop(0, n, column, jnp.zeros_like(a))


def orth_init(shape, dtype, key, scale=1.0, axis=-1) -> jax.Array:
    """A scaled random orthogonal matrix (Saxe et al. 2014), flattened over ``axis``.

    Saxe, McClelland and Ganguli, "Exact solutions to the nonlinear dynamics of learning
    in deep linear neural networks", arXiv:1312.6120.

    Args:
      shape: the shape, of rank >= 2.
      dtype: the dtype of the result.
      key: a PRNG key.
      scale: the factor on the orthogonal matrix.
      axis: the axis of the matrix's rows (the other axes are flattened into its columns).

    Returns:
      ``scale * Q`` reshaped to ``shape``.

    Raises:
      ValueError: ``shape`` of rank below 2.
    """
    if len(shape) < 2:
        raise ValueError("orth_init needs a shape of rank >= 2")
    n_rows = shape[axis]
    n_cols = math.prod(shape) // n_rows
    mat_shape = (n_rows, n_cols) if n_rows > n_cols else (n_cols, n_rows)
    q = orthonormalize_columns(jax.random.normal(key, mat_shape, jnp.float32))
    if n_rows < n_cols:
        q = q.T
    q = jnp.reshape(q, (n_rows, *np.delete(np.asarray(shape), axis)))
    return (scale * jnp.moveaxis(q, 0, axis)).astype(dtype)


def uniform_scale_init(shape, dtype, key, scale=1.0) -> jax.Array:
    """Uniform in ``+-scale * sqrt(3 / prod(shape[:-1]))``.

    Args:
      shape: the shape.
      dtype: the dtype of the result.
      key: a PRNG key.
      scale: the factor on the bound.

    Returns:
      The array.
    """
    limit = math.sqrt(3.0 / max(1, math.prod(shape[:-1]))) * scale
    return jax.random.uniform(key, shape, jnp.float32, -1.0, 1.0).astype(dtype) * jnp.asarray(
        limit, dtype
    )


def truncated_normal_init(shape, dtype, key, stddev, mean=0.0) -> jax.Array:
    """``mean + stddev * truncated_normal(-2, 2)``.

    Args:
      shape: the shape.
      dtype: the dtype of the result.
      key: a PRNG key.
      stddev: the scale of the unit truncated normal.
      mean: the shift.

    Returns:
      The array.
    """
    x = jax.random.truncated_normal(key, -2.0, 2.0, shape, jnp.float32)
    return (stddev * x + mean).astype(dtype)


def variance_scale_init(shape, dtype, key, scale, mode="fan_in", distribution="truncated_normal"):
    """Variance scaling: variance ``scale / fan`` (fan_in, fan_out or their mean).

    Args:
      shape: the shape (conv kernels ``(..., in, out)``: the fans include the
        receptive field).
      dtype: the dtype of the result.
      key: a PRNG key.
      scale: the variance times the fan.
      mode: ``"fan_in"``, ``"fan_out"``, or anything else for their mean.
      distribution: ``"truncated_normal"`` (rescaled to the variance), ``"normal"``, or
        anything else for uniform.

    Returns:
      The array.
    """
    fan_in, fan_out = _fans(shape)
    fan = {"fan_in": fan_in, "fan_out": fan_out}.get(mode, (fan_in + fan_out) / 2.0)
    variance = scale / max(1.0, fan)
    if distribution == "truncated_normal":
        # 0.8796... is the stddev of a unit normal truncated to [-2, 2].
        return truncated_normal_init(shape, dtype, key, jnp.sqrt(variance) / 0.87962566103423978)
    if distribution == "normal":
        return (jax.random.normal(key, shape, jnp.float32) * jnp.sqrt(variance)).astype(dtype)
    limit = jnp.sqrt(3.0 * variance)
    return jax.random.uniform(key, shape, jnp.float32, -1.0, 1.0).astype(dtype) * limit.astype(
        dtype
    )


class SampleInitializer:
    """A traced choice of weight initializer and scale (uniform in ``[0.5, 2]``).

    Initializers: orthogonal, uniform scaled, variance scaling with truncated normal,
    normal and uniform distributions, each multiplied by ``init_scale``.
    """

    inits: tuple[Callable[..., jax.Array], ...] = (
        lambda shape, dtype, key, scale: orth_init(shape, dtype, key, scale),
        lambda shape, dtype, key, scale: uniform_scale_init(shape, dtype, key, scale),
        lambda shape, dtype, key, scale: variance_scale_init(shape, dtype, key, scale),
        lambda shape, dtype, key, scale: variance_scale_init(
            shape, dtype, key, scale, distribution="normal"
        ),
        lambda shape, dtype, key, scale: variance_scale_init(
            shape, dtype, key, scale, distribution="uniform"
        ),
    )

    @classmethod
    def sample(cls, key: jax.Array) -> dict[str, jax.Array]:
        """Draws, traced, an initializer index and ``init_scale ~ U[0.5, 2)``.

        Args:
          key: a PRNG key (may be traced).

        Returns:
          ``{"index": int32 scalar, "init_scale": float32 scalar}``.
        """
        k1, k2 = jax.random.split(key)
        return {
            "index": jax.random.randint(k1, (), 0, len(cls.inits), jnp.int32),
            "init_scale": jax.random.uniform(k2, (), jnp.float32, 0.5, 2.0),
        }

    @classmethod
    def get_dynamic(cls, cfg: Mapping[str, jax.Array]) -> Callable[..., jax.Array]:
        """An initializer switching on ``cfg["index"]``, for Flax or for Haiku.

        Called as Flax calls initializers, ``init(key, shape, dtype)`` (the key an array);
        called as Haiku does, ``init(shape, dtype)`` (the first argument a shape), the key
        is Haiku's ``hk.next_rng_key()``, as in the library (whose initializer is Haiku's).

        Args:
          cfg: a sample of :meth:`sample` (its arrays may be traced).

        Returns:
          The initializer; it draws in float32 and casts to ``dtype``.
        """

        def init(*args: Any) -> jax.Array:
            if args and not isinstance(args[0], jax.Array | np.ndarray):  # Haiku's call
                haiku = sys.modules.get("haiku")
                if haiku is None:
                    raise TypeError(
                        "SampleInitializer.get_dynamic(cfg) takes (key, shape, dtype); "
                        "(shape, dtype) is Haiku's convention and needs haiku imported"
                    )
                key, (shape, dtype) = haiku.next_rng_key(), (*args, jnp.float32)[:2]
            else:
                key, shape, dtype = (*args, jnp.float32)[:3]
            shape = tuple(int(s) for s in shape)
            branches = [functools.partial(fn, shape, jnp.float32, key) for fn in cls.inits]
            out = jax.lax.switch(cfg["index"], branches, cfg["init_scale"])
            return out.astype(dtype)

        return init


def parametric_normalizer(loss: jax.Array, num_classes: int) -> jax.Array:
    """The library's normalizer of sampled classification tasks.

    Non-finite values become ``log(2 C)``; the loss is clipped to ``[0, log(2 C)]``, then
    mapped by ``(l - log(C / 5)) * 10 / log(C)``.

    Args:
      loss: a loss.
      num_classes: ``C``.

    Returns:
      The normalized loss.
    """
    max_class = math.log(2 * num_classes)
    loss = jnp.nan_to_num(loss, nan=max_class, posinf=max_class, neginf=max_class)
    return (jnp.clip(loss, 0.0, max_class) - math.log(num_classes / 5)) * 10 / math.log(num_classes)


def task_from_sample_task_family_fn(
    sample_task_family_fn: Callable[[jax.Array], cfgobject.CFGObject], seed: int
) -> tasks_base.Task:
    """One task: a family configuration from ``sample_task_family_fn``, then a member.

    Args:
      sample_task_family_fn: ``key -> CFGObject`` of a family (e.g. ``sample_image_mlp``).
      seed: the seed of both draws.

    Returns:
      The task.
    """
    key1, key2 = jax.random.split(jax.random.PRNGKey(seed))
    family = cfgobject.object_from_config(sample_task_family_fn(key1))
    return family.task_fn(family.sample(key2))
