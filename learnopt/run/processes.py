"""A run over several processes: what they must agree on, and what process 0 does for all.

Every process calls :func:`learnopt.train.meta_train` with the same arguments and runs the
same loop in lockstep (they meet in the same collectives). Process 0 alone reads and
writes the output folder: it opens it (:func:`open_out_dir`), reads checkpoints
(:func:`restore`, then sends the state to the others) and decides when the run stops
(:func:`agree`). With one process these are plain local calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax

from learnopt import _validate, checkpoints, distributed
from learnopt.run import folder
from learnopt.run.settings import name_of

__all__ = ["check_learner_mesh", "check_same_everywhere", "open_out_dir", "restore", "agree"]

STATUSES = ("completed", "interrupted", "diverged", "stalled", "failed")
SIGNALS = (None, "SIGINT", "SIGTERM")


def check_learner_mesh(learner: Any, mesh: Any) -> None:
    """A learner given as an object brings its own mesh, which must span every process.

    Args:
      learner: the learner given to ``meta_train``.
      mesh: the ``mesh=`` given to ``meta_train`` (must be None with a learner).
    """
    if mesh is not None:
        raise ValueError("learner= brings its own mesh: pass mesh= to its constructor instead")
    if jax.process_count() > 1 and not distributed.spans_processes(getattr(learner, "mesh", None)):
        raise ValueError(
            "learner: in a multi-process run the learner's mesh must span the devices of "
            "every process (mesh=learnopt.distributed.population_mesh()); otherwise each "
            "process would repeat the whole run"
        )


def check_same_everywhere(given, options, resume, overwrite, learner, theta_opt, mesh) -> None:
    """Several processes must all run the same ``meta_train`` (else they would wait for each
    other in different collectives forever).

    Args:
      given, options: the settings and options as given (``data_dir`` may differ per
        host; ``out_dir`` is process 0's and not compared).
      resume, overwrite, learner, theta_opt, mesh: ``meta_train``'s other arguments.
    """

    def describe(value: Any) -> Any:
        if value is None or isinstance(value, str | int | float | bool):
            return value
        if isinstance(value, list | tuple):
            return [describe(v) for v in value]
        if isinstance(value, dict):
            return {k: describe(v) for k, v in value.items()}
        return f"<{name_of(value)}>"

    call = dict(given, **{k: v for k, v in options.items() if k != "data_dir"})
    call.update(resume=resume, overwrite=overwrite, learner=learner, theta_opt=theta_opt)
    call["mesh"] = getattr(mesh, "shape", mesh)
    distributed.check_same(describe(call), "the meta_train arguments")


def open_out_dir(
    out_dir: Any, resume: bool, overwrite: bool
) -> tuple[folder.RunFolder | None, dict[str, Any]]:
    """The run's folder and, when resuming, its config.json (read by process 0, sent to all).

    A folder that exists is locked here, before any work, so that a second run on it is
    refused at once; a new folder is created and locked when the run starts writing.

    Args:
      out_dir: the output folder, or None (write nothing).
      resume: continue the run in it.
      overwrite: replace the run in it.

    Returns:
      ``(RunFolder or None, the resumed run's settings or {})``.
    """
    opened: list[folder.RunFolder] = []

    def prepare() -> dict[str, Any]:
        run_folder, saved = _open(out_dir, resume, overwrite)
        if run_folder is not None:
            opened.append(run_folder)
        return {"out": None if run_folder is None else str(run_folder.path), "saved": saved}

    errors = (folder.RunExistsError, folder.RunLockedError)
    reply = distributed.run_on_primary(prepare, errors=errors)
    if opened:  # process 0: the folder that holds the lock
        return opened[0], reply["saved"]
    out = reply["out"]
    return (None if out is None else folder.RunFolder(Path(out))), reply["saved"]


def _open(out_dir: Any, resume: bool, overwrite: bool) -> tuple[folder.RunFolder | None, dict]:
    """The output folder and, when resuming, its run's config; refuses to replace a run."""
    if out_dir is None:
        return None, {}
    out = _validate._path("out_dir", out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out_dir: {out} exists and is not a directory")
    run_folder = folder.RunFolder(out)
    if resume and not out.is_dir():
        raise ValueError(f"resume: there is no run at {out} (no such folder)")
    run_folder.check_names_free()
    held = folder.evaluation_files(out) if out.is_dir() else []
    if held:
        files = f"{', '.join(held[:4])}{' ...' if len(held) > 4 else ''}"
        if resume:
            raise ValueError(
                f"resume: {out} holds an evaluation (learnopt evaluate: {files}), not a "
                "meta-training run: there is nothing to resume"
            )
        raise ValueError(
            f"out_dir: {out} holds an evaluation (learnopt evaluate: {files}): a "
            "meta-training run never writes into another kind of run's folder, not even "
            "with overwrite=True (--overwrite); choose another folder"
        )
    if out.is_dir():
        run_folder.lock()
    try:
        if resume:
            return run_folder, run_folder.read_config()
        if run_folder.holds_run() and not overwrite:
            raise folder.RunExistsError(
                f"out_dir: {out} already holds a meta-training run; pass resume=True "
                "(--resume) to continue it or overwrite=True (--overwrite) to replace it"
            )
    except BaseException:
        run_folder.unlock()
        raise
    return run_folder, {}


def restore(ckpt: Any, state: Any, step: int, multi: bool) -> tuple[Any, dict[str, Any]]:
    """The state and meta of checkpoint ``step``: read by process 0, sent to the others,
    each process placing only its own shards on its devices.

    Args:
      ckpt: the run's ``checkpoints.RunCheckpointer``.
      state: a state of the right structure and sharding (the freshly initialized one).
      step: the checkpoint's step.
      multi: whether the run has several processes.

    Returns:
      ``(state, meta)``.
    """
    if not multi:
        return ckpt.restore(state, step)
    read = {}

    def read_checkpoint() -> dict[str, Any]:
        read["state"], meta = ckpt.restore(state, step, to_host=True)
        return meta

    meta = distributed.run_on_primary(read_checkpoint, errors=(checkpoints.CheckpointError,))
    host = read.get("state", distributed.host_zeros_like(state))
    host = distributed.broadcast_from_primary(host)
    return distributed.put_like(host, state), meta


def agree(
    status: str, signal: str | None, message: str, step: int, num_steps: int
) -> tuple[str, str | None, str] | None:
    """Several processes: all take process 0's verdict (health, failed writes) or, if it has
    none, a signal received by any process.

    Args:
      status, signal, message: this process's view.
      step, num_steps: where the run is (for the message of a signal elsewhere).

    Returns:
      ``(status, signal, message)`` every process adopts, or None when no process stops.
    """
    table = distributed.all_gather_ints([STATUSES.index(status), SIGNALS.index(signal)])
    stopped = [i for i, row in enumerate(table) if row[0]]
    if not stopped:
        return None
    who = 0 if table[0][0] else stopped[0]
    new_status, new_signal = STATUSES[table[who][0]], SIGNALS[table[who][1]]
    shared = distributed.broadcast_json(message) if who == 0 else None
    if (new_status, new_signal) != (status, signal):
        message = shared or (
            f"interrupted by {new_signal} (received by process {who}) after step {step} "
            f"of {num_steps}"
        )
    return new_status, new_signal, message
