"""One session of a meta-training run: start it (fresh, or from its latest checkpoint),
loop over meta-steps, finish it.

Each meta-step is one compiled ``learner.update``; metrics are fetched and written every
``log_every`` steps and a checkpoint every ``checkpoint_every``; the end writes the final
checkpoint, the plots and the summary. In a multi-process run every process runs this
session in lockstep; process 0 alone writes the output folder, shows progress and judges
health (it has the whole history), and every stop decision is agreed at a flush.
"""

from __future__ import annotations

import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

from learnopt import checkpoints, distributed, plots
from learnopt.learned_optimizers import theta_files
from learnopt.outer_trainers import worker
from learnopt.run import folder, metrics, processes
from learnopt.run import settings as run_settings
from learnopt.run.health import Health, Signals
from learnopt.run.results import DataUnavailableError, MetaTrainResult, MetaTrainWarning, StepInfo
from learnopt.tasks.datasets import base as datasets_base

__all__ = ["Session", "StepKeys", "check_data"]


class StepKeys:
    """The PRNG key of meta-step ``i``: ``split(fold_in(key, i // BLOCK), BLOCK)[i % BLOCK]``.

    A pure function of the key and the step (so a resumed run draws the same keys), split
    in blocks on the device and indexed on the host; memory bounded for any run length.

    Args:
      key: the run's loop key.
    """

    BLOCK = 4096

    def __init__(self, key: Any):
        self._key = key
        self._block = -1
        self._keys: Any = None

    def __getitem__(self, i: int) -> Any:
        block, offset = divmod(int(i), self.BLOCK)
        if block != self._block:
            folded = jax.random.fold_in(self._key, block)
            self._keys = np.asarray(jax.random.split(folded, self.BLOCK))
            self._block = block
        return self._keys[offset]


