"""Shared plumbing of learnopt's Flax-model tasks (conv nets, ResNets, auto-encoders; the
language models' in :mod:`~learnopt.tasks.fixed._language`).

:class:`FlaxModelTask` turns a ``flax.linen`` module and a loss into a
:class:`~learnopt.tasks.base.Task`:

* ``params`` is the module's ``"params"`` collection (a plain nested dict), created in
  ``param_dtype``; the other collections (``"batch_stats"`` of batch norm) are the
  ``model_state``, or ``None`` for stateless models. ``loss_with_state`` returns the
  updated state cast back to the dtypes it came in with, so a jitted training step
  compiles once.
* Shapes come from a static ``abstract_batch``: ``init`` never touches the data, and the
  datasets are created on first access of ``task.datasets`` (data loads at the first batch).
* Layers run in the promoted dtype of their inputs and parameters (float32 images with
  bfloat16 params run in float32); losses are reduced in at least float32.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from learnopt import _validate
from learnopt.tasks import base as tasks_base
from learnopt.tasks.datasets import base as datasets_base

Params = Any
ModelState = Any
Batch = Any

DatasetsOrFactory = Any  # a Datasets, or a zero-argument callable returning one


def factory_doc(summary: str, task_class: str) -> str:
    """The docstring of a registered task's factory: ``summary``, its argument and result.

    Args:
      summary: what the task is (one line: data, model, batch size).
      task_class: the class the factory builds, as Sphinx should link it (``ConvTask``).

    Returns:
      The docstring, with ``Args:`` (``param_dtype``) and ``Returns:`` sections.
    """
    return (
        f"{summary}\n\n"
        "Args:\n"
        "  param_dtype: float dtype the parameters are created in (default float32; e.g.\n"
        "    ``jnp.bfloat16``); batches and the loss keep their own dtypes.\n\n"
        "Returns:\n"
        f"  The task, a :class:`{task_class}`.\n"
    )


def publish(
    namespace: dict[str, Any], name: str, make: Callable[..., Any], doc: str, registry: Any = None
) -> None:
    """Publishes a factory: names it ``name``, registers it and binds it in its module.

    Args:
      namespace: the module's ``globals()`` (its ``__all__`` gets ``name`` too).
      name: the registered and public name.
      make: the factory.
      doc: its docstring (e.g. :func:`factory_doc`'s).
      registry: where to register it (default :data:`~learnopt.tasks.base.TASKS`).
    """
    make.__name__ = make.__qualname__ = name
    make.__doc__ = doc
    namespace[name] = (registry or tasks_base.TASKS).register(make)
    namespace["__all__"].append(name)


def softmax_cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Per-example ``-log softmax(logits)[label]``, computed in at least float32.

    Args:
      logits: ``[..., num_classes]``.
      labels: integer class ids ``[...]``.

    Returns:
      The losses ``[...]``, in float32 (float64 for float64 logits).
    """
    logits = logits.astype(jnp.promote_types(logits.dtype, jnp.float32))
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    labels = jnp.asarray(labels).astype(jnp.int32)
    return -jnp.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]


def classification_normalizer(loss: jax.Array, num_classes: int) -> jax.Array:
    """Clips a cross-entropy loss to ``[0, 1.5 log(num_classes)]`` (1.5x chance).

    Args:
      loss: a cross-entropy loss.
      num_classes: the number of classes.

    Returns:
      The clipped loss.
    """
    return jnp.clip(loss, 0.0, 1.5 * math.log(num_classes))


def cast_floating(tree: Any, dtype: Any) -> Any:
    """Casts the floating leaves of ``tree`` to ``dtype`` (others unchanged).

    Args:
      tree: a pytree of arrays.
      dtype: the float dtype.

    Returns:
      A pytree of the same structure.
    """

    def cast(x):
        return x.astype(dtype) if jnp.issubdtype(jnp.result_type(x), jnp.floating) else x

    return jax.tree_util.tree_map(cast, tree)


def zeros_like_abstract(tree: Any) -> Any:
    """Concrete zeros with the shapes and dtypes of a tree of ``ShapeDtypeStruct``.

    Args:
      tree: a pytree of ``jax.ShapeDtypeStruct`` (or anything with ``shape`` and ``dtype``).

    Returns:
      A pytree of zero arrays of the same structure.
    """
    return jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), tree)


