"""Every default of an evaluation, written once: ``learnopt evaluate`` and the periodic one.

:class:`EvaluateConfig` holds the settings of ``learnopt evaluate`` (the candidate, the
tasks and baselines, how each run trains, where the results go); its command-line flags
are derived from its fields (``learnopt.cli.evaluate``). :class:`PeriodicEvalConfig`
holds the settings of the small held-out evaluation that ``learnopt meta-train
--eval-every N`` runs during meta-training (:mod:`learnopt.evaluation.periodic`). The
module constants are the defaults that code paths without a flag share (the training
engine, the baseline sweeps, the suites).

Pure Python: importing this module imports neither JAX nor numpy, so that ``learnopt
--help`` stays instant.
"""

from __future__ import annotations

import dataclasses
import math

from learnopt._fields import document_settings, setting

__all__ = [
    "EvaluateConfig",
    "PeriodicEvalConfig",
    "DEFAULT_LEARNING_RATES",
    "DEFAULT_BASELINES",
    "OPT_LIST_TRIALS",
    "REFERENCE_SCHEDULE",
    "REFERENCE_SCHEDULE_LR",
    "DEFAULT_SUITE_PREFERENCE",
    "EVAL_TASKS",
    "EVAL_LEARNING_RATES",
    "NUM_SEEDS",
    "VALID_SPLIT",
    "VALID_SPLITS",
    "VALID_BATCHES",
    "SEED",
    "VECTORIZE",
    "VECTORIZE_CHOICES",
    "SELECT_BY",
    "SELECT_BY_CHOICES",
    "EVAL_SELECT_CHOICES",
]


def _geometric_grid(low: float, high: float, num: int) -> tuple[float, ...]:
    """``num`` log-spaced values from ``low`` to ``high``, computed as ``np.geomspace`` does.

    Exponents ``log10(low) + i * step`` raised to the power of ten, the ends set exactly;
    the same floats as ``learnopt.evaluation.sweeps.log_grid`` (tested), without numpy.
    """
    start, stop = math.log10(low), math.log10(high)
    step = (stop - start) / (num - 1)
    values = [10.0 ** (start + i * step) for i in range(num)]
    values[0], values[-1] = float(low), float(high)
    return tuple(values)


#: Learning rates of the baseline sweeps: 1e-4 ... 1 in half-decades (9 points). The
#: library sweeps 1e-7 ... 1 (15 points); the low end never wins in short runs, and
#: the high end is where SGD with momentum is tuned on small problems.
DEFAULT_LEARNING_RATES: tuple[float, ...] = _geometric_grid(1e-4, 1.0, 9)

#: Baselines compared against by default (:func:`learnopt.evaluation.sweeps.baseline_sweeps`):
#: constant Adam and Adam with warmup + cosine decay to zero, each tuned per task over the
#: learning-rate grid; the first :data:`OPT_LIST_TRIALS` NAdamW settings of the OptList
#: (Metz et al., arXiv:2002.11887), the best per task; and the untuned reference schedule
#: (:data:`REFERENCE_SCHEDULE`, one run). Any registered optimizer name is a baseline too
#: (e.g. ``SGDM``, swept over the grid).
DEFAULT_BASELINES: tuple[str, ...] = ("Adam", "AdamWarmupCosine", "OptList", "Reference")

#: OptList trials of the ``OptList`` baseline (``OptList<k>`` names another count).
OPT_LIST_TRIALS = 9

#: The untuned reference schedule: Adam with warmup + cosine decay at one peak rate for
#: every task. The rate was chosen on the meta-training and meta-validation tasks, never on
#: ``heldout``: the lowest geometric-mean final train loss relative to each task's best
#: rate, over the grid 1e-3 ... 10^-0.5 (``python benchmarks/choose_reference_schedule.py``,
#: 1000 steps, 2 seeds: 0.1 scores 2.89, 0.0316 3.28, 0.316 11.8; table and plot in
#: ``docs/meta-training-results.md``).
REFERENCE_SCHEDULE_LR = 0.1
REFERENCE_SCHEDULE = "Reference"