class Session:
    """One session of a run: :meth:`start` (fresh or from a checkpoint), :meth:`loop`,
    :meth:`finish`.

    Args:
      learner: the learner.
      settings: the resolved settings (:func:`learnopt.run.settings.resolve`).
      options: the resolved options.
      custom: the settings given as objects.
      run_folder: the output folder (process 0), or None.
      resume: whether to continue from the folder's latest checkpoint.
    """

    def __init__(self, learner, settings, options, custom, run_folder, resume):
        self.learner = learner
        self.settings = settings
        self.options = options
        self.custom = custom
        self.folder: folder.RunFolder | None = run_folder
        self.out: Path | None = run_folder.path if run_folder is not None else None
        self.resume = resume
        self.callbacks: list[Callable[[StepInfo], Any]] = []
        self.progress = True
        self.num_steps = options["steps"]
        self.desc = f"{run_settings.name_of(learner.lopt)} on " + ", ".join(
            e.task_name() for e in learner.gradient_estimators
        )
        self.t_start = time.perf_counter()
        self.status, self.message, self.signal = "completed", "", None
        self.ckpt: Any = None
        self.last_ckpt: Path | None = None
        self.metrics_file: metrics.MetricsFile | None = None
        self.history: dict[str, list] | None = None
        self.health = Health(options["health_window"])
        self.pending: list[dict] = []
        self._due: list[Callable[[int], Any]] = []  # callbacks' due(step), set by loop()
        self.step = 0
        self.theta_saved_at: int | None = None  # the final theta saved without a checkpoint
        self.multi = distributed.process_count() > 1
        self.primary = distributed.is_primary()
        if not self.primary:
            self.health = Health(0, never_finite_after=0)

    # ------------------------------------------------------------------------- start
    def start(self) -> None:
        """Initializes the state, restores the latest checkpoint when resuming, opens the
        metrics file and writes config.json."""
        learner, out = self.learner, self.out
        k_init, k_loop = jax.random.split(jax.random.PRNGKey(self.settings["seed"]))
        self.step_keys = StepKeys(k_loop)
        try:
            self.state = learner.init(k_init)  # prepares and loads the data on first use
        except Exception as e:
            _raise_data_error(learner, e, self.options["data_dir"])
            raise
        if out is not None:
            self.ckpt = checkpoints.RunCheckpointer(
                self.folder.checkpoint_dir, keep=self.options["keep_checkpoints"]
            )
            latest = distributed.run_on_primary(self.ckpt.latest_step) if self.resume else None
            if latest is not None:
                self._resume_from(latest)
            _, not_resumable = learner.get_data_state()
            if not_resumable:
                warnings.warn(
                    "a resumed run will not draw the same batches: these data iterators cannot "
                    f"report their position (no get_state/set_state): {', '.join(not_resumable)}",
                    MetaTrainWarning,
                    stacklevel=4,
                )
        estimators = getattr(learner, "gradient_estimators", ())
        prefixes = [worker.metric_prefix(estimators, i) for i in range(len(estimators))]
        self.family_labels = {p: e.task_name() for p, e in zip(prefixes, estimators, strict=True)}
        self.columns = [
            *metrics.BASE_COLUMNS,
            *metrics.family_columns(prefixes),
            *metrics.theta_columns(learner.get_theta(self.state)),
        ]
        self.wanted = [c for c in self.columns if c != "step"]
        if out is None or not self.primary:
            self.history = {c: [] for c in self.columns}
            return
        self._reserve_theta_space()
        self.folder.write_config(self._config_record())
        self.metrics_file = metrics.MetricsFile(self.folder.metrics_path, self.columns)
        index = {c: self.columns.index(c) for c in ("skipped", "update_norm", "meta_loss")}
        for row in self.metrics_file.open(self.step):
            self.health.add(
                int(row[0]),
                row[index["skipped"]] == "1",
                float(row[index["update_norm"]] or 0.0),
                float(row[index["meta_loss"]] or "nan"),
            )
        if self.health.steps != self.step:
            warnings.warn(
                f"{folder.METRICS_FILE} holds {self.health.steps} rows, the checkpoint is at "
                f"step {self.step}: the missing rows are lost",
                MetaTrainWarning,
                stacklevel=4,
            )
            self.health.steps = self.step

    def _resume_from(self, latest: int) -> None:
        if latest > self.num_steps:
            raise ValueError(
                f"steps must be >= the step of the run's latest checkpoint ({latest}), "
                f"got {self.num_steps}"
            )
        self.state, meta = processes.restore(self.ckpt, self.state, latest, self.multi)
        try:
            self.learner.set_data_state(meta.get("data", []))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise checkpoints.CheckpointError(
                f"checkpoint {self.ckpt.path(latest)} does not match this run's data: {e}"
            ) from None
        self.step, self.last_ckpt = latest, self.ckpt.path(latest)

    def _config_record(self) -> dict[str, Any]:
        mesh = getattr(self.learner, "mesh", None)
        record = dict(self.settings, **self.options)
        record.update(
            custom=sorted(self.custom),
            out=str(self.out),
            learnopt_version=_version(),
            jax_version=jax.__version__,
            backend=jax.default_backend(),
            processes=jax.process_count(),
            devices=1 if mesh is None else int(mesh.size),
        )
        return record

    def _reserve_theta_space(self) -> None:
        """Keeps room for two copies of the final theta file (see RunFolder.reserve)."""
        theta = jax.device_get(self.learner.get_theta(self.state))
        nbytes = sum(int(np.asarray(x).nbytes) for x in jax.tree_util.tree_leaves(theta))
        try:
            self.folder.reserve(2 * (nbytes + (64 << 10)))
        except OSError as e:
            raise ValueError(
                f"out_dir: {self.out} has no room for the run's theta file "
                f"({checkpoints._one_line(e)})"
            ) from None

    # -------------------------------------------------------------------------- loop
    def begin(self) -> None:
        """Prints the run's header, opens the progress bar and, for a new run, calls the
        callbacks that ask to see the initial theta (``at_start``)."""
        # tqdm.auto only for a visible bar: in Jupyter without ipywidgets importing it warns.
        if self.progress:
            from tqdm.auto import tqdm
        else:
            from tqdm import tqdm

        if self.progress:
            where = f", writing {self.out}" if self.out else ""
            print(
                f"learnopt meta-train: {self.desc} ({self.settings['trainer']}), steps "
                f"{self.step} -> {self.num_steps}{where}",
                flush=True,
            )
        self.bar = tqdm(
            total=self.num_steps,
            initial=self.step,
            desc="meta-train",
            unit="step",
            disable=not self.progress,
            file=sys.stderr,
            dynamic_ncols=True,
            mininterval=0.5,
        )
        self.bar.set_postfix_str("compiling...")
        if self.step == 0:  # a new run: callbacks that ask for it see the initial theta
            info = StepInfo(0, self.num_steps, self.state, self.learner, [], self.out)
            starting = [cb for cb in self.callbacks if getattr(cb, "at_start", False)]
            if starting:
                self.bar.set_postfix_str("evaluating the initial theta...")
            for cb in starting:
                cb(info)
            self.bar.set_postfix_str("compiling...")
        # Callbacks that ask for a step (PeriodicEval.due) get a flush there.
        self._due = [cb.due for cb in self.callbacks if callable(getattr(cb, "due", None))]

    def loop(self, handle_signals: bool) -> None:
        """Runs meta-steps until ``steps``, a stop decision, a signal or a failed write
        (after :meth:`begin`).

        Args:
          handle_signals: turn SIGINT/SIGTERM into "checkpoint and stop".
        """
        with Signals(handle_signals) as signals:
            try:
                while self.step < self.num_steps and self.status == "completed":
                    if not self._one_step(signals):
                        break
            except KeyboardInterrupt:
                # A second Ctrl-C: `state` and `pending` both end at the last finished step.
                self.status, self.signal = "interrupted", "SIGINT"
                self.message = (
                    f"interrupted after step {self.step} of {self.num_steps}; the last "
                    "checkpoint is kept, this step was not checkpointed"
                )
                try:
                    self._flush(agree=False)
                except OSError:
                    pass
            finally:
                self.bar.close()

    def _one_step(self, signals: Signals) -> bool:
        """One meta-step and what is due after it; False when a write failed."""
        self.state, _, step_metrics = self.learner.update(self.state, self.step_keys[self.step])
        self.step += 1
        self.pending.append({k: step_metrics[k] for k in self.wanted if k in step_metrics})
        stop = False
        # Several processes act on a signal at the next flush, all at one step.
        flush = (
            self.step % self.options["log_every"] == 0
            or self.step == self.num_steps
            or (signals.received and not self.multi)
            or any(due(self.step) for due in self._due)
        )
        if flush:
            if not self._write(self._flush, folder.METRICS_FILE):
                return False
            reason = self.health.stop_reason()
            if reason:
                self.status, self.message = reason
                stop = True
        if signals.received and (flush or not self.multi):
            self.signal = signals.received
            self.status = "interrupted"
            self.message = (
                f"interrupted by {self.signal} after step {self.step} of {self.num_steps}"
            )
            stop = True
        if flush and self.multi:
            stop = self._agree() or stop
        every = self.options["checkpoint_every"]
        periodic = every and self.step % every == 0 and self.step < self.num_steps
        if self.ckpt is not None and (stop or periodic):
            if not self._write(self._checkpoint, "a checkpoint"):
                return False
        return True

    def _write(self, fn: Callable[[], None], what: str) -> bool:
        """Runs a write; on failure records status "failed" with a one-line message."""
        try:
            fn()
            return True
        except OSError as e:
            if isinstance(e, _CallbackWriteError):  # not the run's own file: say whose
                what, e = e.what, e.error
            if self.last_ckpt is not None:
                where = f"the last good checkpoint is {self.last_ckpt}"
            else:
                where = "no checkpoint was written yet"
            self.status = "failed"
            self.message = (
                f"cannot write {what} at step {self.step} in {self.out} "
                f"({checkpoints._one_line(e)}); {where}"
            )
            return False

    def _flush(self, agree: bool = True) -> None:
        """Fetches the pending metrics (one transfer), writes them, checks health.

        In a multi-process run a failed write on process 0 raises on every process
        (``agree``), so that all of them stop at the same step.
        """
        if not self.pending:
            return
        rows = jax.device_get(self.pending)
        self.pending.clear()
        first = self.step - len(rows) + 1
        table, infos = [], []
        for j, row in enumerate(rows):
            values = {"step": first + j}
            values.update({c: metrics.scalar(row.get(c)) for c in self.wanted})
            table.append([metrics.cell(values[c]) for c in self.columns])
            infos.append(values)
            loss = values["meta_loss"]
            self.health.add(
                first + j,
                bool(values["skipped"]),
                float(values["update_norm"] or 0),
                float("nan") if loss is None else float(loss),
            )
        if self.history is not None:
            for values in infos:
                for c in self.columns:
                    self.history[c].append(values[c])

        def write() -> None:
            if self.metrics_file is not None:
                self.metrics_file.write(table)

        if agree and self.multi:
            distributed.run_on_primary(write, errors=(OSError,))
        else:
            write()
        self._show(infos[-1], len(rows))
        text = self.health.warning()
        if text:
            warnings.warn(text, MetaTrainWarning, stacklevel=5)
        info = StepInfo(self.step, self.num_steps, self.state, self.learner, infos, self.out)
        for cb in self.callbacks:
            try:
                cb(info)
            except OSError as e:
                what = f"the output of the {type(cb).__name__} callback"
                raise _CallbackWriteError(what, e) from e

    def _show(self, last: dict[str, Any], count: int) -> None:
        postfix = f"meta_loss={float(last['meta_loss']):.4g}"
        if last.get("learning_rate") is not None:
            postfix += f" lr={float(last['learning_rate']):.3g}"
        if last["num_nonfinite"]:
            postfix += f" skipped={last['num_nonfinite']}"
        self.bar.set_postfix_str(postfix, refresh=False)
        self.bar.update(count)

    def _checkpoint(self, final: bool = False) -> None:
        """Writes a checkpoint and theta.msgpack (process 0; the state gathered first).

        Args:
          final: the run's last checkpoint: if it cannot be written, theta.msgpack still
            gets the final theta (in the space reserved at the start).
        """
        # Several processes: the state is gathered here (a collective) and written by
        # process 0; a failed write raises on every process.
        state = distributed.to_host(self.state) if self.multi else self.state
        data, _ = self.learner.get_data_state()
        meta = {
            "data": data,
            "num_steps": self.num_steps,
            "skipped_total": self.health.skipped_total,
        }

        def write() -> str:
            self.metrics_file.sync()
            try:
                path = self.ckpt.save(self.step, state, meta)
            except OSError:
                if final:
                    self._rescue_theta(state)
                raise
            self._save_theta(state)
            return str(path)

        errors = (checkpoints.CheckpointWriteError, OSError)
        self.last_ckpt = Path(distributed.run_on_primary(write, errors=errors))

    def _rescue_theta(self, state: Any) -> None:
        """The final checkpoint failed: keep the trained theta at least."""
        try:
            self._save_theta(state)
        except OSError:
            return
        self.theta_saved_at = self.step

    def _save_theta(self, state: Any) -> None:
        theta = self.learner.get_theta(state)
        metadata = self._theta_metadata(theta)
        self.folder.write_final_theta(
            lambda: checkpoints.save_theta(self.folder.theta_path, theta, metadata=metadata)
        )

    def _theta_metadata(self, theta: Any) -> dict[str, Any] | None:
        """What theta.msgpack says about itself (learned_optimizers.theta_files)."""
        settings = {k: v for k, v in self.settings.items() if k != "lopt_config"}
        meta_training = dict(
            settings,
            estimators=[e.task_name() for e in self.learner.gradient_estimators],
            step=self.step,
            steps=self.num_steps,
            out_dir=str(self.out),
        )
        try:
            return theta_files.make_metadata(self.learner.lopt, theta, meta_training=meta_training)
        except (TypeError, ValueError):  # a custom learned optimizer we cannot describe
            return None

    def _agree(self) -> bool:
        """Several processes: all take process 0's verdict (health, failed writes) or, if
        it has none, a signal received by any process. Returns whether the run stops."""
        verdict = processes.agree(self.status, self.signal, self.message, self.step, self.num_steps)
        if verdict is None:
            return False
        self.status, self.signal, self.message = verdict
        return True

    # ------------------------------------------------------------------------ finish
    def finish(self, write_plots: bool) -> MetaTrainResult:
        """Writes the final checkpoint, the plots and the summary; releases the folder.

        Args:
          write_plots: write meta_loss.png and learning_rate.png.

        Returns:
          The run's :class:`MetaTrainResult`.
        """
        try:
            self._final_checkpoint()
        finally:
            if self.metrics_file is not None:
                self.metrics_file.close()
            if self.ckpt is not None:
                self.ckpt.close()
            if self.folder is not None and self.primary:
                self.folder.release_reserve()
                self.folder.unlock()
        if self.status == "completed" and self.primary:
            final = self.health.final()
            if final:
                self.status, self.message = final
        if self.multi:
            self._agree()
        cols = self._columns()
        out = self.out
        writes = out is not None and self.primary
        if writes and write_plots and self.status != "failed" and len(cols.get("step", ())):
            try:
                plots.meta_train_plots(out, cols)
                prefixes = list(self.family_labels)
                if len(prefixes) > 1:
                    steps = np.asarray(cols["step"])
                    metrics.families_plot(out, steps, cols, prefixes, self.family_labels)
            except OSError as e:
                self.message = self.message or f"could not write the plots ({e})"
        elapsed = time.perf_counter() - self.t_start
        summary = metrics.summary(f"{self.desc} ({self.settings['trainer']})", cols, elapsed, out)
        if self.progress:
            print(summary, flush=True)
        if self.message and self.status != "completed":
            print(f"learnopt meta-train: {self.message}", file=sys.stderr, flush=True)
        return MetaTrainResult(
            out_dir=out,
            status=self.status,
            message=self.message,
            step=self.step,
            num_steps=self.num_steps,
            theta=jax.device_get(self.learner.get_theta(self.state)),
            state=self.state,
            learner=self.learner,
            columns=cols,
            summary=summary,
            checkpoint=self.last_ckpt,
            signal=self.signal,
        )

    def _final_checkpoint(self) -> None:
        if self.status not in ("completed", "diverged", "stalled") or self.ckpt is None:
            return
        if self.last_ckpt == self.ckpt.path(self.step):
            return
        if self._write(self._flush, folder.METRICS_FILE) and not self._write(
            lambda: self._checkpoint(final=True), "the final checkpoint"
        ):
            if self.theta_saved_at is not None:
                self.message += (
                    f"; the final theta (step {self.step}) is saved in {self.folder.theta_path}"
                )

    def _columns(self) -> dict[str, Any]:
        if self.history is None:
            try:
                return metrics.read_metrics(self.out / folder.METRICS_FILE)
            except (OSError, ValueError, StopIteration):
                return {}
        return {
            c: np.asarray([np.nan if v is None else v for v in vals], np.float64)
            for c, vals in self.history.items()
        }