def image_abstract_batch(
    batch_size: int, image_shape: tuple[int, int, int]
) -> dict[str, jax.ShapeDtypeStruct]:
    """The abstract batch of an image classification task.

    Args:
      batch_size: examples per batch ``B``.
      image_shape: ``(H, W, C)``.

    Returns:
      ``{"image": float32 [B, H, W, C], "label": int32 [B]}`` as ``ShapeDtypeStruct`` s.
    """
    return {
        "image": jax.ShapeDtypeStruct((batch_size, *image_shape), jnp.float32),
        "label": jax.ShapeDtypeStruct((batch_size,), jnp.int32),
    }


def check_batch(name: str, batch: Any, abstract: dict[str, jax.ShapeDtypeStruct]) -> None:
    """Raises ValueError unless ``batch`` has the keys and trailing shapes of ``abstract``.

    Only the shapes after the leading (batch) axis are compared.

    Args:
      name: the task's name, for the message.
      batch: the batch to check.
      abstract: the expected ``{key: ShapeDtypeStruct}``.

    Raises:
      ValueError: ``batch`` is not a dict with those keys and shapes.
    """
    if not isinstance(batch, dict) or set(abstract) - set(batch):
        got = sorted(batch) if isinstance(batch, dict) else type(batch).__name__
        raise ValueError(f"{name}: batch must be a dict with keys {sorted(abstract)}, got {got}")
    for key, spec in abstract.items():
        shape = tuple(np.shape(batch[key]))
        if shape[1:] != tuple(spec.shape[1:]):
            raise ValueError(
                f"{name}: batch[{key!r}] must have shape [batch, "
                f"{', '.join(map(str, spec.shape[1:]))}], got {shape}"
            )


