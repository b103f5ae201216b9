"""Width-aware steps: per-tensor step multipliers from each tensor's role and fan-in (muP).

The maximal-update parameterization (muP; Yang et al. 2021, "Tensor Programs V: Tuning
Large Neural Networks via Zero-Shot Hyperparameter Transfer", arXiv 2203.03466, Table 3
for Adam) keeps the best learning rate of an Adam-like optimizer the same as a network
grows wider by scaling each tensor's step with its role: the *hidden* matrices (both
dimensions grow with the width) and the *output* matrix (the readout) take steps scaled
by ``1 / fan_in``; the *input* matrices (their fan-in is the data's), embeddings and
*vectors* (biases, norm scales) take unscaled steps. muLO (Thérien et al. 2024, "muLO:
Compute-Efficient Meta-Generalization of Learned Optimizers", arXiv 2406.00153) applies
the same rule to a learned optimizer's step. Here the multiplier is
``base_width / fan_in`` for hidden and output tensors and 1 for the rest, so that at
the base width every step is the optimizer's own.

:class:`WidthAwareSteps` wraps any optimizer (hand-designed, or the one a learned
optimizer's ``opt_fn`` builds) and scales each tensor's step ``new - old`` by its
multiplier; :class:`WidthAware` does the same for a learned optimizer inside its
``opt_fn``, so that it is meta-trained with the steps it will be used with. ``theta`` is
the wrapped optimizer's: a theta meta-trained without the wrapper starts it, and at the
base width (every hidden and output fan-in equal to ``base_width``) the two are the same
optimizer. The wrapped optimizer is given by its registered name and configuration, so
that the wrapper's own configuration is JSON and theta files rebuild it::

    lopt = WidthAware("ControlledAdam", base_width=64)
    lopt = WidthAware(ScheduledAdam(initial_lr=3e-3), base_width=32)  # an instance too

The module lives with the learned optimizers (whose ingredient it is) although
:class:`WidthAwareSteps` wraps any optimizer: the tuned baselines' cache key hashes
``learnopt/optimizers``, and no baseline uses it.
muP also asks the model for a readout initialized at zero (or scaled by ``1 / width``);
that is the task's part (``benchmarks/width_sweep.py`` shows both).

**Roles from shapes** (:func:`tensor_roles`). A tensor of rank 0 or 1 is a ``vector``.
A matrix or kernel (rank >= 2, the layout ``(..., fan_in_channels, fan_out)`` of Flax's
``Dense`` and ``Conv`` and of Haiku's ``Linear``) reads its fan-in from ``shape[-2]``
and writes ``shape[-1]``. It is an ``output`` tensor if no other matrix reads a
dimension of its output's size (the logits; a kernel's output is also read by a matrix
whose fan-in is a multiple of it, the flattened feature map), else an ``input`` tensor
if no other matrix writes a dimension of its fan-in's size (it reads the data), else
``hidden``; a model with one matrix has only an input, and a path with ``embed`` in it
is an input (``unembed``: an output). The rule is right for MLPs and conv nets; it is
not for an auto-encoder (its input and output sizes are equal: every matrix reads as
hidden), a hidden width equal to the data's size, or attention kernels of rank 3. There
a task declares the roles, before the shapes are read: by naming a module
``mup_input``, ``mup_hidden`` or ``mup_output`` (a path entry starting with one of
these decides), or by a ``roles`` mapping of paths (``"mlp/~/linear_0/w"`` or a prefix,
as ``--freeze`` takes theta keys) to roles, which overrides everything.

**One base width for many tasks.** muP compares a network with a narrower copy of
itself; a single ``base_width`` compares every task with one reference width, which is
right for a family of MLPs and wrong across architectures: at ``base_width=64`` a conv
net with 8 input channels in its second kernel would take 8x the step. ``max_multiplier``
caps the multipliers (``1.0``: steps only ever shrink, for tensors wider than the base),
the safe setting for deploying an optimizer meta-trained on narrow tasks to wider ones
of other kinds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import theta_files
from learnopt.optimizers import base as opt_base
from learnopt.optimizers.common import Params, PyTree, arith_dtype
from learnopt.optimizers.interface import Optimizer, require_optimizer
from learnopt.optimizers.wrappers import OptimizerWrapper
from learnopt.tree_utils import tree_path_str

__all__ = [
    "TENSOR_ROLES",
    "WidthAware",
    "WidthAwareSteps",
    "check_roles",
    "step_multipliers",
    "tensor_roles",
]

#: The roles :func:`tensor_roles` gives; hidden and output tensors' steps are scaled.
TENSOR_ROLES = ("input", "hidden", "output", "vector")

_SCALED = ("hidden", "output")


def check_roles(roles: Mapping[str, str] | None, what: str = "roles") -> dict[str, str]:
    """A ``roles`` override as a dict, every role checked against :data:`TENSOR_ROLES`.

    Args:
      roles: ``{path or path prefix: role}``, or None for none.
      what: how messages name the mapping.

    Returns:
      The mapping as a plain dict (paths stripped of leading and trailing ``"/"``).

    Raises:
      TypeError: ``roles`` is not a mapping of strings.
      ValueError: a role is not one of :data:`TENSOR_ROLES`.
    """
    if roles is None:
        return {}
    if not isinstance(roles, Mapping):
        raise TypeError(f"{what} must be a mapping of parameter paths to roles, got {roles!r}")
    out = {}
    for key, role in roles.items():
        if not isinstance(key, str) or not isinstance(role, str):
            raise TypeError(f"{what} maps strings to strings, got {key!r}: {role!r}")
        if role not in TENSOR_ROLES:
            raise ValueError(f"{what}[{key!r}] is {role!r}; roles are {TENSOR_ROLES}")
        out[key.strip("/")] = role
    return out


def _named_role(name: str) -> str | None:
    for entry in reversed(name.lower().split("/")):
        for role in ("input", "hidden", "output"):
            if entry.startswith("mup_" + role):
                return role
    low = name.lower()
    if "unembed" in low:
        return "output"
    return "input" if "embed" in low else None


def _override(name: str, roles: dict[str, str]) -> str | None:
    # The longest matching key wins, so a leaf's own entry beats its module's.
    hits = [k for k in roles if name == k or name.startswith(k + "/")]
    return roles[max(hits, key=len)] if hits else None


def tensor_roles(params: Params, roles: Mapping[str, str] | None = None) -> PyTree:
    """Each parameter's role: ``"input"``, ``"hidden"``, ``"output"`` or ``"vector"``.

    The rule is the module docstring's: the ``roles`` override first, then a path entry
    ``mup_<role>...`` (or an embedding's path), then the shapes.

    Args:
      params: the parameters (arrays or ``jax.ShapeDtypeStruct``; only shapes are read).
      roles: ``{path or path prefix: role}`` overriding the rule; paths are the
        parameters' key entries joined by ``"/"``.

    Returns:
      A tree like ``params`` of role strings.

    Raises:
      ValueError: a key of ``roles`` names no parameter, or a role is unknown.
    """
    override = check_roles(roles)
    flat, treedef = jax.tree_util.tree_flatten_with_path(params)
    names = [tree_path_str(path, "/") for path, _ in flat]
    unused = [k for k in override if not any(n == k or n.startswith(k + "/") for n in names)]
    if unused:
        raise ValueError(f"roles: {unused} name no parameter (the parameters: {names})")
    shapes = [tuple(leaf.shape) for _, leaf in flat]
    reads = [s[-2] for s in shapes if len(s) >= 2]
    writes = [s[-1] for s in shapes if len(s) >= 2]

    def role(name: str, shape: tuple[int, ...]) -> str:
        chosen = _override(name, override)
        if chosen is not None:
            return chosen
        if len(shape) < 2:
            return "vector"
        named = _named_role(name)
        if named is not None:
            return named
        if len(reads) == 1:
            return "input"
        # How many other matrices read this one's output size, and write its fan-in's;
        # a kernel's output is also read by a matrix over its flattened feature map.
        own = shape[-1] == shape[-2]
        flattened = len(shape) >= 3 and any(r % shape[-1] == 0 and r > shape[-1] for r in reads)
        if reads.count(shape[-1]) - own <= 0 and not flattened:
            return "output"
        return "input" if writes.count(shape[-2]) - own <= 0 else "hidden"

    return treedef.unflatten([role(n, s) for n, s in zip(names, shapes, strict=True)])


def step_multipliers(
    params: Params,
    base_width: float,
    roles: Mapping[str, str] | None = None,
    max_multiplier: float | None = None,
) -> PyTree:
    """Each parameter's step multiplier: ``base_width / fan_in`` for hidden and output
    tensors (``fan_in`` is ``shape[-2]``, the input channels of a kernel), 1 otherwise.

    Args:
      params: the parameters (only shapes are read).
      base_width: the fan-in at which steps are unchanged (the width the optimizer's
        rate was chosen, or meta-trained, at).
      roles: the override of :func:`tensor_roles`.
      max_multiplier: the largest multiplier (None: no cap; ``1.0``: steps only shrink).

    Returns:
      A tree like ``params`` of Python floats.

    Raises:
      ValueError: ``base_width`` or ``max_multiplier`` is not positive, or as
        :func:`tensor_roles`.
    """
    base = _positive("base_width", base_width)
    cap = _cap(max_multiplier)
    cap = math.inf if cap is None else cap
    kinds = tensor_roles(params, roles)
    return jax.tree_util.tree_map(
        lambda p, r: min(base / p.shape[-2], cap) if r in _SCALED and len(p.shape) >= 2 else 1.0,
        params,
        kinds,
    )


def _cap(max_multiplier: float | None) -> float | None:
    return None if max_multiplier is None else _positive("max_multiplier", max_multiplier)


def _positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{name} must be a positive number, got {value!r}")
    return float(value)


class WidthAwareSteps(OptimizerWrapper):
    """Runs ``opt`` and scales each tensor's step by its :func:`step_multipliers`.

    The state is ``opt``'s. A step of ``opt`` from ``p`` to ``p'`` becomes
    ``p + m * (p' - p)``, computed in the optimizer's arithmetic dtype and cast back to
    the parameter's; tensors whose multiplier is 1 keep ``p'`` exactly, so at the base
    width of an MLP whose hidden layers all have it the wrapper is ``opt`` bit for bit.
    The multipliers come from the shapes, which are static, so the step compiles once
    per shape as ``opt``'s does. Model state and ``opt``'s own accumulators are not
    scaled.

    Args:
      opt: the optimizer whose steps to scale.
      base_width: the fan-in at which steps are ``opt``'s own.
      roles: ``{parameter path or prefix: role}`` overriding the roles inferred from
        shapes (see the module docstring).
      max_multiplier: the largest multiplier (None: no cap; ``1.0``: steps only shrink).
    """

    def __init__(
        self,
        opt: Optimizer,
        base_width: float,
        roles: Mapping[str, str] | None = None,
        max_multiplier: float | None = None,
    ):
        require_optimizer(opt, "WidthAwareSteps' opt")
        self.opt = opt
        self.base_width = _positive("base_width", base_width)
        self.roles = check_roles(roles)
        self.max_multiplier = _cap(max_multiplier)

    @property
    def name(self) -> str:
        """``opt``'s name with the base width."""
        return f"{self.opt.name}_muP{self.base_width:g}"

    def __repr__(self) -> str:
        return f"WidthAwareSteps({self.opt!r}, base_width={self.base_width:g})"

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """One step of ``opt`` with each tensor's step scaled by its multiplier.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`.
        """
        old = self.opt.get_params(opt_state)
        new_state = self.opt.update(
            opt_state, grads, loss, model_state=model_state, key=key, **kwargs
        )
        new = self.opt.get_params(new_state)
        mults = step_multipliers(old, self.base_width, self.roles, self.max_multiplier)

        def scale(p, q, m):
            if m == 1.0:
                return q
            dt = arith_dtype(p)
            p32 = p.astype(dt)
            return (p32 + jnp.asarray(m, dt) * (q.astype(dt) - p32)).astype(q.dtype)

        return self.opt.set_params(new_state, jax.tree_util.tree_map(scale, old, new, mults))


class WidthAware(lopt_base.LearnedOptimizer):
    """A learned optimizer whose steps are scaled per tensor by role and fan-in (muP).

    Args:
      lopt: the learned optimizer to wrap: a registered name (``"ControlledAdam"``) or an
        instance of a registered class whose configuration can be read back (every
        learnopt architecture).
      lopt_config: the wrapped optimizer's constructor arguments when ``lopt`` is a name
        (None: its defaults); with an instance, leave it None.
      base_width: the fan-in at which the wrapped optimizer's steps are unchanged (the
        width of the tasks its theta was, or will be, meta-trained on).
      roles: ``{parameter path or prefix: role}`` overriding the roles inferred from
        shapes (:func:`tensor_roles`).
      max_multiplier: the largest multiplier (None: no cap; ``1.0``: steps only shrink).
    """

    def __init__(
        self,
        lopt: str | lopt_base.LearnedOptimizer = "ScheduledAdam",
        lopt_config: Mapping[str, Any] | None = None,
        base_width: float = 64.0,
        roles: Mapping[str, str] | None = None,
        max_multiplier: float | None = None,
    ):
        if isinstance(lopt, lopt_base.LearnedOptimizer):
            if lopt_config is not None:
                raise ValueError("give lopt_config only with lopt given by its name")
            name = theta_files.registered_name(lopt)
            config = theta_files.lopt_config(lopt)
            if name is None or config is None:
                raise ValueError(
                    f"WidthAware wraps a registered learned optimizer whose configuration "
                    f"can be read back; {lopt!r} is not one (give its name and config)"
                )
            inner = lopt
        elif isinstance(lopt, str):
            name, config = lopt, dict(lopt_config or {})
            if name == "WidthAware":
                raise ValueError("WidthAware cannot wrap WidthAware")
            inner = lopt_base.LOPTS.get(name, **config)
        else:
            raise TypeError(f"lopt must be a registered name or a LearnedOptimizer, got {lopt!r}")
        self.lopt, self.lopt_config = name, config
        self.base_width = _positive("base_width", base_width)
        self.roles = check_roles(roles) or None
        self.max_multiplier = _cap(max_multiplier)
        self.inner = inner

    def __repr__(self) -> str:
        return f"WidthAware({self.inner!r}, base_width={self.base_width:g})"

    @classmethod
    def wrapper_config(cls, architecture: str, config: dict[str, Any]) -> dict[str, Any]:
        """The configuration that wraps a theta file's optimizer, for ``--init-theta``.

        ``learnopt meta-train --lopt WidthAware --lopt-arg base_width=64 --init-theta
        ENTRY`` wraps the entry's architecture with its recorded configuration.

        Args:
          architecture: the file's registered architecture name.
          config: its recorded configuration.

        Returns:
          This class's constructor arguments (``base_width`` left to its default).
        """
        return {"lopt": architecture, "lopt_config": dict(config)}

    @property
    def wraps_theta_of(self) -> lopt_base.LearnedOptimizer:
        """The wrapped optimizer, whose theta files start this one without a warning."""
        return self.inner

    def init(self, key: jax.Array) -> Any:
        """The wrapped optimizer's initial theta.

        Args and returns as in :meth:`~learnopt.learned_optimizers.base.LearnedOptimizer.init`.
        """
        return self.inner.init(key)

    def opt_fn(self, theta: Any, is_training: bool = False) -> opt_base.Optimizer:
        """The wrapped optimizer's, under :class:`WidthAwareSteps`.

        Args and returns as in :meth:`~learnopt.learned_optimizers.base.LearnedOptimizer.opt_fn`.
        """
        opt = self.inner.opt_fn(theta, is_training=is_training)
        return WidthAwareSteps(opt, self.base_width, self.roles, self.max_multiplier)

    def freeze_groups(self) -> dict[str, tuple[str, ...]]:
        """The wrapped optimizer's.

        Args and returns as in
        :meth:`~learnopt.learned_optimizers.base.LearnedOptimizer.freeze_groups`.
        """
        return self.inner.freeze_groups()


lopt_base.register_learned_optimizer("WidthAware", WidthAware)
