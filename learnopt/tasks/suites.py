"""Named task suites: what to meta-train on, and a disjoint held-out evaluation suite.

**meta-train** (a registered :class:`~learnopt.tasks.base.TaskFamily`, also
``get_suite("meta-train")`` for its buckets' representative tasks): a
:class:`MixtureTaskFamily` of four shape buckets, each a parametric family whose members
differ (traced) in activation (12 choices) and weight initializer (5 kinds, scale
0.5-2):

==================================  ===========================================  =====
bucket (also in ``TASK_FAMILIES``)  model and data                               batch
==================================  ===========================================  =====
``MetaTrain_MLP_Digits8_32``        MLP 64-32-10, 8x8 digits                     128
``MetaTrain_MLP_Mnist5k8_32x32``    MLP 64-32-32-10, mnist5k resized to 8x8      128
``MetaTrain_Conv_Digits8_8x16``     conv 8 (stride 2) - 16, mean pool, digits    64
``MetaTrain_Conv_Mnist5k8_16x16``   conv 16 (stride 2) - 16, mnist5k at 8x8      64
==================================  ===========================================  =====

:data:`WIDE_BUCKETS` are further families for meta-training, registered by name but not
part of the mixture: ``MetaTrain_MLP_Mnist5k20_64x64`` (MLP 400-64-64-10, mnist5k at
20x20, batch 128, the same sampled activations and initializers).

Two ways to meta-train on it: the mixture family in one estimator (each member draws a
bucket; a population ``vmap`` evaluates every bucket's model and selects one, so a step
costs about the sum of the buckets), or, as the notes' library does, one estimator per
bucket family (:func:`meta_train_families`) in one learner.

**meta-valid** (``get_suite("meta-valid")``, 6 registered tasks): the suite for choosing
among thetas during and after meta-training (``learnopt meta-train --eval-every N`` uses
it, and keeps ``theta_best.msgpack`` by it). It shares no task and no configuration
(model, widths, image size, dataset and batch) with the meta-train buckets or with
``heldout`` (tested): two MLPs (mnist5k 10x10 SiLU 96x48, digits ELU 16x4), an MLP
auto-encoder on mnist5k, a conv net on digits (16-32-32), a vanilla-RNN and a small
Transformer byte-level language model; about 1-10 ms per step on a CPU.

**heldout** (``get_suite("heldout")``, 9 registered tasks, none seen in meta-training:
other widths, depths, image sizes and kinds): three MLPs (mnist5k 14x14 tanh 64x64,
mnist5k 28x28 ReLU 128, digits GELU 128x3), two conv nets (tanh + max pool; batch
norm), an MLP auto-encoder and three byte-level language models (GRU, LSTM,
Transformer). Each trains at a few milliseconds per step or less on a CPU
(``benchmarks/bench_tasks.py``; figures in ``docs/tasks.md``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from learnopt.registry import Registry
from learnopt.tasks import base as tasks_base
from learnopt.tasks.datasets import base as datasets_base

__all__ = [
    "HELDOUT",
    "META_VALID",
    "META_TRAIN_BUCKETS",
    "WIDE_BUCKETS",
    "MixtureTaskFamily",
    "SUITES",
    "get_suite",
    "meta_train_families",
    "suite_names",
]

# ----------------------------------------------------------------------- mixture


class _MixtureSplit:
    """One split of every member: ``{member: batch}`` (``next`` and ``take``)."""

    def __init__(self, splits: Mapping[str, Any]):
        self._splits = dict(splits)

    def __iter__(self):
        return self

    def __next__(self) -> dict[str, Any]:
        return {k: next(s) for k, s in self._splits.items()}

    def take(self, *shape: int) -> dict[str, Any]:
        return {k: s.take(*shape) for k, s in self._splits.items()}

    def get_state(self) -> dict[str, Any]:
        """Every member's position (AttributeError if one cannot report it)."""
        return {k: s.get_state() for k, s in self._splits.items()}

    def set_state(self, state: Mapping[str, Any]) -> None:
        for k, s in self._splits.items():
            s.set_state(state[k])


class _MixtureTask(tasks_base.Task):
    """Holds every member's parameters; the loss is the selected member's."""

    def __init__(self, tasks: Mapping[str, tasks_base.Task], which: jax.Array, datasets):
        self.tasks = dict(tasks)
        self.which = which
        self.datasets = datasets

    def init_with_state(self, key: jax.Array):
        keys = jax.random.split(key, len(self.tasks))
        params, states = {}, {}
        for k, (name, task) in zip(keys, self.tasks.items(), strict=True):
            params[name], states[name] = task.init_with_state(k)
        return params, states

    def loss_with_state_and_aux(self, params, state, key, data):
        names = list(self.tasks)
        if state is None:
            state = {n: None for n in names}

        def branch(i: int):
            def run(operands):
                params, state, key, data = operands
                name = names[i]
                loss, new, _ = self.tasks[name].loss_with_state_and_aux(
                    params[name], state[name], key, data[name]
                )
                return loss.astype(jnp.float32), {**state, name: new}

            return run

        loss, state = jax.lax.switch(
            self.which, [branch(i) for i in range(len(names))], (params, state, key, data)
        )
        return loss, state, {}

    def loss_with_state(self, params, state, key, data):
        loss, state, _ = self.loss_with_state_and_aux(params, state, key, data)
        return loss, state

    def loss(self, params, key, data):
        return self.loss_with_state(params, None, key, data)[0]

    def normalizer(self, loss: jax.Array) -> jax.Array:
        fns = [
            lambda x, t=t: jnp.asarray(t.normalizer(x), jnp.float32) for t in self.tasks.values()
        ]
        return jax.lax.switch(self.which, fns, loss)