class FlaxModelTask(tasks_base.Task):
    """A task defined by a ``flax.linen`` module and a loss on its output.

    Subclasses implement :meth:`make_module` (a fresh module), :meth:`model_input`
    (what the module is called on) and :meth:`loss_from_output`. The module is called
    as ``module(x, train=True)``; modules without batch norm may ignore ``train``.

    Args:
      datasets: a :class:`~learnopt.tasks.datasets.base.Datasets` or a zero-argument
        callable returning one (called on first access of ``task.datasets``).
      abstract_batch: shapes and dtypes of one batch (``ShapeDtypeStruct`` s).
      param_dtype: dtype of the parameters made by ``init``.
      name: the task's name (default: the class name).
    """

    def __init__(
        self,
        datasets: DatasetsOrFactory,
        abstract_batch: dict[str, jax.ShapeDtypeStruct],
        *,
        param_dtype: Any = jnp.float32,
        name: str | None = None,
    ):
        if isinstance(datasets, datasets_base.Datasets):
            self._datasets, self._datasets_fn = datasets, None
        elif callable(datasets):
            self._datasets, self._datasets_fn = None, datasets
        else:
            raise TypeError(f"datasets must be a Datasets or a callable, got {datasets!r}")
        self.abstract_batch = dict(abstract_batch)
        self.param_dtype = jnp.dtype(param_dtype)
        if not jnp.issubdtype(self.param_dtype, jnp.floating):
            raise ValueError(f"param_dtype must be a float dtype, got {self.param_dtype}")
        self._name = name
        self._state_shapes: Any = None

    @property
    def datasets(self) -> datasets_base.Datasets:
        if self._datasets is None:
            self._datasets = self._datasets_fn()
        return self._datasets

    # -- what subclasses define
    def make_module(self) -> nn.Module:
        """A fresh ``flax.linen`` module (subclasses define it).

        Returns:
          The module, called as ``module(model_input(batch), train=True)``.
        """
        raise NotImplementedError

    def model_input(self, batch: Batch) -> jax.Array:
        """What the module is called on (subclasses define it).

        Args:
          batch: one batch.

        Returns:
          The module's input.
        """
        raise NotImplementedError

    def loss_from_output(self, output: jax.Array, batch: Batch) -> jax.Array:
        """The loss of the module's output on ``batch`` (subclasses define it).

        Args:
          output: the module's output.
          batch: the batch it was computed on.

        Returns:
          A scalar loss.
        """
        raise NotImplementedError

    # -- Task API
    def init_with_state(self, key: jax.Array) -> tuple[Params, ModelState]:
        """Initializes the module on a zero batch of ``abstract_batch`` (no data is read).

        Args:
          key: a PRNG key, split into the ``"params"`` and ``"dropout"`` keys of ``init``.

        Returns:
          ``(params, model_state)``: the ``"params"`` collection with its floats in
          ``param_dtype``, and the other collections as a dict, or None if there are none.
        """
        k_params, k_dropout = jax.random.split(key)
        dummy = zeros_like_abstract(self.abstract_batch)
        variables = self.make_module().init(
            {"params": k_params, "dropout": k_dropout}, self.model_input(dummy), train=True
        )
        variables = dict(variables)
        params = cast_floating(variables.pop("params"), self.param_dtype)
        return params, (variables or None)

    def _initial_state(self) -> ModelState:
        if self._state_shapes is None:
            shapes = jax.eval_shape(self.init_with_state, jax.random.key(0))[1]
            self._state_shapes = (shapes,)
        shapes = self._state_shapes[0]
        return None if shapes is None else zeros_like_abstract(shapes)

    def loss_with_state_and_aux(
        self, params: Params, state: ModelState, key: jax.Array, data: Batch
    ) -> tuple[jax.Array, ModelState, dict[str, jax.Array]]:
        """Applies the module in training mode, then :meth:`loss_from_output`.

        Args:
          params: the ``"params"`` collection.
          state: the other collections (e.g. ``"batch_stats"``); None for a fresh state.
          key: a PRNG key, the module's ``"dropout"`` rng (required, even without dropout).
          data: one batch matching ``abstract_batch``.

        Returns:
          ``(loss, new_state, {})``; the new state has the dtypes of ``state``.

        Raises:
          ValueError: ``data`` does not match ``abstract_batch``.
        """
        check_batch(self.name, data, self.abstract_batch)
        if state is None:
            # Batch statistics in training mode do not depend on the running averages,
            # so the plain ``loss`` of a batch-norm model uses a fresh state.
            state = self._initial_state()
        variables = {"params": params, **(state or {})}
        x = self.model_input(data)
        rngs = {"dropout": key}
        if state:
            output, updates = self.make_module().apply(
                variables, x, train=True, rngs=rngs, mutable=list(state)
            )
            new_state = jax.tree_util.tree_map(
                lambda new, old: new.astype(old.dtype), dict(updates), dict(state)
            )
        else:
            output = self.make_module().apply(variables, x, train=True, rngs=rngs)
            new_state = state
        return self.loss_from_output(output, data), new_state, {}

    def loss_with_state(
        self, params: Params, state: ModelState, key: jax.Array, data: Batch
    ) -> tuple[jax.Array, ModelState]:
        """The loss and the next model state (see :meth:`loss_with_state_and_aux`).

        Args:
          params: the ``"params"`` collection.
          state: the other collections; None for a fresh state.
          key: a PRNG key, the module's ``"dropout"`` rng (required).
          data: one batch.

        Returns:
          ``(loss, new_state)``.
        """
        loss, state, _ = self.loss_with_state_and_aux(params, state, key, data)
        return loss, state

    def loss(self, params: Params, key: jax.Array, data: Batch) -> jax.Array:
        """The loss of one batch, from a fresh model state (see :meth:`loss_with_state_and_aux`).

        Args:
          params: the ``"params"`` collection.
          key: a PRNG key, the module's ``"dropout"`` rng (required).
          data: one batch.

        Returns:
          A scalar loss.
        """
        return self.loss_with_state(params, None, key, data)[0]