#: The suite ``learnopt evaluate`` runs without ``--suite``: the first of these that is
#: defined (the held-out suite; ``smoke`` always is).
DEFAULT_SUITE_PREFERENCE: tuple[str, ...] = ("heldout", "held_out", "eval", "smoke")

#: How every run of an evaluation trains, unless told otherwise (the training engine,
#: :class:`learnopt.evaluation.engine.TrainingSettings`, and the flags below).
NUM_SEEDS = 3
VALID_SPLIT = "outer_valid"
#: The splits a valid loss can be measured on.
VALID_SPLITS: tuple[str, ...] = ("train", "inner_valid", "outer_valid", "test")
VALID_BATCHES = 5
SEED = 0
VECTORIZE = "auto"
VECTORIZE_CHOICES: tuple[str, ...] = ("auto", "vmap", "map")
#: How a baseline's learning rate is picked: lowest final or lowest mean train loss.
SELECT_BY = "final"
SELECT_BY_CHOICES: tuple[str, ...] = ("final", "mean")

#: Tasks of the periodic evaluation: the ``meta-valid`` suite of
#: :mod:`learnopt.tasks.suites` (two MLPs, an auto-encoder, a conv net, a vanilla-RNN and
#: a Transformer LM; disjoint from the meta-training families and from ``heldout``,
#: tested), written out here so that this module imports no JAX (a test checks they are
#: the suite's).
EVAL_TASKS: tuple[str, ...] = (
    "ImageMLP_Mnist5k_10_Silu96x48",
    "ImageMLP_Digits8_Elu16x16x16x16",
    "ImageMLPAE_Mnist5k_128x32x128_bs128",
    "Conv_Digits8_16x32x32",
    "RNNLM_pystdlibbytes_Patch16_VanillaRNN64_Embed32_bs32",
    "TransformerLM_PyStdlibBytes_MultiRuntime_1",
)
#: Adam's learning-rate grid in the periodic evaluation (computed once per run).
EVAL_LEARNING_RATES: tuple[float, ...] = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)

_CANDIDATE = "candidate (one of --theta or --optimizer)"
_TASKS = "tasks and baselines"
_TRAINING = "training"
_OUTPUT = "input and output"
_PERIODIC = "periodic meta-validation (eval.csv, eval.png, theta_best.msgpack)"


