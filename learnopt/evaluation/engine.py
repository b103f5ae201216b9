"""The training engine: every sweep on one task, in lockstep, one XLA program per chunk.

For one task and a list of sweeps (:mod:`learnopt.evaluation.sweeps`), every sweep's
runs (sweep points x seeds) are one ``vmap``: the hyperparameters are traced arrays, so
a 9-point learning-rate sweep over 3 seeds is one XLA program, which costs little more
than one run. Training proceeds in chunks of ``eval_every`` steps: each chunk is one
jitted ``lax.scan`` whose batches (``[eval_every, seeds, batch, ...]``) are fetched on
the host and passed in. All sweeps advance in lockstep on the *same* fetched chunk,
so every optimizer sees exactly the same data:

* seed ``s`` draws its own batches (interleaved from the task's ``train`` iterator:
  step ``t`` of seed ``s`` is batch ``t * num_seeds + s`` of the stream), the same for
  every optimizer and every sweep point; with a freshly built task (tasks given by
  name are built fresh for each evaluation) the whole evaluation is deterministic;
* seed ``s`` initializes the params with the same key for every optimizer, and step
  ``t`` uses the same loss / optimizer keys (``fold_in`` of the seed's key by ``t``).

Params are cast to ``param_dtype`` (float32 by default) after ``task.init``. How the
runs train is one :class:`TrainingSettings`, shared by :class:`TaskEvaluator`, the
runner (:mod:`learnopt.evaluation.runner`) and the baseline cache's key; what they
record is described in :mod:`learnopt.evaluation.results`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from learnopt.evaluation import config
from learnopt.evaluation.results import Curves, TaskResult
from learnopt.evaluation.sweeps import Sweep
from learnopt.tasks import base as tasks_base

PyTree = Any

__all__ = ["TrainingSettings", "training_settings", "TaskEvaluator"]


@dataclasses.dataclass(frozen=True)
class TrainingSettings:
    """How every run of an evaluation trains (checked when built).

    Attributes:
      num_steps: training steps per run.
      num_seeds: seeds per sweep point.
      eval_every: steps per chunk and between valid evaluations (``None``:
        ``min(num_steps, max(10, num_steps // 20))``; see :attr:`steps_per_eval`).
      valid_split: ``inner_valid``, ``outer_valid`` (default), ``test`` or ``train``.
      valid_batches: fixed batches of the valid split per evaluation.
      seed: base seed; run seed ``s`` uses ``fold_in(PRNGKey(seed), s)``.
      param_dtype: dtype the params are cast to after ``task.init`` (``None``: keep).
      vectorize: how the runs (sweep points x seeds) of one program are laid out:
        ``"vmap"`` (batched: one step of every run at once), ``"map"`` (``lax.map``:
        the runs one after another inside the same program) or ``"auto"``: on CPU,
        ``vmap`` for losses made of plain matrix products (MLPs), ``map`` for
        convolutions (batched over per-run kernels they become grouped convolutions,
        several times slower on XLA:CPU), recurrent loops and attention; ``vmap`` on
        accelerators.
    """

    num_steps: int
    num_seeds: int = config.NUM_SEEDS
    eval_every: int | None = None
    valid_split: str = config.VALID_SPLIT
    valid_batches: int = config.VALID_BATCHES
    seed: int = config.SEED
    param_dtype: Any = jnp.float32  # the one default that needs JAX to be written
    vectorize: str = config.VECTORIZE

    def __post_init__(self) -> None:
        _check_int("num_steps", self.num_steps, 1)
        _check_int("num_seeds", self.num_seeds, 1)
        _check_int("valid_batches", self.valid_batches, 1)
        if self.eval_every is not None:
            _check_int("eval_every", self.eval_every, 1)
        if self.valid_split not in config.VALID_SPLITS:
            raise ValueError(
                "valid_split must be one of train, inner_valid, outer_valid, test; got "
                f"{self.valid_split!r}"
            )
        if self.vectorize not in config.VECTORIZE_CHOICES:
            raise ValueError(f"vectorize must be 'auto', 'vmap' or 'map', got {self.vectorize!r}")
        for name in ("num_steps", "num_seeds", "valid_batches", "seed"):
            object.__setattr__(self, name, int(getattr(self, name)))
        if self.eval_every is not None:
            object.__setattr__(self, "eval_every", int(self.eval_every))

    @property
    def steps_per_eval(self) -> int:
        """``eval_every`` with its default filled in, at most ``num_steps``."""
        every = self.eval_every
        if every is None:
            every = min(self.num_steps, max(10, self.num_steps // 20))
        return int(min(every, self.num_steps))


def training_settings(
    settings: TrainingSettings | None = None, **overrides: Any
) -> TrainingSettings:
    """``settings`` with ``overrides`` applied, or new settings from the overrides alone.

    Args:
      settings: settings to start from, or ``None``.
      **overrides: fields of :class:`TrainingSettings` (``num_steps=``, ``num_seeds=``,
        ...), the keyword arguments that the evaluation functions accept.

    Returns:
      The :class:`TrainingSettings` (checked).

    Raises:
      TypeError: ``settings`` is not a :class:`TrainingSettings`, an override is not one
        of its fields, or ``num_steps`` is missing.
      ValueError: a value is out of range.
    """
    if settings is None:
        return TrainingSettings(**overrides)
    if not isinstance(settings, TrainingSettings):
        raise TypeError(f"settings must be a TrainingSettings, got {type(settings).__name__}")
    return dataclasses.replace(settings, **overrides) if overrides else settings


def _take(split: Any, shape: tuple[int, ...]) -> Any:
    """``prod(shape)`` batches stacked ``[*shape, ...]`` from an iterator (``take`` if any)."""
    if hasattr(split, "take"):
        return split.take(*shape)
    count = math.prod(shape)
    batches = [next(split) for _ in range(count)]
    return jax.tree_util.tree_map(
        lambda *xs: np.stack(xs).reshape(*shape, *np.shape(xs[0])), *batches
    )


def _cast_params(params: PyTree, dtype: Any) -> PyTree:
    if dtype is None:
        return params

    def cast(x: Any) -> Any:
        x = jnp.asarray(x)
        return x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x

    return jax.tree_util.tree_map(cast, params)


class TaskEvaluator:
    """Trains every sweep on one task in lockstep; :meth:`run` may be called repeatedly.

    Each sweep gets two jitted programs, compiled once per evaluator: ``_init_runs``
    (params, optimizer states and the valid loss at step 0 of every run) and
    ``_train_chunk`` (``eval_every`` steps of every run as one ``lax.scan``, then the
    valid loss). Batches come from the task's iterators where they stand: build the
    evaluator on a fresh task for a reproducible run
    (:func:`learnopt.evaluation.runner.evaluate_task` does).

    Args:
      task: the task.
      sweeps: the sweeps to train (names must be distinct).
      settings: how the runs train (:class:`TrainingSettings`).
      **overrides: fields of :class:`TrainingSettings` given as keywords
        (``num_steps=``, ``num_seeds=``, ``eval_every=``, ``valid_split=``,
        ``valid_batches=``, ``seed=``, ``param_dtype=``, ``vectorize=``), alone or on top
        of ``settings``.
    """

    def __init__(
        self,
        task: tasks_base.Task,
        sweeps: Sequence[Sweep],
        *,
        settings: TrainingSettings | None = None,
        **overrides: Any,
    ):
        if not isinstance(task, tasks_base.Task):
            raise TypeError(f"task must be a Task, got {type(task).__name__}")
        sweeps = list(sweeps)
        if not sweeps or not all(isinstance(s, Sweep) for s in sweeps):
            raise TypeError("sweeps must be a non-empty sequence of Sweep")
        names = [s.name for s in sweeps]
        if len(set(names)) != len(names):
            raise ValueError(f"sweep names must be distinct, got {names}")
        self.task = task
        self.sweeps = sweeps
        self.settings = training_settings(settings, **overrides)
        vectorize = self.settings.vectorize
        self._sequential: bool | None = None if vectorize == "auto" else vectorize == "map"
        self._fns = [self._build(s) for s in sweeps]
        self._init_task: Callable | None = None

    # -- the settings, as attributes of the evaluator
    @property
    def num_steps(self) -> int:
        """Training steps per run."""
        return self.settings.num_steps

    @property
    def num_seeds(self) -> int:
        """Seeds per sweep point."""
        return self.settings.num_seeds

    @property
    def eval_every(self) -> int:
        """Steps per chunk and between valid evaluations (resolved)."""
        return self.settings.steps_per_eval

    @property
    def valid_split(self) -> str:
        """The split of the valid loss."""
        return self.settings.valid_split

    @property
    def valid_batches(self) -> int:
        """Fixed batches of the valid split per evaluation."""
        return self.settings.valid_batches

    @property
    def seed(self) -> int:
        """The base seed."""
        return self.settings.seed

    @property
    def param_dtype(self) -> Any:
        """The dtype params are cast to after ``task.init`` (``None``: kept)."""
        return self.settings.param_dtype

    @property
    def vectorize(self) -> str:
        """``"auto"``, ``"vmap"`` or ``"map"`` (see :class:`TrainingSettings`)."""
        return self.settings.vectorize

    # -- the per-run maths (one sweep point, one seed), vmapped twice in _build
    def _build(self, sweep: Sweep) -> tuple[Callable, Callable]:
        task, num_steps, dtype = self.task, self.num_steps, self.param_dtype

        def valid_loss(opt, state, key, vbatches):
            params, model_state = opt.get_params_state(state)

            def one(k, batch):
                loss, _ = task.loss_with_state(params, model_state, k, batch)
                return jnp.asarray(loss, jnp.float32)

            keys = jax.random.split(key, self.valid_batches)
            if vbatches is None:
                return jnp.mean(jax.vmap(lambda k: one(k, None))(keys))
            return jnp.mean(jax.vmap(one)(keys, vbatches))

        def init_one(hparams, params, model_state, seed_key, vbatches):
            opt = sweep.make_opt(hparams["hparams"])
            k_init, _, k_valid = jax.random.split(seed_key, 3)
            _, k_opt = jax.random.split(k_init)
            params = _cast_params(params, dtype)
            state = opt.init(params, model_state, num_steps=num_steps, key=k_opt)
            return state, valid_loss(opt, state, jax.random.fold_in(k_valid, 0), vbatches)

        def chunk_one(hparams, state, seed_key, ts, batches, eval_index, vbatches):
            opt = sweep.make_opt(hparams["hparams"])
            _, k_train, k_valid = jax.random.split(seed_key, 3)

            def step(state, xs):
                t, batch = xs
                k_loss, k_opt = jax.random.split(jax.random.fold_in(k_train, t))
                params, model_state = opt.get_params_state(state)
                (loss, model_state), grads = jax.value_and_grad(task.loss_with_state, has_aux=True)(
                    params, model_state, k_loss, batch
                )
                state = opt.update(state, grads, loss, model_state=model_state, key=k_opt)
                return state, jnp.asarray(loss, jnp.float32)

            state, losses = jax.lax.scan(step, state, (ts, batches))
            valid = valid_loss(opt, state, jax.random.fold_in(k_valid, eval_index), vbatches)
            return state, losses, valid

        # Seeds: keys and batches mapped, hparams shared. Sweep points: hparams and
        # states mapped, keys and batches shared (every point sees the same data).
        def _init_runs(hparams, params, model_states, seed_keys, vbatches):
            per_seed = self._over_runs(init_one, (None, 0, 0, 0, None))
            return self._over_runs(per_seed, (0, None, None, None, None))(
                hparams, params, model_states, seed_keys, vbatches
            )

        def _train_chunk(hparams, states, seed_keys, ts, batches, eval_index, vbatches):
            fn = lambda h, s, k, b: chunk_one(h, s, k, ts, b, eval_index, vbatches)
            per_seed = self._over_runs(fn, (None, 0, 0, 1))
            return self._over_runs(per_seed, (0, 0, None, None))(
                hparams, states, seed_keys, batches
            )

        return jax.jit(_init_runs), jax.jit(_train_chunk)

    def _over_runs(self, fn: Callable, in_axes: tuple) -> Callable:
        """``vmap(fn, in_axes)``, or the same mapping with ``lax.map`` (see ``vectorize``)."""
        if not self._sequential:
            return jax.vmap(fn, in_axes=in_axes)
        mapped = [i for i, axis in enumerate(in_axes) if axis is not None]

        def run(*args):
            xs = tuple(
                jax.tree_util.tree_map(lambda x, a=in_axes[i]: jnp.moveaxis(x, a, 0), args[i])
                for i in mapped
            )

            def one(x):
                full = list(args)
                for i, value in zip(mapped, x, strict=True):
                    full[i] = value
                return fn(*full)

            return jax.lax.map(one, xs)

        return run

    def _batching_helps(self, params: PyTree, model_states: PyTree, vbatches: Any) -> bool:
        """Whether XLA:CPU runs this task's runs faster batched than one after another.

        Measured on the held-out suite (``benchmarks/bench_eval.py``): batched MLPs cost
        0.3-0.7 of separate runs, while a convolution over per-run kernels (a grouped
        convolution), a recurrent loop or batched attention products cost 2-3x more
        batched. So: batch when the loss (traced, never run) is loop-free and its only
        products are plain matrix products, with no convolution.
        """
        one = lambda tree: jax.tree_util.tree_map(lambda x: x[0], tree)
        closed = jax.make_jaxpr(self.task.loss_with_state)(
            one(params), one(model_states), jax.random.PRNGKey(0), one(vbatches)
        )
        return _matrix_products_only(closed.jaxpr)

    def _seed_keys(self) -> jax.Array:
        base = jax.random.PRNGKey(self.seed)
        return jnp.stack([jax.random.fold_in(base, s) for s in range(self.num_seeds)])

    def _init_params(self, seed_keys: jax.Array) -> tuple[PyTree, PyTree]:
        """Every seed's ``(params, model_state)``, stacked; shared by all sweeps.

        One jitted ``init_with_state`` called per seed: random initializers compile
        slowly on CPU, and vmapping them would compile a second, larger program.
        """
        if self._init_task is None:
            self._init_task = jax.jit(self.task.init_with_state)
        outs = []
        for key in seed_keys:
            k_init = jax.random.split(key, 3)[0]
            outs.append(self._init_task(jax.random.split(k_init)[0]))
        return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *outs)

    def run(self, progress: Callable[[int], None] | None = None) -> TaskResult:
        """Trains every sweep for ``num_steps`` steps.

        Args:
          progress: called with the number of steps just finished (per chunk).

        Returns:
          A :class:`~learnopt.evaluation.results.TaskResult`, one
          :class:`~learnopt.evaluation.results.Curves` per sweep.
        """
        start = time.perf_counter()
        datasets = self.task.datasets
        if datasets is not None:
            vbatches = jax.device_put(
                _take(getattr(datasets, self.valid_split), (self.valid_batches,))
            )
            train = datasets.train
        else:
            vbatches, train = None, None
        seed_keys = self._seed_keys()
        params, model_states = self._init_params(seed_keys)
        if self._sequential is None:
            self._sequential = jax.default_backend() == "cpu" and not self._batching_helps(
                params, model_states, vbatches
            )
        hps = [_sweep_hparams(s) for s in self.sweeps]
        states, train_losses, valid_losses = [], [], []
        for (init_fn, _), h in zip(self._fns, hps, strict=True):
            st, v0 = init_fn(h, params, model_states, seed_keys, vbatches)
            states.append(st)
            train_losses.append([])
            valid_losses.append([v0])
        valid_steps = [0]
        done, eval_index = 0, 0
        pending: list[tuple[int, Any]] = []
        while done < self.num_steps:
            length = min(self.eval_every, self.num_steps - done)
            if train is not None:
                batches = jax.device_put(_take(train, (length, self.num_seeds)))
            else:
                batches = None
            eval_index += 1
            ts = jnp.arange(done, done + length, dtype=jnp.int32)
            e = jnp.asarray(eval_index, jnp.int32)
            for i, ((_, chunk_fn), h) in enumerate(zip(self._fns, hps, strict=True)):
                st, losses, valid = chunk_fn(h, states[i], seed_keys, ts, batches, e, vbatches)
                states[i] = st
                train_losses[i].append(losses)
                valid_losses[i].append(valid)
            done += length
            valid_steps.append(done)
            # Wait for the previous chunk once this one is queued: fetching the next
            # batches overlaps the device's work, at most two chunks of batches are
            # alive, and the progress bar counts finished steps only.
            pending.append((length, valid_losses[-1][-1]))
            if len(pending) > 1:
                self._finish(pending.pop(0), progress)
        for item in pending:
            self._finish(item, progress)
        curves = {}
        for sweep, tl, vl in zip(self.sweeps, train_losses, valid_losses, strict=True):
            tl, vl = jax.device_get((tl, vl))
            curves[sweep.name] = Curves(
                name=sweep.name,
                labels=sweep.labels,
                values=dict(sweep.values),
                train_loss=np.concatenate(tl, axis=-1).astype(np.float32),
                valid_steps=np.asarray(valid_steps, np.int64),
                valid_loss=np.stack(vl, axis=-1).astype(np.float32),
            )
        return TaskResult(
            task=self.task.name,
            curves=curves,
            num_steps=self.num_steps,
            num_seeds=self.num_seeds,
            eval_every=self.eval_every,
            valid_split=self.valid_split,
            valid_batches=self.valid_batches,
            seconds=time.perf_counter() - start,
        )

    @staticmethod
    def _finish(item: tuple[int, Any], progress: Callable[[int], None] | None) -> None:
        steps, marker = item
        jax.block_until_ready(marker)
        if progress is not None:
            progress(steps)


def _matrix_products_only(jaxpr: Any) -> bool:
    """No convolution, no loop, and every ``dot_general`` on operands of rank <= 2."""
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name in ("conv_general_dilated", "scan", "while"):
            return False
        if name == "dot_general" and any(len(getattr(v.aval, "shape", ())) > 2 for v in eqn.invars):
            return False
        for param in eqn.params.values():
            for sub in param if isinstance(param, tuple | list) else (param,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns") and not _matrix_products_only(inner):
                    return False
    return True


def _sweep_hparams(sweep: Sweep) -> PyTree:
    """The sweep's hparams plus a mapped index (so that empty hparams still vmap)."""
    return {"index": jnp.arange(sweep.size, dtype=jnp.int32), "hparams": sweep.hparams}


def _check_int(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