class ImageClassifierTask(FlaxModelTask):
    """A Flax image classifier: mean softmax cross-entropy of ``module(image)``.

    Args:
      module_fn: zero-argument callable returning the ``flax.linen`` module (called at
        every ``init`` / ``loss``; the module maps ``[B, H, W, C]`` to logits).
      datasets: datasets or a factory (see :class:`FlaxModelTask`).
      image_shape: ``(H, W, C)``; num_classes: number of classes.
      batch_size: batch size of ``abstract_batch``.
      param_dtype, name: as for :class:`FlaxModelTask`.
    """

    def __init__(
        self,
        module_fn: Callable[[], nn.Module],
        datasets: DatasetsOrFactory,
        *,
        image_shape: tuple[int, int, int],
        num_classes: int,
        batch_size: int,
        param_dtype: Any = jnp.float32,
        name: str | None = None,
    ):
        super().__init__(
            datasets,
            image_abstract_batch(batch_size, tuple(image_shape)),
            param_dtype=param_dtype,
            name=name,
        )
        self._module_fn = module_fn
        self.image_shape = tuple(int(s) for s in image_shape)
        self.num_classes = int(num_classes)

    def make_module(self) -> nn.Module:
        """The module of ``module_fn``.

        Returns:
          ``module_fn()``.
        """
        return self._module_fn()

    def model_input(self, batch: Batch) -> jax.Array:
        """The batch's images (checked to be floats).

        Args:
          batch: ``{"image": [B, H, W, C], "label": [B]}``.

        Returns:
          ``batch["image"]``, unchanged.

        Raises:
          TypeError: the images are integers (pixels must be floats in ``[0, 1]``).
        """
        return _validate.float_images(f"{self.name}: batch['image']", batch["image"])

    def loss_from_output(self, output: jax.Array, batch: Batch) -> jax.Array:
        """The batch mean of the softmax cross-entropy of the logits.

        Args:
          output: logits ``[B, num_classes]``.
          batch: the batch, with ``"label"`` int ``[B]`` in ``[0, num_classes)``.

        Returns:
          A scalar loss, in at least float32.

        Raises:
          TypeError: non-integer labels.
          ValueError: (concrete) labels outside ``[0, num_classes)``.
        """
        labels = batch["label"]
        _validate.labels_in_range(f"{self.name}: batch['label']", labels, self.num_classes)
        return jnp.mean(softmax_cross_entropy(output, labels))

    def normalizer(self, loss: jax.Array) -> jax.Array:
        """Clips the loss to ``[0, 1.5 * log(num_classes)]``.

        Args:
          loss: a loss of this task.

        Returns:
          The clipped loss.
        """
        return classification_normalizer(loss, self.num_classes)


def image_datasets_factory(
    dataset: str, image_size: tuple[int, int] | None, batch_size: int
) -> tuple[Callable[[], datasets_base.Datasets], tuple[int, int, int], int]:
    """``(lazy datasets factory, image shape, num_classes)`` of a registered image dataset.

    Args:
      dataset: a registered image dataset name (``"mnist5k"``, ``"cifar10"``, ...).
      image_size: ``(H, W)`` to resize to, or None for the dataset's native size.
      batch_size: examples per batch.

    Returns:
      ``(make, (H, W, C), num_classes)``: calling ``make()`` builds the datasets
      (the shape and class count come from the dataset's spec, without loading data).
    """
    spec = datasets_base.dataset_spec(dataset)
    size = tuple(image_size) if image_size is not None else tuple(spec.image_shape[:2])

    def make() -> datasets_base.Datasets:
        return datasets_base.image_classification_datasets(
            spec.name, image_size=size, batch_size=batch_size
        )

    return make, (*size, spec.image_shape[2]), spec.num_classes


#: ``truncated_normal(-2, 2) / sqrt(fan_in)``: Haiku's default for Linear and Conv, which
#: the notes' library used throughout.
haiku_default_init = nn.initializers.variance_scaling(
    0.87962566103423978**2, "fan_in", "truncated_normal"
)


class MLP(nn.Module):
    """Dense layers of widths ``features``; ``activation`` between them (not after the last).

    Flattens all but the leading (batch) axis first.

    Attributes:
      features: the width of each dense layer; the last is the output width.
      activation: applied between layers.
      kernel_init: initializer of the weights (biases start at zero).
    """

    features: tuple[int, ...]
    activation: Callable[[jax.Array], jax.Array] = jax.nn.relu
    kernel_init: Any = haiku_default_init

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = True) -> jax.Array:
        """Applies the MLP.

        Args:
          x: ``[B, ...]``, flattened to ``[B, -1]``.
          train: unused (the MLP has no dropout or batch norm).

        Returns:
          ``[B, features[-1]]``.
        """
        x = jnp.reshape(x, (x.shape[0], -1))
        for i, width in enumerate(self.features):
            x = nn.Dense(width, kernel_init=self.kernel_init)(x)
            if i < len(self.features) - 1:
                x = self.activation(x)
        return x