@document_settings
@dataclasses.dataclass(frozen=True)
class EvaluateConfig:
    """The settings of ``learnopt evaluate``, one field per flag.

    ``None`` means "the default", resolved when the evaluation runs: the held-out suite
    (:data:`DEFAULT_SUITE_PREFERENCE`), the baselines of
    :func:`learnopt.evaluation.sweeps.default_baselines`, the grid
    :data:`DEFAULT_LEARNING_RATES`, ``runs/evaluate-<time>``.

    Each field is documented by the help text of its ``setting(...)`` below (what the
    command's ``--help`` prints).
    """

    theta: str | None = setting(
        None,
        "theta file written by 'learnopt meta-train', or a shipped entry's name "
        "('learnopt list pretrained')",
        metavar="PATH",
        group=_CANDIDATE,
    )
    lopt: str | None = setting(
        None,
        "learned optimizer of a theta file without metadata (default: 'lopt' in the "
        "config.json next to it; files with metadata name their own)",
        metavar="NAME",
        group=_CANDIDATE,
    )
    optimizer: str | None = setting(
        None,
        "evaluate this registered hand-designed optimizer instead (with --lr; 'learnopt "
        "list optimizers' shows all)",
        metavar="NAME",
        group=_CANDIDATE,
    )
    lr: float | None = setting(
        None,
        "learning rate of --optimizer",
        metavar="X",
        parse="positive_float",
        group=_CANDIDATE,
    )
    suite: str | None = setting(
        None,
        "task suite (default: the held-out suite; 'learnopt list suites' shows all)",
        metavar="NAME",
        group=_TASKS,
    )
    tasks: tuple[str, ...] | None = setting(
        None,
        "registered task names instead of --suite ('learnopt list tasks' shows all)",
        metavar="A,B",
        parse="name_list",
        group=_TASKS,
    )
    baselines: tuple[str, ...] | None = setting(
        None,
        f"baselines (default: {','.join(DEFAULT_BASELINES)}): registered optimizers "
        "tuned over --lrs, 'OptList' (its first "
        f"{OPT_LIST_TRIALS} NAdamW settings; 'OptList<k>' the first k), 'Reference' "
        f"(untuned Adam + warmup/cosine at {REFERENCE_SCHEDULE_LR:g})",
        metavar="A,B",
        parse="name_list",
        group=_TASKS,
    )
    lrs: tuple[float, ...] | None = setting(
        None,
        "learning-rate grid of the baselines (default: 1e-4..1, "
        f"{len(DEFAULT_LEARNING_RATES)} log-spaced points)",
        metavar="X,Y",
        parse="float_list",
        group=_TASKS,
    )
    select_by: str = setting(
        SELECT_BY,
        "pick each baseline's learning rate by the seed-mean final train loss "
        "(default) or the mean train loss over the run",
        choices=SELECT_BY_CHOICES,
        group=_TASKS,
    )
    steps: int = setting(
        1000,
        "inner training steps of each run (default: {default})",
        metavar="N",
        parse="positive_int",
        group=_TRAINING,
    )
    seeds: int = setting(
        NUM_SEEDS,
        "runs (seeds) per task and optimizer (default: {default})",
        metavar="S",
        parse="positive_int",
        group=_TRAINING,
    )
    eval_every: int | None = setting(
        None,
        "steps between valid evaluations, also the steps per jitted chunk "
        "(default: steps/20, at least 10)",
        metavar="K",
        parse="positive_int",
        group=_TRAINING,
    )
    valid_split: str = setting(
        VALID_SPLIT,
        "split of the valid loss (default: {default})",
        choices=("inner_valid", "outer_valid", "test", "train"),
        group=_TRAINING,
    )
    valid_batches: int = setting(
        VALID_BATCHES,
        "fixed batches per valid evaluation (default: {default})",
        metavar="V",
        parse="positive_int",
        group=_TRAINING,
    )
    vectorize: str = setting(
        VECTORIZE,
        "runs of a sweep batched (vmap) or one after another in one program (map); "
        "auto: on CPU vmap for MLP-like losses, map for convolutions, loops and "
        "attention (default: {default})",
        choices=VECTORIZE_CHOICES,
        group=_TRAINING,
    )
    seed: int = setting(
        SEED, "base seed (default: {default})", metavar="N", parse="int", group=_TRAINING
    )
    out: str | None = setting(
        None,
        "output folder (default: runs/evaluate-<time>); never one that holds a meta-training run",
        metavar="DIR",
        group=_OUTPUT,
    )
    overwrite: bool = setting(
        False,
        "replace an earlier evaluation in --out: its files (summary.md, ..., "
        "curves_<task>.png) are removed before the first task trains, other files are "
        "kept; a folder that holds a meta-training run is refused even so",
        switch="on",
        group=_OUTPUT,
    )
    baseline_cache: str | None = setting(
        None,
        "keep the baselines' curves here and reuse them when the settings and "
        "learnopt's source are unchanged; a DIR that is a file or cannot be written is an "
        "error (default: $LEARNOPT_CACHE_DIR/baselines, else "
        "$XDG_CACHE_HOME/learnopt/baselines, else ~/.cache/learnopt/baselines; if that "
        "one cannot be written, a warning and nothing is cached)",
        metavar="DIR",
        group=_OUTPUT,
    )
    use_baseline_cache: bool = setting(
        True,
        "train the baselines afresh and keep nothing",
        flag="--no-baseline-cache",
        switch="negate",
        group=_OUTPUT,
    )
    tensorboard: str | None = setting(
        None,
        "also write each task's curves and the summary figures as TensorBoard events here, "
        "one run per optimizer (a folder: a file or a place that cannot be written is an "
        "error before anything trains; needs the 'tensorboard' extra: pip install "
        "'learnopt[tensorboard]'; default: off)",
        metavar="DIR",
        group=_OUTPUT,
    )
    data_dir: str | None = setting(
        None, "TFDS data dir (default: $LEARNOPT_DATA_DIR)", metavar="DIR", group=_OUTPUT
    )
    plots: bool = setting(
        True,
        "do not write curves_<task>.png",
        flag="--no-plots",
        switch="negate",
        group=_OUTPUT,
    )
    quiet: bool = setting(False, "no progress bar, only the summary", switch="on", group=_OUTPUT)


