"""Meta-training recipes: the tables of per-architecture defaults (``learnopt.recipes``
re-exports them at their old path).

``learnopt meta-train --lopt NAME --trainer pes --family NAME`` (and
:func:`learnopt.train.meta_train` with ``lopt="NAME", families=[...]``) take what they
are not told from here (pure data: importing this module imports no JAX):

* :data:`LOPT_DEFAULTS`: constructor arguments of a learned optimizer given by name
  (``MLPLOpt``'s library default ``step_mult=0.001`` cannot reach the steps tuned Adam
  takes, see ``docs/meta-training.md``); explicit ``lopt_config`` entries win;
* :data:`TRAINING_DEFAULTS`: the meta-training settings that go with an architecture
  (outer learning rate, clipping, truncation and run length, perturbation size,
  population) where the run does not set them. Architectures without an entry (the
  ``Learnable*`` ones) keep :func:`learnopt.train.meta_train`'s defaults, the notes'
  walkthrough.

* :data:`RECIPES`: named, complete meta-training recipes (``learnopt meta-train --recipe
  NAME``, ``meta_train(recipe="NAME")``): every setting of a documented run, its
  periodic meta-validation and its step count, so that one command reproduces a row of
  the recipe table in ``docs/meta-training.md``. Settings given beside a recipe win
  over the recipe's; ``config.json`` records the recipe's name and every setting used.

The task families of a run are expanded by :func:`learnopt.run.build.expand_families`;
the periodic meta-validation is :class:`learnopt.evaluation.periodic.PeriodicEval`.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

from learnopt.run._recipe_settings import (  # the settings of each recipe
    _CELOADAM_B2,
    _CELOADAM_B2_WD_ES,
    _CELOADAM_B2_WD_ES_VALID,
    _CELOADAM_B2_WD_HEAD_LM,
    _CELOADAM_B2_WD_HIDDEN_OUTPUT,
    _CELOADAM_ES_FROM_RELEASE,
    _CELOADAM_ES_FROM_RELEASE_BOTH,
    _CELOADAM_ES_FROM_RELEASE_BROAD,
    _CELOADAM_ES_SCHEDULE,
    _CELOADAM_HEAD_LM_VALID,
    _CELOADAM_HEAD_LM_VALID_FINE,
    _CELOADAM_HEAD_MULTI,
    _CELOADAM_HEAD_VALID,
    _CELOADAM_HEAD_VALID_MIX,
    _CELOADAM_HEAD_VALID_MIX_BALANCED,
    _CELOADAM_MUP_HEAD_LM,
    _CELOADAM_REGIME,
    _CELOADAM_REGIME_ONLY,
    _CELOADAM_SCHEDULE,
    _CELOADAM_WEIGHT_DECAY,
    _CONTROLLED_FROM_DEFAULT,
    _CONTROLLED_MULTI,
    _CONTROLLED_MULTI_VALID,
    _COSINE_FROM_ADAM_WIDE,
    _COSINE_HPARAMS_WIDE,
    _COSINE_HPARAMS_WIDE_ONE_RATE,
    _COSINE_HPARAMS_WIDE_SHARED,
    _COSINE_TENSOR,
    _COSINE_VALID,
    _FROM_ADAM_VALID,
    _FROM_ADAM_WIDE,
    _LATE_LOG,
    _MLP_BUCKETS,
    _PES,
    _TRUNCATION,
)
from learnopt.run.config import FULL_TRAINERS, RunConfig

__all__ = [
    "RECIPES",
    "Recipe",
    "get_recipe",
    "recipe_names",
    "LOPT_DEFAULTS",
    "TRAINING_DEFAULTS",
    "TRUNCATION_SETTINGS",
    "lopt_defaults",
    "training_defaults",
]

#: Constructor arguments of learned optimizers built by name for meta-training.
LOPT_DEFAULTS: dict[str, dict[str, Any]] = {
    "MLPLOpt": dict(hidden_size=16, hidden_layers=2, step_mult=0.01, exp_mult=0.1),
    "AdafacMLPLOpt": dict(hidden_size=8, step_mult=0.01, exp_mult=0.1),
    "MLPNomLOpt": dict(
        hidden_size=8,
        step_mult=0.001,
        exp_mult=(0.1, 0.1, 0.1),
        nominal_stepsize=3e-3,
        nominal_controller=True,
        nominal_grad_estimator="Adam",
    ),
    "RNNMLPLOpt": dict(step_multiplier=0.01, magnitude_rate=0.1),
    "NNAdam": dict(initial_learning_rate=3e-3),
    "HyperV2": dict(lstm_hidden_size=32, param_inits=64, step_mult=0.005),
    "Celo2": dict(step_mult=0.003),
}

#: Meta-training settings per architecture (used where a run leaves them unset). The
#: truncation settings apply to the truncated trainers only (not to full-run trainers).
TRAINING_DEFAULTS: dict[str, dict[str, Any]] = {
    name: dict(outer_lr=1e-3, max_grad_norm=1.0, **_TRUNCATION) for name in LOPT_DEFAULTS
}
TRAINING_DEFAULTS["HyperV2"]["std"] = 0.003  # VeLO's mixing amplifies perturbations
#: Settings of :data:`TRAINING_DEFAULTS` that only the truncated trainers take.
TRUNCATION_SETTINGS = tuple(_TRUNCATION)


def lopt_defaults(name: str) -> dict[str, Any]:
    """The constructor arguments :func:`learnopt.train.meta_train` uses for ``name``.

    Args:
      name: a learned optimizer's registered name.

    Returns:
      A copy of its :data:`LOPT_DEFAULTS` entry (``{}`` if it has none).
    """
    return dict(LOPT_DEFAULTS.get(name, {}))


def training_defaults(name: str, trainer: str) -> dict[str, Any]:
    """The meta-training settings that go with architecture ``name`` and ``trainer``.

    Args:
      name: a learned optimizer's registered name.
      trainer: a trainer name (the full-run ones take no truncation settings).

    Returns:
      A copy of its :data:`TRAINING_DEFAULTS` entry, less what ``trainer`` does not take.
    """
    out = dict(TRAINING_DEFAULTS.get(name, {}))
    if trainer in FULL_TRAINERS:
        for k in TRUNCATION_SETTINGS:
            out.pop(k, None)
    return out


@dataclasses.dataclass(frozen=True)
class Recipe:
    """A complete meta-training recipe: what one row of the recipe table ran.

    Attributes:
      name: the recipe's name (``--recipe NAME``).
      description: one line on what the recipe is and what it tests.
      settings: :class:`~learnopt.run.config.RunConfig` fields (``lopt``, ``lopt_config``,
        ``families``, ``trainer``, lengths, meta-objective, outer optimizer, ``steps``).
      evaluation: :class:`~learnopt.evaluation.config.PeriodicEvalConfig` fields of its
        periodic meta-validation (``every``, ``steps``, ``seeds``, ...); empty for none.
    """

    name: str
    description: str
    settings: Mapping[str, Any]
    evaluation: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def flags(self) -> list[str]:
        """The recipe as ``learnopt meta-train`` flags (for docs and logs).

        Flag names, repeats and switches come from the configurations' own flag tables
        (:func:`learnopt._fields.flags_of`), as the command line builds them.

        Returns:
          e.g. ``["--lopt", "MLPLOpt", "--trainer", "pes", ...]``.
        """
        import json

        from learnopt._fields import flags_of
        from learnopt.evaluation.config import PeriodicEvalConfig

        out: list[str] = []
        for config_cls, values in (
            (RunConfig, self.settings),
            (PeriodicEvalConfig, self.evaluation),
        ):
            table = {f.field: f for f in flags_of(config_cls)}
            for key, value in values.items():
                flag = table[key]
                if key == "lopt_config":
                    out += [
                        a for k, v in value.items() for a in (flag.flag, f"{k}={json.dumps(v)}")
                    ]
                elif flag.repeat:
                    out += [a for item in value for a in (flag.flag, str(item))]
                elif flag.switch is not None:
                    out += [flag.flag] if value != flag.default else []
                else:
                    out += [flag.flag, str(value)]
        return out


#: The recipes of the table in ``docs/meta-training-results.md`` ("Runs with the fair evaluation").
RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe(
            "mlplopt-mlp8k",
            "the shipped MLPLOpt_mlp8k: MLPLOpt on the two MLP buckets, mean training loss",
            dict(lopt="MLPLOpt", families=_MLP_BUCKETS, **_PES, outer_lr=1e-3, steps=8000),
            dict(every=2000),
        ),
        Recipe(
            "scheduledadam-late",
            "ScheduledAdam (learned schedule over t/T) on the MLP buckets, late log loss",
            dict(
                lopt="ScheduledAdam",
                lopt_config={"initial_lr": 0.01},
                families=_MLP_BUCKETS,
                **_PES,
                **_LATE_LOG,
                outer_lr=3e-3,
                max_grad_norm=1.0,
                steps=20000,
            ),
            dict(every=1000),
        ),
        Recipe(
            "scheduledadam-cosine-tensor",
            "ScheduledAdam on a warmup-cosine prior with per-tensor offsets, late log train loss",
            _COSINE_TENSOR,
            dict(every=2000, steps=1000, at_start=True),
        ),
        Recipe(
            "scheduledadam-cosine-tensor-valid",
            "scheduledadam-cosine-tensor with the meta-loss on the outer-valid split",
            {**_COSINE_TENSOR, "meta_loss_split": "outer_valid"},
            dict(every=2000, steps=1000, at_start=True),
        ),
        Recipe(
            "scheduledadam-cosine-valid",
            "ScheduledAdam on a warmup-cosine prior (no per-tensor offsets), outer-valid "
            "late log loss, outer lr 3e-4; meta-valid at the start and the end",
            _COSINE_VALID,
            dict(every=4000, steps=1000, at_start=True),
        ),
        Recipe(
            "scheduledadam-cosine-train",
            "scheduledadam-cosine-valid with the meta-loss on fresh training batches (the "
            "updated params' train-split loss): the split ablation",
            {**_COSINE_VALID, "meta_loss_split": "train"},
            dict(every=4000, steps=1000, at_start=True),
        ),
        Recipe(
            "scheduledadam-cosine-mixed",
            "scheduledadam-cosine-valid with the meta-loss on both a fresh training batch "
            "and an outer-valid batch (the mean of their log losses): neither fitting nor "
            "generalization alone is rewarded",
            {**_COSINE_VALID, "meta_loss_split": "train+outer_valid"},
            dict(every=4000, steps=1000, at_start=True),
        ),
        Recipe(
            "scheduledadam-from-adam-valid",
            "ScheduledAdam from plain Adam at its default rate 1e-3 (no schedule prior): "
            "rate, schedule and per-kind offsets learned on the outer-valid late log loss, "
            "outer lr 1e-2",
            _FROM_ADAM_VALID,
            dict(every=2000, steps=1000, at_start=True),
        ),
        Recipe(
            "scheduledadam-from-adam-wide",
            "ScheduledAdam from plain Adam at 1e-3 (no schedule prior) on the wide MLP "
            "bucket (mnist5k 20x20, 64x64): rate and schedule learned on the late log "
            "training loss, whose whole-run minimum is at the rate meta-valid prefers",
            _FROM_ADAM_WIDE,
            dict(every=4000, steps=1000, at_start=True),
        ),
        Recipe(
            "scheduledadam-cosine-from-adam-wide",
            "scheduledadam-from-adam-wide on the warmup-cosine prior: Adam + warmup/cosine "
            "at Adam's default rate 1e-3 to start, the rate and corrections meta-trained",
            _COSINE_FROM_ADAM_WIDE,
            dict(every=4000, steps=1000, at_start=True),
        ),
        Recipe(
            "scheduledadam-cosine-hparams-wide",
            "Adam + warmup/cosine from Adam's defaults (rate 1e-3) with its rate, per-kind "
            "offsets, betas and epsilon meta-trained (8 values; the schedule's shape fixed) "
            "on the wide MLP bucket's late log training loss",
            _COSINE_HPARAMS_WIDE,
            dict(every=3000, steps=1000, at_start=True),
        ),
        Recipe(
            "scheduledadam-cosine-hparams-wide-shared",
            "scheduledadam-cosine-hparams-wide with conv kernels and embeddings on the "
            "matrices' step offset (the wide bucket has neither kind)",
            _COSINE_HPARAMS_WIDE_SHARED,
            dict(every=3000, steps=1000, at_start=True),
        ),
        Recipe(
            "scheduledadam-cosine-hparams-wide-one-rate",
            "scheduledadam-cosine-hparams-wide with one step size for every tensor kind "
            "(the rate, betas and epsilon of Adam on a fixed warmup-cosine schedule)",
            _COSINE_HPARAMS_WIDE_ONE_RATE,
            dict(every=3000, steps=1000, at_start=True),
        ),
        Recipe(
            "controlledadam-from-default",
            "the shipped default (Adam on a fixed warmup-cosine schedule, 8 values) under "
            "ControlledAdam's bounded per-tensor step and decay controller, the controller "
            "alone meta-trained; the best theta chosen on meta-valid over 3 seeds, start "
            "included",
            _CONTROLLED_FROM_DEFAULT,
            dict(every=1000, steps=1000, at_start=True, seeds=3),
        ),
        Recipe(
            "controlledadam-multi",
            "controlledadam-from-default's controller meta-trained on three kinds of task "
            "(wide MLP, conv, Transformer LM) instead of one MLP bucket; the best theta "
            "chosen on meta-valid over 3 seeds, start included",
            _CONTROLLED_MULTI,
            dict(every=500, steps=1000, at_start=True, seeds=3),
        ),
        Recipe(
            "controlledadam-multi-valid",
            "controlledadam-multi with the meta-loss on the outer-valid split (late log "
            "validation loss); the best theta chosen on meta-valid's validation loss over "
            "3 seeds, start included",
            _CONTROLLED_MULTI_VALID,
            dict(every=500, steps=1000, at_start=True, seeds=3, select_by="valid"),
        ),
        Recipe(
            "celoadam-head-valid",
            "the released CeloAdam with all but its scheduler's output head frozen (65 "
            "values), fine-tuned on the MLP buckets' late log validation loss; the best "
            "theta chosen on meta-valid's validation loss over 3 seeds",
            _CELOADAM_HEAD_VALID,
            dict(every=1000, steps=1000, at_start=True, seeds=3, select_by="valid"),
        ),
        Recipe(
            "celoadam-head-multi",
            "celoadam-head-valid's 65-value head on controlledadam-multi's three kinds of "
            "task, the meta-loss on a training and an outer-valid batch; the best theta "
            "chosen on meta-valid's validation loss over 3 seeds, start included",
            _CELOADAM_HEAD_MULTI,
            dict(every=500, steps=1000, at_start=True, seeds=3, select_by="valid"),
        ),
        Recipe(
            "celoadam-mup-head-lm",
            "the released CeloAdam under width-aware steps (base width 64, steps only "
            "shrunk), its 65-value head fine-tuned on two language-model families and a conv "
            "bucket, the meta-loss on a training and an outer-valid batch; the best theta "
            "chosen on meta-valid's validation loss over 3 seeds, start included",
            _CELOADAM_MUP_HEAD_LM,
            dict(every=500, steps=1000, at_start=True, seeds=3, select_by="valid"),
        ),
        Recipe(
            "celoadam-head-valid-mix",
            "the released CeloAdam's 65-value head fine-tuned on four kinds of task (wide "
            "MLPs, conv nets, Transformer and LSTM LMs) with the meta-loss on the outer-valid "
            "split only; the best theta chosen on meta-valid's validation loss over 3 seeds, "
            "start included",
            _CELOADAM_HEAD_VALID_MIX,
            dict(every=500, steps=1000, at_start=True, seeds=3, select_by="valid"),
        ),
        Recipe(
            "celoadam-head-valid-mix-balanced",
            "celoadam-head-valid-mix with every family's meta-gradient estimate scaled to "
            "unit norm before the average, so that each family pulls the head alike",
            _CELOADAM_HEAD_VALID_MIX_BALANCED,
            dict(every=500, steps=1000, at_start=True, seeds=3, select_by="valid"),
        ),
        Recipe(
            "celoadam-head-lm-valid",
            "the released CeloAdam's 65-value head fine-tuned on the Transformer and LSTM "
            "LM families alone (each family's estimate at unit norm), outer-valid late log "
            "loss; the best theta chosen on meta-valid's validation loss over 3 seeds, start "
            "included",
            _CELOADAM_HEAD_LM_VALID,
            dict(every=500, steps=1000, at_start=True, seeds=3, select_by="valid"),
        ),
        Recipe(
            "celoadam-head-lm-valid-fine",
            "celoadam-head-lm-valid at outer rate 3e-4 for 1,500 steps, meta-validated every "
            "250 steps (its gain was at step 500 and gone by 1000 at 1e-3)",
            _CELOADAM_HEAD_LM_VALID_FINE,
            dict(every=250, steps=1000, at_start=True, seeds=3, select_by="valid"),
        ),
        Recipe(
            "celoadam-regime",
            "the released CeloAdam with learnopt's regime head (a second step-size readout "
            "gated by how far the training loss fell, starting at zero): both heads "
            "fine-tuned on the Transformer and LSTM LM families and the wide MLP bucket "
            "(balanced, outer-valid late log loss); chosen on meta-valid every 250 steps",
            _CELOADAM_REGIME,
            dict(every=250, steps=1000, at_start=True, seeds=3, select_by="valid"),
        ),
        Recipe(
            "celoadam-regime-only",
            "the regime head alone (the step-size head and the rest frozen) on the wide "
            "MLP bucket, from the released CeloAdam or, with --init-theta, from a "
            "celoadam-head-lm-valid-fine theta; chosen on meta-valid every 250 steps",
            _CELOADAM_REGIME_ONLY,
            dict(every=250, steps=1000, at_start=True, seeds=3, select_by="valid"),
        ),
        Recipe(
            "celoadam-schedule",
            "the released CeloAdam with learnopt's schedule head (10 values: a learned "
            "function of the fraction of training on the log step, starting at zero) alone "
            "fine-tuned on the MLP, conv and two LM families (balanced, outer-valid late log "
            "loss); chosen on meta-valid every 250 steps",
            _CELOADAM_SCHEDULE,
            dict(every=250, steps=1000, at_start=True, seeds=3, select_by="valid"),
        ),
        Recipe(
            "celoadam-weight-decay",
            "the released CeloAdam with learnopt's weight decay (decoupled, scaled by the "
            "scheduled step and by how far the training loss fell), its log scale alone "
            "fine-tuned on the wide MLP bucket, a conv bucket and the LSTM LM family "
            "(outer-valid late log loss); chosen on meta-valid every 250 steps",
            _CELOADAM_WEIGHT_DECAY,
            dict(every=250, steps=1000, at_start=True, seeds=3, select_by="valid"),
        ),
        Recipe(
            "celoadam-b2",
            "the released CeloAdam with learnopt's second-moment decay head (Adam's 1 - b2 "
            "times exp(b), from the release's 0.999), that one value alone fine-tuned on the "
            "wide MLP bucket, a conv bucket and the LSTM LM family (late log loss on a "
            "training and an outer-valid batch); chosen on meta-valid every 250 steps",
            _CELOADAM_B2,
            dict(every=250, steps=1000, at_start=True, seeds=3, select_by="valid"),
        ),
        Recipe(
            "celoadam-b2-wd-es",
            "the released CeloAdam at b2 = 0.99 with weight decay 0.03 by progress, the "
            "second-moment decay's and the weight decay's log scales (two values) "
            "meta-trained by evolution strategies over whole 1000-step runs on "
            "celoadam-b2's three kinds of task; chosen on meta-valid every 10 steps",
            _CELOADAM_B2_WD_ES,
            dict(every=10, steps=1000, at_start=True, seeds=3, select_by="valid"),
        ),
        Recipe(
            "celoadam-b2-wd-es-valid",
            "celoadam-b2-wd-es with the meta-loss on the outer-valid split alone (the late "
            "log validation loss), 30 steps; chosen on meta-valid every 10 steps",
            _CELOADAM_B2_WD_ES_VALID,
            dict(every=10, steps=1000, at_start=True, seeds=3, select_by="valid"),
        ),
        Recipe(
            "celoadam-b2-wd-head-lm",
            "celoadam-head-lm-valid (the 65-value head on the two LM families) on "
            "celoadam-b2-wd-es's hand-set start (b2 0.99, weight decay 0.03 by progress); "
            "chosen on meta-valid every 250 steps",
            _CELOADAM_B2_WD_HEAD_LM,
            dict(every=250, steps=1000, at_start=True, seeds=3, select_by="valid"),
        ),
        Recipe(
            "celoadam-b2-wd-hidden-output",
            "the released CeloAdam at b2 = 0.99 with weight decay 0.1 by progress on the "
            "hidden and output matrices only, its log scale alone fine-tuned as in "
            "celoadam-weight-decay on training and outer-valid batches; chosen on "
            "meta-valid every 250 steps",
            _CELOADAM_B2_WD_HIDDEN_OUTPUT,
            dict(every=250, steps=1000, at_start=True, seeds=3, select_by="valid"),
        ),
        Recipe(
            "celoadam-es-from-release",
            "the released CeloAdam (b2 0.999) with a small weight decay (0.01 by progress, "
            "hidden and output matrices), the second-moment decay's and the weight decay's "
            "log scales meta-trained from zero by evolution strategies over whole 1000-step "
            "runs (outer-valid late log loss) on celoadam-b2's three kinds of task; chosen "
            "on meta-valid every 10 steps",
            _CELOADAM_ES_FROM_RELEASE,
            dict(every=10, steps=1000, at_start=True, seeds=3, select_by="valid"),
        ),
        Recipe(
            "celoadam-es-from-release-both",
            "celoadam-es-from-release with the meta-loss on a training and an outer-valid "
            "batch; chosen on meta-valid every 10 steps by both columns (train+valid)",
            _CELOADAM_ES_FROM_RELEASE_BOTH,
            dict(every=10, steps=1000, at_start=True, seeds=3, select_by="train+valid"),
        ),
        Recipe(
            "celoadam-es-from-release-broad",
            "celoadam-es-from-release-both with a broader perturbation (std 0.8), so that "
            "the perturbed runs reach b2 = 0.99 from the release's 0.999 within three "
            "deviations",
            _CELOADAM_ES_FROM_RELEASE_BROAD,
            dict(every=10, steps=1000, at_start=True, seeds=3, select_by="train+valid"),
        ),
        Recipe(
            "celoadam-es-schedule",
            "celoadam-es-from-release-broad with learnopt's schedule head (10 values) "
            "trained beside the two log scales at std 0.3; the second phase from "
            "celoadam-es-from-release-broad's chosen theta (--init-theta)",
            _CELOADAM_ES_SCHEDULE,
            dict(every=10, steps=1000, at_start=True, seeds=3, select_by="train+valid"),
        ),
    )
}


def recipe_names() -> list[str]:
    """The names :func:`get_recipe` accepts.

    Returns:
      The names of :data:`RECIPES`, sorted.
    """
    return sorted(RECIPES)


def get_recipe(name: str) -> Recipe:
    """The recipe called ``name``.

    Args:
      name: a key of :data:`RECIPES`.

    Returns:
      The :class:`Recipe`.

    Raises:
      ValueError: no recipe has that name (the message names the closest ones).
    """
    if not isinstance(name, str) or name not in RECIPES:
        close = difflib.get_close_matches(str(name), recipe_names(), n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ValueError(
            f"unknown recipe {name!r}{hint} (the recipes: {', '.join(recipe_names())})"
        )
    return RECIPES[name]
