"""A zoo of common optax setups, by name: the cases of the dtype conformance suite.

Each entry maps a name to a zero-argument constructor of an optax
``GradientTransformation``. The conformance tests (``tests/test_conformance.py``)
run every entry through :class:`learnopt.optimizers.optax_adapter.OptaxOptimizer` in every
float dtype, and ``benchmarks/raw_optax_compiles.py`` measures raw optax against
learnopt on the same entries, so adding one line here adds a conformance case and a
row of the table in ``docs/dtypes.md``.

Hyperparameters are chosen for a tiny least-squares problem (a few steps from a
random start), not for real training.

>>> from learnopt.optimizers import optax_zoo
>>> tx = optax_zoo.get_optax("lbfgs_zoom")
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
import optax
import optax.contrib

from learnopt.registry import UnknownNameError, unknown_name_message

__all__ = ["OPTAX_ZOO", "optax_zoo", "get_optax", "optax_names"]

LR = 1e-2


def _sched_cosine() -> optax.Schedule:
    return optax.warmup_cosine_decay_schedule(0.0, LR, warmup_steps=3, decay_steps=20)


def _multisteps_adam() -> optax.GradientTransformationExtraArgs:
    return optax.MultiSteps(optax.adam(LR), every_k_schedule=2).gradient_transformation()


def _bias_only(params):
    return {k: jnp.ndim(v) == 1 for k, v in params.items()} if isinstance(params, dict) else False


# name -> constructor. Keep names stable: they are test ids and table rows.
OPTAX_ZOO: dict[str, Callable[[], optax.GradientTransformation]] = {
    # --- plain first-order methods ---
    "sgd": lambda: optax.sgd(0.1),
    "momentum": lambda: optax.sgd(0.1, momentum=0.9),
    "nesterov": lambda: optax.sgd(0.1, momentum=0.9, nesterov=True),
    "adam": lambda: optax.adam(LR),
    "adamw": lambda: optax.adamw(LR, weight_decay=1e-4),
    "nadam": lambda: optax.nadam(LR),
    "nadamw": lambda: optax.nadamw(LR),
    "amsgrad": lambda: optax.amsgrad(LR),
    "adamax": lambda: optax.adamax(LR),
    "adamaxw": lambda: optax.adamaxw(LR),
    "adagrad": lambda: optax.adagrad(LR),
    "adadelta": lambda: optax.adadelta(1.0),
    "rmsprop": lambda: optax.rmsprop(LR),
    "rmsprop_centered_momentum": lambda: optax.rmsprop(LR, centered=True, momentum=0.9),
    "adafactor": lambda: optax.adafactor(LR),
    "lion": lambda: optax.lion(1e-3),
    "lamb": lambda: optax.lamb(LR),
    "lars": lambda: optax.lars(LR),
    "adabelief": lambda: optax.adabelief(LR),
    "yogi": lambda: optax.yogi(LR),
    "radam": lambda: optax.radam(LR),
    "novograd": lambda: optax.novograd(LR),
    "sm3": lambda: optax.sm3(LR),
    "fromage": lambda: optax.fromage(LR),
    "noisy_sgd": lambda: optax.noisy_sgd(LR, key=0),
    "adan": lambda: optax.adan(LR),
    "optimistic_gd": lambda: optax.optimistic_gradient_descent(LR),
    "optimistic_adam_v2": lambda: optax.optimistic_adam_v2(LR),
    "sign_sgd": lambda: optax.sign_sgd(LR),
    "signum": lambda: optax.signum(LR),
    "rprop": lambda: optax.rprop(LR),
    "polyak_sgd": lambda: optax.polyak_sgd(max_learning_rate=0.1),
    # --- line searches (extra args: value, grad, value_fn) ---
    "lbfgs_zoom": lambda: optax.lbfgs(),
    "lbfgs_backtracking": lambda: optax.lbfgs(
        linesearch=optax.scale_by_backtracking_linesearch(max_backtracking_steps=15)
    ),
    "sgd_backtracking": lambda: optax.chain(
        optax.sgd(1.0), optax.scale_by_backtracking_linesearch(max_backtracking_steps=15)
    ),
    # --- chains, schedules and wrappers ---
    "clip_global_norm_adam": lambda: optax.chain(optax.clip_by_global_norm(1.0), optax.adam(LR)),
    "clip_sgd": lambda: optax.chain(optax.clip(0.5), optax.sgd(0.1)),
    "adam_warmup_cosine": lambda: optax.adam(_sched_cosine()),
    "sgd_exponential_decay": lambda: optax.sgd(
        optax.exponential_decay(0.1, transition_steps=5, decay_rate=0.5)
    ),
    "inject_hyperparams_adam": lambda: optax.inject_hyperparams(optax.adam)(learning_rate=LR),
    "inject_hyperparams_sgd_schedule": lambda: optax.inject_hyperparams(optax.sgd)(
        learning_rate=optax.linear_schedule(0.1, 0.01, 10), momentum=0.9
    ),
    "multisteps_adam": _multisteps_adam,
    "apply_if_finite_adam": lambda: optax.apply_if_finite(optax.adam(LR), 3),
    "zero_nans_adam": lambda: optax.chain(optax.zero_nans(), optax.adam(LR)),
    "adamw_masked_decay": lambda: optax.adamw(LR, weight_decay=1e-2, mask=_bias_only),
    "centralize_sgd": lambda: optax.chain(optax.centralize(), optax.sgd(0.1)),
    "adaptive_grad_clip_sgd": lambda: optax.chain(optax.adaptive_grad_clip(0.1), optax.sgd(0.1)),
    "trust_ratio_adam": lambda: optax.chain(
        optax.scale_by_adam(), optax.scale_by_trust_ratio(), optax.scale(-LR)
    ),
    "ema_sgd": lambda: optax.chain(optax.ema(0.9), optax.scale(-0.1)),
    "add_noise_sgd": lambda: optax.chain(optax.add_noise(0.01, 0.55, key=0), optax.sgd(0.1)),
    # --- optax.contrib ---
    "prodigy": lambda: optax.contrib.prodigy(1.0),
    "schedule_free_adamw": lambda: optax.contrib.schedule_free_adamw(LR),
    "schedule_free_sgd": lambda: optax.contrib.schedule_free_sgd(0.1),
    "muon": lambda: optax.contrib.muon(LR),
    "mechanize_adam": lambda: optax.contrib.mechanize(optax.adam(LR)),
    "dadapt_adamw": lambda: optax.contrib.dadapt_adamw(1.0),
    "dog": lambda: optax.contrib.dog(1.0),
    "dowg": lambda: optax.contrib.dowg(1.0),
    "cocob": lambda: optax.contrib.cocob(),
    "madgrad": lambda: optax.contrib.madgrad(LR),
    "momo": lambda: optax.contrib.momo(0.1),
    "momo_adam": lambda: optax.contrib.momo_adam(LR),
    "ademamix": lambda: optax.contrib.ademamix(LR),
    "simplified_ademamix": lambda: optax.contrib.simplified_ademamix(LR),
    "adopt": lambda: optax.contrib.adopt(LR),
    "acprop": lambda: optax.contrib.acprop(LR),
    "reduce_on_plateau_adam": lambda: optax.chain(
        optax.adam(LR), optax.contrib.reduce_on_plateau(patience=2)
    ),
}


def optax_zoo() -> dict[str, Callable[[], optax.GradientTransformation]]:
    """A copy of the registry: name -> zero-argument constructor of an optax transform.

    Returns:
      A new dict (changing it leaves :data:`OPTAX_ZOO` as it is).
    """
    return dict(OPTAX_ZOO)


def optax_names() -> list[str]:
    """Names of the zoo entries, in registry order.

    Returns:
      The names, as a list.
    """
    return list(OPTAX_ZOO)


def get_optax(name: str) -> optax.GradientTransformation:
    """Builds the zoo entry ``name``.

    Args:
      name: an entry of :data:`OPTAX_ZOO` (see :func:`optax_names`).

    Returns:
      A fresh optax ``GradientTransformation``.

    Raises:
      KeyError: ``name`` is not in the zoo (the message names the closest entries).
    """
    if name not in OPTAX_ZOO:
        raise UnknownNameError(
            unknown_name_message("optax zoo entry", name, OPTAX_ZOO, lister="optax_names()")
        )
    return OPTAX_ZOO[name]()