class _CallbackWriteError(OSError):
    """A callback's write failed: the run's message names the callback, not metrics.csv.

    Args:
      what: what could not be written.
      error: the callback's error.
    """

    def __init__(self, what: str, error: OSError):
        super().__init__(error.errno, error.strerror)
        self.what, self.error = what, error


def _version() -> str:
    from learnopt import __version__

    return __version__


def check_data(learner: Any) -> None:
    """Fails before any compilation if a task's data cannot be had.

    Args:
      learner: the gradient learner; every dataset of its estimators' tasks that has
        ``check_available`` is checked.

    Raises:
      DataUnavailableError: a dataset is not available (the message names the tasks
        and says how to set the data dir).
    """
    names = ", ".join(e.task_name() for e in learner.gradient_estimators)
    for ds in learner.datasets():
        if hasattr(ds, "check_available"):
            try:
                ds.check_available()
            except datasets_base.DatasetNotFoundError as e:
                raise DataUnavailableError(
                    f"task {names} needs data that is not available (data_dir / --data-dir "
                    f"sets the data dir).\n{e}"
                ) from None


def _raise_data_error(learner: Any, error: Exception, data_dir: Any) -> None:
    """Re-raises a data-loading failure of ``learner.init`` as DataUnavailableError."""
    if isinstance(error, datasets_base.DatasetNotFoundError | datasets_base.ChecksumMismatchError):
        raise DataUnavailableError(str(error)) from None
    unloaded = [ds for ds in learner.datasets() if not getattr(ds, "loaded", True)]
    if unloaded and isinstance(error, OSError | ValueError | RuntimeError | KeyError):
        data_dir = datasets_base.default_data_dir(data_dir)
        raise DataUnavailableError(
            f"the task's data could not be loaded from the data dir {data_dir} (corrupted or "
            f"unreadable? delete the dataset's folder there to prepare it again): "
            f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        ) from error
