"""The meta-training entry point, :func:`meta_train`: check the call, resolve the settings,
build the learner, open the output folder, then run one :class:`~learnopt.run.session.Session`.

The output folder, settings, health, metrics and the session live in their own modules
of :mod:`learnopt.run`; this one only sequences them.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Sequence
from typing import Any

from learnopt import _validate, distributed
from learnopt._signals import RaiseOnSignal
from learnopt.run import build, folder, processes, recipes
from learnopt.run import config as run_config
from learnopt.run import session as run_session
from learnopt.run import settings as run_settings
from learnopt.run.results import MetaTrainResult, StepInfo

__all__ = ["meta_train", "StepKeys"]

StepKeys = run_session.StepKeys  # the PRNG key of each meta-step (re-exported)

_SETTING_NAMES = run_config.RUN_SETTINGS + run_config.RUN_OPTIONS


def meta_train(
    config: run_config.RunConfig | None = None,
    *,
    learner: Any = None,
    theta_opt: Any = None,
    out_dir: str | os.PathLike | None = None,
    resume: bool = False,
    overwrite: bool = False,
    plots: bool = True,
    progress: bool = True,
    callbacks: Sequence[Callable[[StepInfo], Any]] = (),
    handle_signals: bool = True,
    mesh: Any = None,
    **settings: Any,
) -> MetaTrainResult:
    """Meta-trains a learned optimizer; checkpoints, resumes, survives faults.

    Long (over 80 lines) for its docstring (63 lines: what a run writes, resumes and
    survives); the body is 59 lines, one pass over the run's phases.

    The run's settings are the fields of :class:`learnopt.run.config.RunConfig` (task,
    families, lopt, lopt_config, trainer, trunc_length, total_length, num_tasks, std,
    meta_loss_split, meta_loss_weighting, meta_loss_window, meta_loss_power,
    meta_loss_transform, outer_lr, max_grad_norm, family_balance, seed, steps, log_every,
    checkpoint_every, keep_checkpoints, health_window, data_dir), given as ``config``,
    as keywords, or both (a keyword wins).
    A setting left unset takes its default, its recipe's for an architecture given by
    name (:mod:`learnopt.run.recipes`), or, with ``resume=True``, the resumed run's value
    (a value given for a setting that differs from the run's raises ``ValueError``). In a
    ``config``, a field at its default counts as unset. ``task`` and ``lopt`` may also be
    objects (a ``Task``/``TaskFamily``, a ``LearnedOptimizer``).

    Args:
      config: the run's settings.
      learner: an already-built ``SingleMachineGradientLearner`` instead of task, lopt,
        trainer and their lengths, std, outer_lr, max_grad_norm.
      theta_opt: an outer optimizer instead of ``Adam(outer_lr)``.
      out_dir: the output folder (None: write nothing, no checkpoints); see
        :mod:`learnopt.run.folder`. Locked while the run writes it.
      resume: continue the run in ``out_dir`` from its latest checkpoint.
      overwrite: replace the run in ``out_dir`` (its files and checkpoints).
      plots: write meta_loss.png and learning_rate.png at the end.
      progress: show a progress bar (stderr) and print the summary.
      callbacks: called with a :class:`StepInfo` after each metrics flush (a callback's
        ``due(step)`` asks for a flush at that step: see :class:`StepInfo`).
      handle_signals: turn SIGINT/SIGTERM into "checkpoint and stop" (main thread only).
      mesh: the devices the population is split over: None (default) one device, or in
        a multi-process run (after :func:`learnopt.distributed.initialize`) every device
        of every process; ``"all"`` every device (e.g. the GPUs of one host); or a
        one-axis ``jax.sharding.Mesh``. ``num_tasks`` must be a multiple of its size. Not
        a setting of the run: a run may resume on other devices or processes. In a
        multi-process run every process calls ``meta_train`` with the same arguments
        (checked; ``data_dir`` may differ); process 0's ``out_dir`` is the run's and only
        process 0 reads or writes it; callbacks run on every process.
      **settings: settings of :class:`~learnopt.run.config.RunConfig` by keyword.

    Returns:
      a :class:`MetaTrainResult`; check ``result.ok`` (or ``status``).

    Raises:
      ValueError or TypeError: bad arguments (naming the argument), a resume whose settings
        differ, a corrupted or mismatched checkpoint (``RunExistsError`` when ``out_dir``
        holds a run and neither ``resume`` nor ``overwrite`` is set).
      RunLockedError: another live process is writing ``out_dir``.
      DataUnavailableError: the task's data is missing, corrupted or unreadable.
    """
    given, options = _split_settings(config, settings)
    for flag, value in (
        ("resume", resume),
        ("overwrite", overwrite),
        ("plots", plots),
        ("progress", progress),
        ("handle_signals", handle_signals),
    ):
        if not isinstance(value, bool):
            raise TypeError(f"{flag} must be True or False, got {value!r}")
    if resume and overwrite:
        raise ValueError("resume and overwrite exclude each other: continue the run or replace it")
    if resume and out_dir is None:
        raise ValueError("resume needs out_dir: the folder of the run to continue")
    for name, value in given.items():
        if name not in ("task", "lopt"):
            given[name] = run_settings.check_setting(name, value)
    if given["task"] is not None and given["families"] is not None:
        raise ValueError("task and families exclude each other: pass one of them")
    for name, value in options.items():
        options[name] = None if value is None else run_settings.check_option(name, value)
    callbacks = list(callbacks)
    for cb in callbacks:
        if not callable(cb):
            raise TypeError(f"callbacks must be callables taking a StepInfo, got {cb!r}")
    if learner is not None:
        clash = [k for k, v in given.items() if k != "seed" and v is not None]
        if clash or theta_opt is not None:
            raise ValueError(
                f"learner= already defines {', '.join(clash or ['theta_opt'])}: pass either "
                "a learner or the settings that build one"
            )
    if theta_opt is not None and given["outer_lr"] is not None:
        raise ValueError("theta_opt= replaces outer_lr: pass one of them")
    if learner is not None:
        processes.check_learner_mesh(learner, mesh)
    processes.check_same_everywhere(given, options, resume, overwrite, learner, theta_opt, mesh)

    run_folder, saved = processes.open_out_dir(out_dir, resume, overwrite)
    session = None
    try:
        # Until the first meta-step there is nothing to finish: SIGINT and SIGTERM stop at
        # once (learnopt._signals.Interrupted), releasing the folder.
        with RaiseOnSignal(handle_signals):
            session = _start_session(
                given, options, saved, learner, theta_opt, mesh, run_folder, resume, overwrite
            )
            session.callbacks, session.progress = callbacks, progress and session.primary
            session.start()
            session.begin()
    except BaseException:
        if getattr(session, "bar", None) is not None:
            session.bar.close()
        if run_folder is not None and distributed.is_primary():
            run_folder.release_reserve()
            run_folder.unlock()
        raise
    session.loop(handle_signals)
    return session.finish(plots)


def _split_settings(
    config: run_config.RunConfig | None, settings: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The settings and options a caller gave (None where not given)."""
    unknown = sorted(set(settings) - set(_SETTING_NAMES))
    if unknown:
        close = difflib.get_close_matches(unknown[0], _SETTING_NAMES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise TypeError(f"meta_train() got an unexpected keyword argument {unknown[0]!r}{hint}")
    if config is not None and not isinstance(config, run_config.RunConfig):
        raise TypeError(f"config must be a RunConfig, got {type(config).__name__}")
    asked = dict(config.given() if config is not None else {}, **settings)
    given = {name: asked.get(name) for name in run_config.RUN_SETTINGS}
    options = {name: asked.get(name) for name in run_config.RUN_OPTIONS}
    if given["recipe"] is not None:
        for name, value in _recipe_settings_that_apply(given).items():
            if name == "lopt_config":
                given[name] = {**value, **(given[name] or {})}
            elif name in given and given[name] is None:
                given[name] = list(value) if name == "families" else value
            elif name in options and options[name] is None:
                options[name] = value
    return given, options


def _recipe_settings_that_apply(given: dict[str, Any]) -> dict[str, Any]:
    """The recipe's settings, less those that belong to what the caller replaced.

    A recipe's ``lopt_config`` holds its architecture's arguments: with another ``lopt``
    given, they are dropped. A recipe's trainer settings (``trunc_length``, ``std``) are
    dropped where the trainer given does not take them (``--trainer full_grad`` on a PES
    recipe has no truncation).
    """
    from learnopt.run import trainers

    recipe = recipes.get_recipe(given["recipe"]).settings
    out = dict(recipe)
    if given["lopt"] is not None and given["lopt"] != recipe.get("lopt"):
        out.pop("lopt_config", None)
    if given["trainer"] is not None and given["trainer"] in trainers.SPECS:
        taken = set(trainers.SPECS[given["trainer"]].takes)
        specific = {n for spec in trainers.SPECS.values() for n in spec.takes}
        for name in specific - taken - {"total_length", "num_tasks"}:
            out.pop(name, None)
    return out


def _start_session(
    given, options, saved, learner, theta_opt, mesh, run_folder, resume, overwrite
) -> run_session.Session:
    """Resolves the settings, builds the learner, checks the data, prepares the folder."""
    settings, options, custom = run_settings.resolve(given, options, saved, learner, theta_opt)
    if learner is None:
        if settings["families"]:
            task_obj = [
                build.build_task(f, options["data_dir"])
                for f in build.expand_families(settings["families"])
            ]
        else:
            task = given["task"] if given["task"] is not None else settings["task"]
            task_obj = build.build_task(task, options["data_dir"])
        lopt = given["lopt"] if given["lopt"] is not None else settings["lopt"]
        lopt_obj = build.build_lopt(lopt, settings["lopt_config"])
        for name, obj in (("task", task_obj), ("lopt", lopt_obj)):
            if name in custom:
                settings[name] = run_settings.name_of(obj)
        learner = build.build_learner(
            task=task_obj,
            lopt=lopt_obj,
            theta_opt=theta_opt,
            mesh=mesh,
            settings=run_config.RunConfig(**settings, **options),
        )
        if theta_opt is not None:
            settings["outer_lr"] = run_settings.name_of(theta_opt)
    else:
        estimators = learner.gradient_estimators
        settings["task"] = ",".join(e.task_name() for e in estimators)
        settings["lopt"] = run_settings.name_of(learner.lopt)
        settings["trainer"] = ",".join(e.name for e in estimators)
    distributed.check_everywhere(
        run_session.check_data, learner
    )  # every process loads its own data
    if run_folder is not None:

        def prepare() -> None:
            run_folder.lock()  # creates the folder (a new run) and keeps others out
            if overwrite and run_folder.holds_run():
                run_folder.remove_run()
            _validate.writable_dir("out_dir", run_folder.path)
            run_folder.clean_temporaries()

        distributed.run_on_primary(prepare, errors=(folder.RunExistsError, folder.RunLockedError))
    return run_session.Session(learner, settings, options, custom, run_folder, resume)
