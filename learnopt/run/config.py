"""What a meta-training run is told: every setting, its default and its help, written once.

:class:`RunConfig` holds the settings of a run (what to meta-train, the estimator, the
outer optimizer, the output cadence); :class:`LaunchConfig` how the command line starts it
(output folder, resume, devices and processes). ``learnopt meta-train``'s flags are derived
from both (``learnopt.cli.meta_train``), and :func:`learnopt.train.meta_train` takes a
``RunConfig`` or the same keywords. Pure Python: importing this module imports no JAX, so
``learnopt --help`` stays instant.

Settings whose default depends on others are ``None`` until a run resolves them
(:func:`lengths`; an architecture's recipe in :mod:`learnopt.run.recipes` may set the
outer learning rate, clipping, lengths, population and perturbation size of its runs).
The trainers and their own defaults are :data:`learnopt.run.trainers.SPECS`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from learnopt._fields import document_settings, setting
from learnopt.run import trainers

__all__ = [
    "RunConfig",
    "LaunchConfig",
    "TRAINERS",
    "FULL_TRAINERS",
    "DEFAULT_TASK",
    "DEFAULT_LOPT",
    "DEFAULT_TRAINER",
    "LOPTS",
    "DEFAULT_TRUNC_LENGTH",
    "DEFAULT_TOTAL_LENGTH",
    "DEFAULT_NUM_TASKS",
    "DEFAULT_OUTER_LR",
    "DEFAULT_STD",
    "META_LOSS_SPLITS",
    "META_LOSS_WEIGHTINGS",
    "META_LOSS_TRANSFORMS",
    "FAMILY_BALANCES",
    "RUN_SETTINGS",
    "RUN_OPTIONS",
    "default_of",
    "lengths",
]

#: The notes' walkthrough: LearnableAdam on the embedded 8x8 digits MLP.
DEFAULT_TASK = "ImageMLP_Digits8_Relu32"
DEFAULT_LOPT = "LearnableAdam"
DEFAULT_TRAINER = "full_grad"
#: Learned optimizers that ``--help`` names (the registry has more: ``learnopt list lopts``).
LOPTS = ("LearnableSGD", "LearnableSGDM", "LearnableAdam", "MLPLOpt")
#: The command line's trainer names: ``name -> (estimator class, what it does)``, from
#: :data:`learnopt.run.trainers.SPECS` (as are the two below, all read at each use).
TRAINERS = trainers.View(lambda: {n: (s.estimator, s.help) for n, s in trainers.SPECS.items()})
#: Trainers that unroll whole fresh inner runs per estimate (no truncation).
FULL_TRAINERS = trainers.View(lambda: {n: s for n, s in trainers.SPECS.items() if s.full})
#: Inner runs per meta-step by trainer (``"other"``: a trainer that sets none).
DEFAULT_NUM_TASKS = trainers.View(
    lambda: {
        **{n: s.num_tasks for n, s in trainers.SPECS.items()},
        "other": trainers.DEFAULT_POPULATION,
    }
)
#: Inner steps per estimate of the truncated trainers.
DEFAULT_TRUNC_LENGTH = 4
#: Length of an inner run: the notes' 4-step walkthrough for the full-run trainers, 200
#: steps (with staggered starts) for the truncated ones.
DEFAULT_TOTAL_LENGTH = {"full": 4, "truncated": 200}
DEFAULT_OUTER_LR = 1e-2
DEFAULT_STD = 0.01
#: ``--meta-loss-split`` values (``lopt_truncated_step.META_LOSS_SPLITS`` less None).
META_LOSS_SPLITS = ("same_data", "train", "inner_valid", "outer_valid", "test", "train+outer_valid")
#: ``--meta-loss-weighting`` values (``meta_objective.WEIGHTINGS`` less None).
META_LOSS_WEIGHTINGS = ("uniform", "last_window", "late")
#: ``--meta-loss-transform`` values (``meta_objective.TRANSFORMS`` less None).
META_LOSS_TRANSFORMS = ("log",)
#: ``--family-balance`` values (``outer_trainers.worker.BALANCES``, not imported here:
#: this module stays free of JAX).
FAMILY_BALANCES = ("mean", "norm")

_WHAT = "what to meta-train"
_ESTIMATOR = "meta-gradient estimator"
_OUTER = "outer optimizer"
_OUTPUT = "output, checkpoints and resume"
_DEVICES = "devices, processes and machines (docs/distributed.md)"
_NOTE_RECIPE = "; an architecture's recipe may set its own (learnopt.run.recipes)"
#: Trainer names for the help texts: the full-run and truncated ones, those that take std.
_FULL = "/".join(FULL_TRAINERS)
_TRUNCATED = "/".join(n for n in TRAINERS if n not in FULL_TRAINERS)
_ES = "/".join(n for n, s in trainers.SPECS.items() if "std" in s.takes)
_POPULATIONS = "".join(
    f"{s.num_tasks} for {n}, "
    for n, s in trainers.SPECS.items()
    if s.num_tasks != trainers.DEFAULT_POPULATION
)


@document_settings
@dataclasses.dataclass(frozen=True)
class RunConfig:
    """The settings of a meta-training run.

    The first group defines the run: a resumed run keeps them (:data:`RUN_SETTINGS`); the
    second (:data:`RUN_OPTIONS`) a resumed run may change (e.g. ``steps`` to extend it).
    ``None`` means "the default" (or, resuming, the run's own value).

    Each field is documented by the help text of its ``setting(...)`` below (what the
    command's ``--help`` prints).
    """

    recipe: str | None = setting(
        None,
        "a named recipe of learnopt.run.recipes.RECIPES (every setting of a documented run, "
        "its --eval-* meta-validation and --steps); flags given beside it win",
        metavar="NAME",
        group=_WHAT,
    )
    task: str | None = setting(
        None,
        f"registered task or task family (default: {DEFAULT_TASK}; 'learnopt list tasks' "
        "and 'learnopt list families' show all)",
        metavar="NAME",
        group=_WHAT,
    )
    families: tuple[str, ...] | None = setting(
        None,
        "meta-train on this task family instead of --task; repeat it for several (one "
        "gradient estimator each, their estimates averaged every meta-step); 'meta-train' "
        "stands for its four MetaTrain_* buckets ('learnopt list families' shows all)",
        flag="--family",
        metavar="NAME",
        repeat=True,
        group=_WHAT,
    )
    lopt: str | None = setting(
        None,
        f"learned optimizer: {', '.join(LOPTS)}, ... ('learnopt list lopts' shows all; default: "
        f"{DEFAULT_LOPT}); built "
        "with its meta-training defaults (learnopt.run.recipes), which also set --outer-lr, "
        "--max-grad-norm, --trunc-length, --total-length, --num-tasks and --std where not "
        "given",
        metavar="NAME",
        group=_WHAT,
    )
    lopt_config: dict[str, Any] | None = setting(
        None,
        "a constructor argument of --lopt, VALUE in JSON (step_mult=0.003, "
        "exp_mult=[0.1,0.1,0.1]; plain words are strings); repeatable",
        flag="--lopt-arg",
        metavar="KEY=VALUE",
        repeat=True,
        group=_WHAT,
    )
    init_theta: str | None = setting(
        None,
        "start from this theta instead of the architecture's initial one: a shipped entry's "
        "name ('learnopt list pretrained') or a theta file (a run's theta.msgpack); the "
        "learned optimizer and its configuration come from the file's metadata unless "
        "--lopt names another architecture, whose theta must then have the same layout",
        metavar="NAME_OR_PATH",
        group=_WHAT,
    )
    freeze: tuple[str, ...] | None = setting(
        None,
        "keep these parts of theta fixed: a theta key ('rnn_params', 'ff_mod_stack/0') or a "
        "group the architecture names (Celo: phase1 trains the update rule, freezing the "
        "schedule; phase2 the reverse); repeatable",
        metavar="KEY",
        repeat=True,
        group=_WHAT,
    )
    trainer: str | None = setting(
        None,
        f"gradient estimator (default: {DEFAULT_TRAINER}; see 'trainers' below)",
        choices=TRAINERS,
        group=_ESTIMATOR,
    )
    trunc_length: int | None = setting(
        None,
        "inner steps per meta-gradient estimate (a truncation) of the truncated trainers "
        f"{_TRUNCATED}; must be <= T; {_FULL} unroll whole runs and take "
        f"--total-length instead (default: {DEFAULT_TRUNC_LENGTH}{_NOTE_RECIPE})",
        metavar="K",
        parse="positive_int",
        group=_ESTIMATOR,
    )
    total_length: int | None = setting(
        None,
        f"length of each inner training run: the whole horizon of {_FULL} "
        f"(default: {DEFAULT_TOTAL_LENGTH['full']}); for {_TRUNCATED} the runs start "
        f"staggered in [0, T) and restart when they reach T (default: "
        f"{DEFAULT_TOTAL_LENGTH['truncated']}{_NOTE_RECIPE})",
        metavar="T",
        parse="positive_int",
        group=_ESTIMATOR,
    )
    num_tasks: int | None = setting(
        None,
        f"inner runs per meta-step (ES: antithetic pairs) (default: {_POPULATIONS}"
        f"{trainers.DEFAULT_POPULATION} for the others{_NOTE_RECIPE})",
        metavar="N",
        parse="positive_int",
        group=_ESTIMATOR,
    )
    std: float | None = setting(
        None,
        f"ES perturbation standard deviation ({_ES}) (default: {DEFAULT_STD:g}{_NOTE_RECIPE})",
        parse="positive_float",
        group=_ESTIMATOR,
    )
    meta_loss_split: str | None = setting(
        None,
        "what a step's meta-loss is measured on: by default the training loss of the step "
        "(before its update, as the notes' library); a split name: the updated params' "
        "loss on a batch of that split (outer_valid: a validation objective); same_data: "
        "on the step's own batch",
        choices=META_LOSS_SPLITS,
        group=_ESTIMATOR,
    )
    meta_loss_weighting: str | None = setting(
        None,
        "weight of a step's meta-loss by its position t in its inner run of T steps "
        f"(weights of mean 1 over a run; every trainer, {_FULL} included): "
        "uniform (the default: the mean over each truncation); last_window: only the last "
        "--meta-loss-window steps count (an end-of-run objective); late: (p+1)((t+1/2)/T)^p "
        "with p = --meta-loss-power (see learnopt.outer_trainers.meta_objective)",
        choices=META_LOSS_WEIGHTINGS,
        group=_ESTIMATOR,
    )
    meta_loss_window: int | float | None = setting(
        None,
        "the window of --meta-loss-weighting last_window: a number of steps (100) or a "
        "fraction of the run in (0, 1] (0.1: its last tenth)",
        metavar="W",
        parse="window",
        group=_ESTIMATOR,
    )
    meta_loss_power: float | None = setting(
        None,
        "the exponent p of --meta-loss-weighting late (default: 1, linear)",
        metavar="P",
        parse="positive_float",
        group=_ESTIMATOR,
    )
    meta_loss_transform: str | None = setting(
        None,
        "log: the meta-loss is log(max(loss, 1e-8)) of each step's raw loss (not the "
        "task's normalized one), so that tasks of different loss scales weigh alike "
        "(default: the normalized loss itself)",
        choices=META_LOSS_TRANSFORMS,
        group=_ESTIMATOR,
    )
    outer_lr: float | None = setting(
        None,
        f"learning rate of the outer Adam on theta (default: {DEFAULT_OUTER_LR:g}{_NOTE_RECIPE})",
        metavar="LR",
        parse="positive_float",
        group=_OUTER,
    )
    max_grad_norm: float | None = setting(
        None,
        f"clip the meta-gradient to this global norm (default: no clipping{_NOTE_RECIPE})",
        metavar="C",
        parse="positive_float",
        group=_OUTER,
    )
    family_balance: str | None = setting(
        None,
        "how the families' estimates are combined every meta-step: mean (as they come) or "
        "norm (each scaled to unit norm first, so that a family whose meta-loss moves "
        "most with theta does not set the direction alone; default: mean)",
        choices=FAMILY_BALANCES,
        group=_OUTER,
    )
    seed: int = setting(
        0, "random seed (default: {default})", metavar="N", parse="seed", group=_OUTER
    )
    steps: int = setting(
        2000,
        "number of meta-steps, >= 1; with --resume, the new total (default: {default})",
        metavar="N",
        parse="positive_int",
        group=_OUTER,
    )
    log_every: int = setting(
        50,
        "fetch metrics from the device, update the progress bar and append to metrics.csv "
        "every N steps (default: {default})",
        metavar="N",
        parse="positive_int",
        group=_OUTPUT,
    )
    checkpoint_every: int = setting(
        500,
        "checkpoint the whole state every N steps; 0: only at the end and on SIGINT/SIGTERM "
        "(default: {default})",
        metavar="N",
        parse="non_negative_int",
        group=_OUTPUT,
    )
    keep_checkpoints: int = setting(
        3,
        "keep the last K checkpoints (default: {default})",
        metavar="K",
        parse="positive_int",
        group=_OUTPUT,
    )
    health_window: int = setting(
        500,
        "stop (exit 1) when theta has not changed for N steps; warn when most of the last N "
        "steps were skipped as non-finite; 0: off (default: {default})",
        metavar="N",
        parse="non_negative_int",
        group=_OUTPUT,
    )
    data_dir: str | None = setting(
        None,
        "TFDS data dir for prepared datasets (default: $LEARNOPT_DATA_DIR, else "
        "~/tensorflow_datasets)",
        metavar="DIR",
        group=_OUTPUT,
    )

    def given(self) -> dict[str, Any]:
        """The settings that differ from the defaults (what a caller asked for).

        Returns:
          ``{name: value}`` for every field whose value is not the field's default.
        """
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value != f.default:
                out[f.name] = value
        return out


#: Settings that define a run: a resumed run must have the same ones.
RUN_SETTINGS = (
    "recipe",
    "task",
    "families",
    "lopt",
    "lopt_config",
    "init_theta",
    "freeze",
    "trainer",
    "trunc_length",
    "total_length",
    "num_tasks",
    "std",
    "meta_loss_split",
    "meta_loss_weighting",
    "meta_loss_window",
    "meta_loss_power",
    "meta_loss_transform",
    "outer_lr",
    "max_grad_norm",
    "family_balance",
    "seed",
)
#: Settings a resumed run may change.
RUN_OPTIONS = (
    "steps",
    "log_every",
    "checkpoint_every",
    "keep_checkpoints",
    "health_window",
    "data_dir",
)
assert set(RUN_SETTINGS) | set(RUN_OPTIONS) == {f.name for f in dataclasses.fields(RunConfig)}


def default_of(name: str) -> Any:
    """The unconditional default of setting ``name`` (``None`` where it depends on others).

    Args:
      name: a field of :class:`RunConfig`.

    Returns:
      The default, e.g. ``default_of("task") == DEFAULT_TASK``.
    """
    named = {
        "task": DEFAULT_TASK,
        "lopt": DEFAULT_LOPT,
        "trainer": DEFAULT_TRAINER,
        "std": DEFAULT_STD,
        "outer_lr": DEFAULT_OUTER_LR,
    }
    if name in named:
        return named[name]
    return {f.name: f.default for f in dataclasses.fields(RunConfig)}[name]


def lengths(
    trainer: str, trunc_length: int | None, total_length: int | None, num_tasks: int | None
) -> tuple[int | None, int, int]:
    """The lengths and population of a run, defaults filled in and checked.

    Args:
      trainer: a name of :data:`TRAINERS`.
      trunc_length: inner steps per estimate (truncated trainers only), or None.
      total_length: length of an inner run, or None.
      num_tasks: inner runs per meta-step, or None.

    Returns:
      ``(trunc_length, total_length, num_tasks)``; ``trunc_length`` is None for the
      full-run trainers.

    Raises:
      ValueError: ``trunc_length`` given to a full-run trainer, or longer than a run.
      UnknownNameError: an unknown trainer.
    """
    spec = trainers.SPECS[trainer]
    full = spec.full
    if full and trunc_length is not None:
        truncated = "/".join(n for n in TRAINERS if n not in FULL_TRAINERS)
        raise ValueError(
            f"{trainer} unrolls whole inner runs: set their length with total_length "
            f"(trunc_length is the truncation of {truncated})"
        )
    if total_length is None:
        total_length = DEFAULT_TOTAL_LENGTH["full" if full else "truncated"]
    if not full:
        if trunc_length is None:
            trunc_length = DEFAULT_TRUNC_LENGTH
        if trunc_length > total_length:
            raise ValueError(
                f"trunc_length ({trunc_length}, steps per estimate) must be <= total_length "
                f"({total_length}, the length of an inner run) for the truncated trainer "
                f"{trainer}"
            )
    if num_tasks is None:
        num_tasks = spec.num_tasks
    return trunc_length, total_length, num_tasks


@document_settings
@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    """How ``learnopt meta-train`` starts a run: where it writes, and on which devices.

    Each field is documented by the help text of its ``setting(...)`` below (what the
    command's ``--help`` prints).
    """

    out: str | None = setting(
        None,
        "output folder, created if needed; refused if it holds a run, unless --resume or "
        "--overwrite, and always if it holds an evaluation (learnopt evaluate); checked "
        "before any work: a file, or a place that cannot be written, is an error (default: "
        "runs/meta-train-<timestamp>)",
        metavar="DIR",
        group=_OUTPUT,
    )
    resume: str | None = setting(
        None,
        "continue the run in DIR from its latest checkpoint, with its settings (--steps may "
        "extend it)",
        metavar="DIR",
        group=_OUTPUT,
    )
    overwrite: bool = setting(
        False,
        "replace the run in --out: its files (config.json, metrics.csv, theta.msgpack, "
        "plots, eval.csv, eval.png, theta_best.msgpack, eval_config.json) and checkpoints "
        "are removed first, other files are kept; a folder that holds an evaluation is "
        "refused even so",
        switch="on",
        group=_OUTPUT,
    )
    plots: bool = setting(
        True,
        "do not write meta_loss.png/learning_rate.png",
        flag="--no-plots",
        switch="negate",
        group=_OUTPUT,
    )
    quiet: bool = setting(False, "no progress bar, only the summary", switch="on", group=_OUTPUT)
    tensorboard: str | None = setting(
        None,
        "also write metrics.csv's columns as TensorBoard scalars (meta_train/<column>) "
        "into DIR (a folder, checked before any work: a file or a place that cannot be "
        "written is an error; needs the 'tensorboard' extra: pip install "
        "'learnopt[tensorboard]'; default: off, metrics.csv is always written)",
        metavar="DIR",
        group=_OUTPUT,
    )
    all_devices: bool = setting(
        False,
        "split the population over every device of this process (e.g. the GPUs of one "
        "host); automatic in a multi-process run. --num-tasks must be a multiple of the "
        "number of devices",
        switch="on",
        group=_DEVICES,
    )
    coordinator: str | None = setting(
        None,
        "join a multi-process run whose process 0 listens at HOST:PORT (the same on every "
        "process); with --num-processes and --process-id",
        metavar="HOST:PORT",
        group=_DEVICES,
    )
    num_processes: int | None = setting(
        None,
        "the number of processes of the run",
        metavar="N",
        parse="positive_int",
        group=_DEVICES,
    )
    process_id: int | None = setting(
        None,
        "this process's index in [0, N); process 0 writes --out, the others never touch it",
        metavar="I",
        parse="non_negative_int",
        group=_DEVICES,
    )
    distributed: bool = setting(
        False,
        "join a multi-process run described by the cluster's environment (SLURM, Open MPI, "
        "...: JAX detects it) instead of the three flags above",
        switch="on",
        group=_DEVICES,
    )
    init_timeout: int = setting(
        300,
        "seconds to wait for every process to join, then exit 1 (default: {default})",
        metavar="S",
        parse="positive_int",
        group=_DEVICES,
    )
    peer_timeout: int = setting(
        100,
        "a process silent for S seconds is declared dead: the others stop with a non-zero "
        "exit status; restart the job with --resume (default: {default})",
        metavar="S",
        parse="positive_int",
        group=_DEVICES,
    )