class MixtureTaskFamily(tasks_base.TaskFamily):
    """A family that draws one of several member families (buckets) per sample.

    ``sample(key)`` returns ``{"which": int32, "cfgs": {member: cfg}}`` (every member's
    cfg is drawn so that samples share one structure and ``vmap``); the task holds every
    member's parameters (``{member: params}``) and its loss is the chosen member's
    (``lax.switch``; the other members' parameters get zero gradients). Batches are
    ``{member: batch}``. Under ``vmap`` the switch evaluates every member, so a step
    costs about the sum of the members' steps.

    Args:
      families: ``{member name: family}``.
      weights: one non-negative weight per member, in ``families``' order, normalized to
        the sampling probabilities (None: uniform).
      name: the family's name.
    """

    def __init__(
        self,
        families: Mapping[str, tasks_base.TaskFamily],
        weights: Sequence[float] | None = None,
        name: str = "MixtureTaskFamily",
    ):
        if not families:
            raise ValueError("families must not be empty")
        self.families = dict(families)
        n = len(self.families)
        w = jnp.ones((n,)) if weights is None else jnp.asarray(weights, jnp.float32)
        if w.shape != (n,) or bool(jnp.any(w < 0)) or float(jnp.sum(w)) <= 0:
            raise ValueError(f"weights must be {n} non-negative numbers, got {weights}")
        self.log_weights = jnp.log(w / jnp.sum(w))
        self._name = name
        splits = {
            split: _MixtureSplit({k: getattr(f.datasets, split) for k, f in self.families.items()})
            for split in datasets_base.SPLITS
        }
        self.datasets = datasets_base.Datasets(
            *(splits[s] for s in datasets_base.SPLITS),
            extra_info={"members": list(self.families)},
            abstract_batch={k: f.datasets.abstract_batch for k, f in self.families.items()},
        )

    @property
    def name(self) -> str:
        return self._name

    def sample(self, key: jax.Array) -> dict[str, Any]:
        """Draws a member ``which ~ Categorical(weights)`` and a configuration of every member.

        Args:
          key: a PRNG key.

        Returns:
          ``{"which": int32 scalar, "cfgs": {member: cfg}}``.
        """
        k_which, *k_members = jax.random.split(key, len(self.families) + 1)
        which = jax.random.categorical(k_which, self.log_weights).astype(jnp.int32)
        cfgs = {
            name: fam.sample(k)
            for k, (name, fam) in zip(k_members, self.families.items(), strict=True)
        }
        return {"which": which, "cfgs": cfgs}

    def task_fn(self, cfg: Mapping[str, Any]) -> tasks_base.Task:
        """The task holding every member's params whose loss is member ``cfg["which"]``'s.

        Args:
          cfg: a configuration drawn by :meth:`sample` (its arrays may be traced).

        Returns:
          The task: params ``{member: params}``, batches ``{member: batch}``, loss and
          normalizer those of the chosen member (``lax.switch``; losses in float32).
        """
        tasks = {name: fam.task_fn(cfg["cfgs"][name]) for name, fam in self.families.items()}
        return _MixtureTask(tasks, cfg["which"], self.datasets)


# ------------------------------------------------------------------------ buckets


def _image_mlp_family(dataset: str, size: int, hidden: Sequence[int], name: str):
    from learnopt.tasks.parametric import image_mlp

    return image_mlp.ParametricImageMLP(
        lambda: datasets_base.image_classification_datasets(
            dataset, image_size=(size, size), batch_size=128
        ),
        hidden_layers=hidden,
        name=name,
    )


def _image_mlp_bucket(dataset: str, hidden: Sequence[int], name: str):
    return lambda: _image_mlp_family(dataset, 8, hidden, name)


def _image_conv_bucket(dataset: str, hidden: Sequence[int], name: str):
    from learnopt.tasks.parametric import image_conv

    def make():
        return image_conv.ParametricImageConv(
            lambda: datasets_base.image_classification_datasets(
                dataset, image_size=(8, 8), batch_size=64
            ),
            hidden_sizes=hidden,
            kernel_sizes=[(3, 3)] * len(hidden),
            strides=[2] + [1] * (len(hidden) - 1),
            name=name,
        )

    return make