#: What the periodic evaluation's best theta minimizes (``PeriodicEvalConfig.select_by``).
EVAL_SELECT_CHOICES = ("train", "valid", "train+valid")


@document_settings
@dataclasses.dataclass(frozen=True)
class PeriodicEvalConfig:
    """The settings of the periodic meta-validation during meta-training.

    ``learnopt meta-train``'s ``--eval-*`` flags are derived from these fields, and
    :class:`learnopt.evaluation.periodic.PeriodicEval` takes its defaults from them.

    Each field is documented by the help text of its ``setting(...)`` below (what the
    command's ``--help`` prints).
    """

    every: int | None = setting(
        None,
        "at every N-th meta-step (whatever --log-every is) train the meta-validation "
        "tasks with the current theta, "
        f"compare the final training loss with Adam tuned over {len(EVAL_LEARNING_RATES)} "
        "learning rates (computed once and kept in learnopt evaluate's baseline cache) "
        "and keep the best theta as theta_best.msgpack (default: off)",
        flag="--eval-every",
        metavar="N",
        parse="positive_int",
        group=_PERIODIC,
    )
    tasks: tuple[str, ...] = setting(
        EVAL_TASKS,
        "registered tasks of the periodic evaluation (default: the meta-valid suite, "
        "disjoint from the meta-training families and from heldout)",
        flag="--eval-tasks",
        metavar="A,B",
        parse="name_list",
        group=_PERIODIC,
    )
    suite: str | None = setting(
        None,
        "a task suite for the periodic evaluation instead of --eval-tasks",
        flag="--eval-suite",
        metavar="NAME",
        group=_PERIODIC,
    )
    steps: int = setting(
        300,
        "inner steps per evaluation run (default: {default})",
        flag="--eval-steps",
        metavar="T",
        parse="positive_int",
        group=_PERIODIC,
    )
    seeds: int = setting(
        1,
        "runs per task and evaluation (default: {default})",
        flag="--eval-seeds",
        metavar="S",
        parse="positive_int",
        group=_PERIODIC,
    )
    at_start: bool = setting(
        False,
        "also evaluate the initial theta before the first meta-step, so that theta_best "
        "may be the starting point (default: off)",
        flag="--eval-at-start",
        switch="on",
        group=_PERIODIC,
    )
    learning_rates: tuple[float, ...] = setting(
        EVAL_LEARNING_RATES,
        "Adam's learning-rate grid, tuned once per run on the same batches (empty: no baseline)",
        flag=None,
    )
    select_by: str = setting(
        "train",
        "what theta_best.msgpack minimizes: 'train' (the geometric mean over the tasks of "
        "the final training loss / tuned Adam's) or 'valid' (the geometric mean of the "
        "final validation losses, for a run whose meta-objective is the validation loss) "
        "or 'train+valid' (the geometric mean of the two) (default: {default})",
        flag="--eval-select",
        metavar="WHAT",
        choices=EVAL_SELECT_CHOICES,
        group=_PERIODIC,
    )
