"""How much noise perturbing frozen theta adds to an ES estimate of the trainable part.

A learner's frozen keys get no update, but an ES estimator that perturbs them anyway
adds their effect on ``L+ - L-`` to every trainable value's estimate. Since 2026-12-06
the ES estimators leave the learner's frozen keys unperturbed; this script measures what
that buys on a recipe's own setting: ``--recipe``'s learned optimizer, start, frozen keys
and estimator on one of its families (default: ``celoadam-head-multi``, the released
Celo-Adam's 65-value head trained with 36,865 values in theta, on its conv bucket).

From one population state, it draws ``--draws`` estimates of the trainable part's
meta-gradient with independent perturbations, twice: with every value of theta perturbed
(the old behaviour, the baseline) and with the frozen keys unperturbed. It prints each
arm's mean pairwise cosine of two draws and the signal's share of an estimate's squared
norm (the mean dot product of two independent draws, an unbiased ``|E g|^2``, over the
mean ``|g|^2``), and the ratio of the shares::

    python benchmarks/bench_frozen_noise.py
    python benchmarks/bench_frozen_noise.py --recipe celoadam-mup-head-lm --family 2

Measured on the 2-core CPU: see ``docs/algorithms.md`` (the ES section).
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import sys
import time

import jax
import numpy as np
from jax.flatten_util import ravel_pytree


def _trainable(theta, mask):
    """The trainable leaves of ``theta`` (by the frozen ``mask``), as one flat vector."""
    pairs = zip(jax.tree_util.tree_leaves(theta), jax.tree_util.tree_leaves(mask), strict=True)
    return ravel_pytree([x for x, frozen in pairs if not frozen])[0]


def measure(recipe: str, family: int, draws: int, seed: int) -> dict[str, dict[str, float]]:
    """Each arm's signal-to-noise figures over ``draws`` estimates from one state.

    Args:
      recipe: a recipe of :data:`learnopt.recipes.RECIPES` with frozen keys.
      family: the index of the recipe's family to estimate on.
      draws: the number of independent estimates per arm (at least 2).
      seed: randomness of the population and of the draws.

    Returns:
      ``{"all perturbed": {...}, "frozen unperturbed": {...}}`` with ``cosine`` (the
      mean over pairs of draws) and ``signal`` (the mean dot product of two draws over
      the mean squared norm of one).
    """
    from learnopt.run import build, recipes

    cfg = recipes.get_recipe(recipe).settings
    if not cfg.get("freeze"):
        raise ValueError(f"recipe {recipe!r} freezes nothing: there is nothing to compare")
    fams = build.expand_families(list(cfg["families"]))
    accepted = inspect.signature(build.build_learner).parameters  # the run's settings
    learner = build.build_learner(
        task=fams[family],
        lopt=build.build_lopt(cfg["lopt"], cfg.get("lopt_config")),
        **{k: v for k, v in cfg.items() if k in accepted and k not in ("task", "lopt")},
    )
    print(f"{recipe} on {fams[family]}:")
    return measure_learner(learner, draws, seed)


def measure_learner(learner, draws: int, seed: int) -> dict[str, dict[str, float]]:
    """:func:`measure` on a ``SingleMachineGradientLearner`` with frozen keys (its first
    estimator; the arguments and the result as there)."""
    from learnopt.outer_trainers.outer_update import frozen_mask

    est = learner.gradient_estimators[0]
    frozen = est.frozen_keys
    if not frozen:
        raise ValueError("the learner freezes nothing: there is nothing to compare")
    state = learner.init(jax.random.PRNGKey(seed))
    theta = learner.gradient_learner.get_meta_params(state.gradient_learner_state)
    mask = frozen_mask(theta, frozen)
    est_state = state.gradient_estimator_states[0]
    datas = est.get_datas()
    n_all = sum(int(np.size(x)) for x in jax.tree_util.tree_leaves(theta))
    n_free = int(np.size(_trainable(theta, mask)))
    print(f"theta has {n_all:,} values, {n_free:,} trainable")
    out = {}
    for arm, keys_ in (("all perturbed", None), ("frozen unperturbed", frozen)):
        est.frozen_keys = keys_
        fn = jax.jit(lambda k: est.compute_gradient_estimate(theta, k, est_state, datas)[0].grad)  # noqa: B023
        t0 = time.perf_counter()
        grads = np.stack([
            np.asarray(_trainable(fn(k), mask))
            for k in jax.random.split(jax.random.PRNGKey(seed + 1), draws)
        ])  # fmt: skip
        pairs = list(itertools.combinations(grads, 2))
        cos = np.mean([a @ b / (np.linalg.norm(a) * np.linalg.norm(b)) for a, b in pairs])
        # E[a . b] = |E g|^2 for independent draws: the signal's share of E|g|^2
        signal = float(np.mean([a @ b for a, b in pairs]) / np.mean(np.sum(grads**2, axis=1)))
        out[arm] = {"cosine": float(cos), "signal": signal}
        print(f"  {arm:18s} mean pairwise cosine {cos:+.3f}, signal share of E|g|^2 "
              f"{signal:+.4f} ({draws} draws, {time.perf_counter() - t0:.0f} s)")  # fmt: skip
    est.frozen_keys = frozen
    base, new = out["all perturbed"]["signal"], out["frozen unperturbed"]["signal"]
    noise = 2.0 / np.sqrt(draws * (draws - 1) / 2)  # about 2 standard errors of a share near 0
    if base > noise:
        print(f"signal share, frozen keys unperturbed / all perturbed: {new / base:.3g}x")
    else:
        print(
            f"signal share: {new:+.4f} with the frozen keys unperturbed; {base:+.4f} with all "
            f"perturbed, within about {noise:.3f} of 0: no signal measurable in {draws} draws"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="celoadam-head-multi")
    parser.add_argument("--family", type=int, default=1, help="index of the recipe's family")
    parser.add_argument("--draws", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.draws < 2:
        parser.error("--draws must be at least 2")
    measure(args.recipe, args.family, args.draws, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