#: The meta-train buckets: name -> zero-argument family constructor.
META_TRAIN_BUCKETS = {
    "MetaTrain_MLP_Digits8_32": _image_mlp_bucket("digits8", (32,), "MetaTrain_MLP_Digits8_32"),
    "MetaTrain_MLP_Mnist5k8_32x32": _image_mlp_bucket(
        "mnist5k", (32, 32), "MetaTrain_MLP_Mnist5k8_32x32"
    ),
    "MetaTrain_Conv_Digits8_8x16": _image_conv_bucket(
        "digits8", (8, 16), "MetaTrain_Conv_Digits8_8x16"
    ),
    "MetaTrain_Conv_Mnist5k8_16x16": _image_conv_bucket(
        "mnist5k", (16, 16), "MetaTrain_Conv_Mnist5k8_16x16"
    ),
}
#: Wider meta-train families, registered but not in the ``meta-train`` mixture: MLPs on
#: larger images whose tuned rates are those of the held-out and meta-valid MLPs (on the
#: 8x8 buckets the training loss keeps improving up to rates of 0.1-0.3;
#: ``benchmarks/meta_objective_landscape.py``, ``docs/meta-training-results.md``).
WIDE_BUCKETS = {
    "MetaTrain_MLP_Mnist5k20_64x64": lambda: _image_mlp_family(
        "mnist5k", 20, (64, 64), "MetaTrain_MLP_Mnist5k20_64x64"
    ),
}
for _name, _make in {**META_TRAIN_BUCKETS, **WIDE_BUCKETS}.items():
    tasks_base.TASK_FAMILIES.register(_make, name=_name)


def meta_train_families() -> list[tasks_base.TaskFamily]:
    """The meta-train buckets as separate families (one estimator each).

    Returns:
      A new family per bucket of :data:`META_TRAIN_BUCKETS`, in its order.
    """
    return [make() for make in META_TRAIN_BUCKETS.values()]


def _meta_train() -> MixtureTaskFamily:
    return MixtureTaskFamily(
        {name: make() for name, make in META_TRAIN_BUCKETS.items()}, name="meta-train"
    )


tasks_base.TASK_FAMILIES.register(_meta_train, name="meta-train")


# -------------------------------------------------------------------------- suites

#: The held-out evaluation suite (registered task names).
HELDOUT: tuple[str, ...] = (
    "ImageMLP_Mnist5k_14_Tanh64x64",
    "ImageMLP_Mnist5k_28_Relu128",
    "ImageMLP_Digits8_Gelu128x128x128",
    "Conv_Mnist5k_16_8x16_Tanh",
    "Conv_Mnist5k_12_8x16x16_batchnorm",
    "ImageMLPAE_Digits8_32x8x32_bs128",
    "RNNLM_pystdlibbytes_Patch16_GRU32_Embed16_bs32",
    "RNNLM_pystdlibbytes_Patch16_LSTM32_Embed32_bs32",
    "TransformerLM_PyStdlibBytes_MultiRuntime_3",
)

#: The meta-validation suite (registered task names): for choosing thetas, never for
#: reporting; disjoint from the meta-train buckets and from :data:`HELDOUT`.
META_VALID: tuple[str, ...] = (
    "ImageMLP_Mnist5k_10_Silu96x48",
    "ImageMLP_Digits8_Elu16x16x16x16",
    "ImageMLPAE_Mnist5k_128x32x128_bs128",
    "Conv_Digits8_16x32x32",
    "RNNLM_pystdlibbytes_Patch16_VanillaRNN64_Embed32_bs32",
    "TransformerLM_PyStdlibBytes_MultiRuntime_1",
)

#: Fixed tasks with the meta-train buckets' shapes (ReLU, default init): for quick
#: in-distribution checks of a meta-trained optimizer.
META_TRAIN_TASKS: tuple[str, ...] = ("ImageMLP_Digits8_Relu32",)

#: Suites by name: ``SUITES.get(name)`` is a tuple of registered task names.
SUITES: Registry[tuple[str, ...]] = Registry("task suite", listing="suites")
SUITES.register(lambda: HELDOUT, name="heldout")
SUITES.register(lambda: META_VALID, name="meta-valid")
SUITES.register(lambda: META_TRAIN_TASKS, name="meta-train")


def suite_names() -> list[str]:
    """Names accepted by :func:`get_suite`.

    Returns:
      The registered suite names, sorted.
    """
    return SUITES.names()


def get_suite(name: str) -> tuple[str, ...]:
    """The registered task names of suite ``name`` (``"heldout"``, ``"meta-train"``).

    Args:
      name: a suite name (see :func:`suite_names`).

    Returns:
      The suite's task names, each accepted by :func:`learnopt.tasks.base.get_task`.

    Raises:
      UnknownNameError: no suite has that name.
    """
    return SUITES.get(name)
