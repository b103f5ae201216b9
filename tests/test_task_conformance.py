"""Conformance sweep over every registered task and task family.

Each entry of ``tasks_base.TASKS`` and ``tasks_base.TASK_FAMILIES`` (a new one is swept by
adding its registration line) is checked, with an empty temporary data dir, for:

* ``datasets.abstract_batch`` (if the task has data) without touching the data: nothing
  is read or written, and the batches used below are synthesized from it (see
  :func:`synthesize_batch`), so the sweep needs no dataset on disk. To stay cheap the
  sweep uses at most ``MAX_EXAMPLES`` examples of a batch (tasks must accept any batch
  size, as the library's do);
* ``init_with_state`` and ``loss_with_state_and_aux``: finite, scalar float loss;
  finite normalizer;
* one jitted Adam training step (``value_and_grad`` of the loss, optimizer update,
  model state threaded through) that compiles exactly once over all its calls;
* descent: a short Adam run on one fixed batch with one fixed loss key (a deterministic
  objective, also for dropout and noisy losses: the key is reused on purpose) lowers
  the loss by at least ``MIN_DECREASE`` of its value, for one of ``LEARNING_RATES``
  (tried in order; the learning rate is an argument of the step, so trying another
  one does not recompile);
* families: ``sample`` is traceable (``vmap``-ed under ``jit``); the losses of vmapped
  members (init and loss inside the ``vmap``) equal those computed one by one; a
  sampled member passes the task checks above.

Compiles use the CPU backend's fast settings (the counts come from tracing).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from learnopt.optimizers import base as opt_base
from learnopt.tasks import base as tasks_base
from learnopt.testing import TraceCounter

TASK_NAMES = tasks_base.TASKS.names()
FAMILY_NAMES = tasks_base.TASK_FAMILIES.names()

MAX_EXAMPLES = 16  # examples per synthesized batch (the leading axis is cut to this)
STEPS = 8  # Adam steps of the descent check
LEARNING_RATES = (3e-3, 3e-4)  # e.g. 3072-input MLPs need the small one
MIN_DECREASE = 0.01  # relative to |initial loss|
NUM_MEMBERS = 2  # family members in the vmap check
FAST_COMPILE = (
    {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
    if jax.default_backend() == "cpu"
    else None
)


@pytest.fixture(scope="module")
def empty_data_dir(tmp_path_factory):
    """An empty data dir and manual dir: the sweep must never need (or write) data."""
    root = tmp_path_factory.mktemp("conformance_data")
    (root / "data").mkdir()
    (root / "manual").mkdir()
    from learnopt.tasks.datasets import base as datasets_base

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(datasets_base.ENV_DATA_DIR, str(root / "data"))
        mp.setenv(datasets_base.ENV_MANUAL_DIR, str(root / "manual"))
        yield root / "data"
    assert not any((root / "data").iterdir()), "the sweep wrote into the data dir"


def synthesize_batch(datasets: Any, seed: int = 0, max_examples: int | None = None) -> Any:
    """A batch with the dtypes and shapes of ``datasets.abstract_batch`` (``None`` if no data).

    The batch has structure to learn, so that a short run can show descent: floats are
    noisy copies of two random prototypes, in ``[0, 1]`` (along the leading axis; scalars
    are uniform); integers (labels, tokens) take the values 1, 2, 3 (below
    ``extra_info["num_classes"]`` or ``["vocab_size"]``; ``{0, 1}`` if that is 2 or
    unknown); booleans are fair coins. ``max_examples`` cuts the leading axis.
    """
    if datasets is None:
        return None
    abstract = datasets.abstract_batch
    assert abstract is not None, "a task with datasets must declare datasets.abstract_batch"
    info = getattr(datasets, "extra_info", None) or {}
    high = int(info.get("num_classes") or info.get("vocab_size") or 2)
    low = 1 if high > 2 else 0
    rng = np.random.default_rng(seed)

    def leaf(spec: Any) -> np.ndarray:
        shape = tuple(spec.shape)
        if shape and max_examples is not None:
            shape = (min(shape[0], max_examples), *shape[1:])
        dtype = np.dtype(spec.dtype)
        if dtype == np.bool_:
            return rng.integers(0, 2, shape).astype(bool)
        if np.issubdtype(dtype, np.integer):
            return rng.integers(low, min(high, low + 3), shape).astype(dtype)
        if np.issubdtype(dtype, np.floating) or dtype.kind == "V":  # V: bfloat16 & co.
            if not shape:
                return np.asarray(rng.uniform(0, 1), dtype)
            prototypes = rng.uniform(0, 1, (2, *shape[1:]))
            which = rng.integers(0, 2, shape[0])
            noise = rng.uniform(0, 1, shape)
            return (0.9 * prototypes[which] + 0.1 * noise).astype(dtype)
        raise TypeError(f"cannot synthesize a batch leaf of dtype {dtype}")

    return jax.tree.map(leaf, abstract)


def _finite(tree: Any) -> bool:
    leaves = [np.asarray(x) for x in jax.tree.leaves(tree)]
    return all(
        np.all(np.isfinite(x.astype(np.float64)))
        for x in leaves
        if np.issubdtype(x.dtype, np.inexact) or x.dtype.kind == "V"
    )


def check_task(task: tasks_base.Task, data_dir, datasets: Any = None) -> None:
    """The task checks of the module docstring (raises AssertionError on a failure).

    ``datasets`` defaults to ``task.datasets`` (a family member is fed its family's).
    """
    assert isinstance(task.name, str) and task.name
    datasets = task.datasets if datasets is None else datasets
    batch = synthesize_batch(datasets, max_examples=MAX_EXAMPLES)
    assert not any(data_dir.iterdir()), f"{task.name}: touching datasets wrote data"

    k_init, k_loss = jax.random.split(jax.random.key(0))
    params, state = jax.jit(task.init_with_state, compiler_options=FAST_COMPILE)(k_init)
    assert jax.tree.leaves(params), f"{task.name}: init made no params"
    assert _finite(params) and _finite(state), f"{task.name}: non-finite init"

    init_state = opt_base.Adam().init(params, model_state=state)

    def loss_fn(p, s, k, b):
        loss, s, aux = task.loss_with_state_and_aux(p, s, k, b)
        return loss, (s, aux)

    def step(opt_state, learning_rate, key, batch):
        opt = opt_base.Adam(learning_rate)
        p, s = opt.get_params_state(opt_state)
        (loss, (s, aux)), grads = jax.value_and_grad(loss_fn, has_aux=True)(p, s, key, batch)
        return opt.update(opt_state, grads, loss=loss, model_state=s), loss, aux

    counter = TraceCounter()
    jit_step = jax.jit(counter.wrap(step), compiler_options=FAST_COMPILE)
    runs = {}
    for lr in LEARNING_RATES:
        opt_state, loss, aux = jit_step(init_state, jnp.float32(lr), k_loss, batch)
        if not runs:
            assert loss.shape == () and jnp.issubdtype(loss.dtype, jnp.floating), loss
            assert _finite(loss) and _finite(aux), f"{task.name}: loss {loss}, aux {aux}"
            assert _finite(task.normalizer(loss)), f"{task.name}: non-finite normalizer"
        losses = runs[lr] = [float(loss)]
        for _ in range(STEPS):  # the last call only measures the loss after STEPS updates
            opt_state, loss, _ = jit_step(opt_state, jnp.float32(lr), k_loss, batch)
            losses.append(float(loss))
        if np.isfinite(losses[-1]) and losses[0] - losses[-1] > MIN_DECREASE * abs(losses[0]):
            break
    else:
        raise AssertionError(
            f"{task.name}: Adam did not lower the loss on a fixed batch in {STEPS} steps at "
            f"any learning rate; losses per learning rate: {runs}"
        )
    counter.assert_count(1, f"{task.name}'s training step")


@pytest.mark.parametrize("name", TASK_NAMES)
def test_task_conforms(name, empty_data_dir):
    check_task(tasks_base.TASKS.get(name), empty_data_dir)


@pytest.mark.parametrize("name", FAMILY_NAMES)
def test_family_conforms(name, empty_data_dir):
    family = tasks_base.TASK_FAMILIES.get(name)
    assert isinstance(family.name, str) and family.name
    batch = synthesize_batch(family.datasets, max_examples=MAX_EXAMPLES)
    keys = jax.random.split(jax.random.key(1), NUM_MEMBERS)
    cfgs = jax.jit(jax.vmap(family.sample), compiler_options=FAST_COMPILE)(keys)
    assert all(np.shape(x)[:1] == (NUM_MEMBERS,) for x in jax.tree.leaves(cfgs)), cfgs

    def member_loss(cfg, key):
        task = family.task_fn(cfg)
        k_init, k_loss = jax.random.split(key)
        params, state = task.init_with_state(k_init)
        return task.loss_with_state(params, state, k_loss, batch)[0]

    init_keys = jax.random.split(jax.random.key(2), NUM_MEMBERS)
    mapped = jax.jit(jax.vmap(member_loss), compiler_options=FAST_COMPILE)(cfgs, init_keys)
    single = jax.jit(member_loss, compiler_options=FAST_COMPILE)
    one_by_one = [
        single(jax.tree.map(lambda x, i=i: x[i], cfgs), init_keys[i]) for i in range(NUM_MEMBERS)
    ]
    assert mapped.shape == (NUM_MEMBERS,) and _finite(mapped), mapped
    np.testing.assert_allclose(mapped, np.asarray(one_by_one), rtol=1e-5, atol=1e-6)

    # A sampled member is a task like any other (its config is a concrete array here).
    member = family.task_fn(jax.tree.map(lambda x: x[0], cfgs))
    check_task(member, empty_data_dir, family.datasets)


def test_batch_synthesis_follows_the_abstract_batch():
    class _Datasets:
        abstract_batch = {
            "image": jax.ShapeDtypeStruct((4, 2, 2, 1), jnp.float32),
            "label": jax.ShapeDtypeStruct((4,), jnp.int32),
            "mask": jax.ShapeDtypeStruct((4,), jnp.bool_),
            "half": jax.ShapeDtypeStruct((3,), jnp.bfloat16),
        }
        extra_info = {"num_classes": 3}

    batch = synthesize_batch(_Datasets())
    assert {k: (v.shape, v.dtype) for k, v in batch.items()} == {
        k: (s.shape, np.dtype(s.dtype)) for k, s in _Datasets.abstract_batch.items()
    }
    assert batch["label"].max() < 3 and batch["label"].min() >= 0
    assert 0 <= batch["image"].min() and batch["image"].max() <= 1
    assert synthesize_batch(None) is None
    small = synthesize_batch(_Datasets(), max_examples=2)
    assert small["image"].shape == (2, 2, 2, 1) and small["half"].shape == (2,)
    assert math.isfinite(float(batch["half"].astype(np.float32).sum()))


class _Broken(tasks_base.Task):
    """A quadratic task with one defect switched on, to show the checks can fail."""

    def __init__(self, defect: str):
        self.defect = defect
        if defect == "no_abstract_batch":
            from learnopt.tasks.datasets import base as datasets_base

            self.datasets = datasets_base.Datasets(*[iter([]) for _ in range(4)])

    def init_with_state(self, key):
        return jax.random.normal(key, (4,)), jnp.zeros((), jnp.float32)

    def loss_with_state(self, params, state, key, data):
        loss = jnp.sum(jnp.square(params))
        if self.defect == "no_gradient":
            loss = jax.lax.stop_gradient(loss) + 0 * jnp.sum(params)
        if self.defect == "wrong_gradient_sign":  # the value of loss, the gradient of -loss
            loss = jax.lax.stop_gradient(2 * loss) - loss
        if self.defect == "state_changes_structure":
            state = {"wrapped": state}
        return loss, state


@pytest.mark.parametrize(
    "defect, message",
    [
        ("no_gradient", "did not lower the loss"),
        ("wrong_gradient_sign", "did not lower the loss"),
        ("state_changes_structure", "training step was traced 9 times"),
        ("no_abstract_batch", "abstract_batch"),
    ],
)
def test_the_checks_catch_broken_tasks(defect, message, empty_data_dir):
    with pytest.raises(AssertionError, match=message):
        check_task(_Broken(defect), empty_data_dir)
    check_task(_Broken("none"), empty_data_dir)  # the same task without the defect passes
