"""Nothing silent at the edges of the command line (issue 30): output paths checked before
any work, two kinds of run never mixed in one folder, a resumed run's ``theta_best`` verified,
``--eval-every`` evaluating when asked, and ``learnopt evaluate`` ending cleanly on SIGINT and
SIGTERM (subprocesses) with what it kept.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from learnopt import cli, train
from learnopt.evaluation import command, periodic, report
from learnopt.tasks.datasets import base as datasets_base

QUAD = ["meta-train", "--task", "QuadraticTask", "--quiet", "--no-plots"]
# A small evaluation on the data-free quadratic: a sweep of SGD over two learning rates.
EVAL = ["evaluate", "--optimizer", "Adam", "--lr", "0.05", "--tasks", "QuadraticTask"]
EVAL += ["--baselines", "SGD", "--lrs", "0.01,0.3", "--steps", "6", "--seeds", "2", "--quiet"]
PERIODIC = ["--eval-every", "2", "--eval-tasks", "QuadraticTask", "--eval-steps", "5"]


@pytest.fixture(autouse=True)
def data_env(tmp_path_factory, monkeypatch):
    """Data in a tmp folder (never the home folder); an empty manual folder."""
    root = tmp_path_factory.mktemp("edges_data")
    monkeypatch.setenv(datasets_base.ENV_DATA_DIR, str(root / "data"))
    monkeypatch.setenv(datasets_base.ENV_MANUAL_DIR, str(root / "manual"))


def _snapshot(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


# ------------------------------------------------------------- output paths, before work


@pytest.fixture
def nothing_runs(monkeypatch):
    """Fails the test if meta-training or an evaluation's training starts."""

    def never(*args, **kwargs):
        raise AssertionError("work started before the output paths were checked")

    monkeypatch.setattr(train, "meta_train", never)
    monkeypatch.setattr(command, "evaluate_suite", never)
    monkeypatch.setattr(command, "_candidate", never)


@pytest.mark.parametrize(
    "argv, flag, where",
    [
        (QUAD, "--tensorboard", "file"),
        (QUAD, "--tensorboard", "under a file"),
        (QUAD, "--out", "under a file"),
        (QUAD, "--tensorboard", "unwritable"),
        (QUAD, "--out", "unwritable"),
        (EVAL, "--tensorboard", "file"),
        (EVAL, "--out", "file"),
        (EVAL, "--out", "under a file"),
        (EVAL, "--out", "unwritable"),
        (EVAL, "--baseline-cache", "file"),
        (EVAL, "--baseline-cache", "unwritable"),
    ],
)
def test_an_output_path_that_cannot_be_a_folder_is_a_usage_error_before_any_work(
    argv, flag, where, tmp_path, monkeypatch, capsys, nothing_runs
):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    path = {
        "file": a_file,
        "under a file": a_file / "sub",
        "unwritable": tmp_path / "read_only" / "sub",
    }[where]
    if where == "unwritable":  # root writes anywhere: the folder refuses as a read-only one
        (tmp_path / "read_only").mkdir()
        mkstemp = tempfile.mkstemp

        def refusing(*args, **kwargs):
            if Path(kwargs.get("dir", "")) == tmp_path / "read_only":
                raise PermissionError(errno.EACCES, "Permission denied")
            return mkstemp(*args, **kwargs)

        monkeypatch.setattr(tempfile, "mkstemp", refusing)
    given = [flag, str(path)]
    if flag != "--out":
        given += ["--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as exc:
        cli.main([*argv, *given])
    assert exc.value.code == 2
    first = capsys.readouterr().err.splitlines()[0]
    assert first.startswith(f"learnopt {argv[0]}: error: {flag}: {path} ")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["a_file"] + ["read_only"] * (where == "unwritable")
    )  # nothing was created


# --------------------------------------------------- one kind of run per folder


@pytest.fixture(scope="module")
def meta_train_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("kinds") / "meta"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(datasets_base.ENV_DATA_DIR, str(out.parent / "data"))
        assert cli.main([*QUAD, "--steps", "2", "--out", str(out)]) == 0
    return out


def test_evaluate_never_writes_into_a_meta_training_run_even_with_overwrite(meta_train_run, capsys):
    before = _snapshot(meta_train_run)
    for extra in ([], ["--overwrite"]):
        with pytest.raises(SystemExit) as exc:
            cli.main([*EVAL, "--out", str(meta_train_run), *extra])
        assert exc.value.code == 2
        err = capsys.readouterr().err.splitlines()[0]
        assert f"--out: {meta_train_run} holds a meta-training run (config.json" in err
        assert "not even with --overwrite" in err
    assert _snapshot(meta_train_run) == before


def test_meta_train_never_writes_into_an_evaluation_and_overwrite_clears_an_evaluation(
    tmp_path, capsys
):
    out = tmp_path / "eval"
    argv = [a if a != "QuadraticTask" else "QuadraticTask,SumQuadraticTask" for a in EVAL]
    assert cli.main([*argv, "--out", str(out)]) == 0
    before = _snapshot(out)
    for extra, message in (
        (["--out", str(out)], f"--out: {out} holds an evaluation (learnopt evaluate: config.json"),
        (["--out", str(out), "--overwrite"], "not even with --overwrite"),
        (["--resume", str(out)], f"--resume: {out} holds an evaluation"),
    ):
        with pytest.raises(SystemExit) as exc:
            cli.main([*QUAD, "--steps", "2", *extra])
        assert exc.value.code == 2
        assert message in capsys.readouterr().err
    assert _snapshot(out) == before

    # --overwrite replaces the earlier evaluation as a whole: no stale task stays.
    assert cli.main([*EVAL, "--out", str(out), "--overwrite"]) == 0
    assert not (out / "curves_SumQuadraticTask.png").exists()
    assert json.loads((out / "config.json").read_text())["tasks"] == ["QuadraticTask"]


# ------------------------------------------- --eval-every and a resumed theta_best


@pytest.fixture(scope="module")
def periodic_run(tmp_path_factory):
    """4 meta-steps evaluated every 2 (metrics flushed every 50 steps by default)."""
    out = tmp_path_factory.mktemp("periodic") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(datasets_base.ENV_DATA_DIR, str(out.parent / "data"))
        assert cli.main([*QUAD, *PERIODIC, "--steps", "4", "--out", str(out)]) == 0
    return out


def test_eval_every_evaluates_at_every_multiple_whatever_log_every_is(periodic_run):
    rows = periodic.read_eval_csv(periodic_run / "eval.csv")
    assert [r["step"] for r in rows] == [2, 4]


def test_overwrite_removes_the_periodic_evaluation_of_the_run_it_replaces(periodic_run, tmp_path):
    import shutil

    out = tmp_path / "run"
    shutil.copytree(periodic_run, out)
    (out / "notes.txt").write_text("mine")
    assert cli.main([*QUAD, "--steps", "2", "--out", str(out), "--overwrite"]) == 0
    # No eval.csv to append to, no theta_best of the other run to be compared with.
    assert sorted(p.name for p in out.iterdir()) == [
        "checkpoints",
        "config.json",
        "metrics.csv",
        "notes.txt",
        "theta.msgpack",
    ]


def test_a_resume_with_an_unreadable_theta_best_warns_and_resets_the_best(
    periodic_run, tmp_path, monkeypatch, capsys
):
    import shutil

    from learnopt.learned_optimizers import theta_files
    from learnopt.run import session

    out = tmp_path / "run"
    shutil.copytree(periodic_run, out)
    best = out / periodic.BEST_THETA_FILE
    best.write_bytes(best.read_bytes()[:40])  # truncated
    warned_before = []
    loop = session.Session.loop

    def recording_loop(self, *args, **kwargs):
        warned_before.append(sum(w.category is periodic.PeriodicEvalWarning for w in record))
        return loop(self, *args, **kwargs)

    monkeypatch.setattr(session.Session, "loop", recording_loop)
    argv = ["meta-train", "--resume", str(out), "--steps", "6", "--no-plots"]
    with pytest.warns(periodic.PeriodicEvalWarning) as record:
        assert cli.main(argv) == 0
    [warning] = [str(w.message) for w in record if w.category is periodic.PeriodicEvalWarning]
    assert warning.startswith(f"{best} cannot be read (")
    assert "the best is reset; the next periodic evaluation writes theta_best.msgpack" in warning
    assert warned_before == [1]  # said at the start of the resumed run
    printed = capsys.readouterr().out
    assert "learnopt eval at step 6: " in printed and "(best so far)" in printed
    assert "at step 2)" not in printed and "at step 4)" not in printed
    assert theta_files.load(best).metadata["meta_training"]["step"] == 6  # written again


# ------------------------------------------------- writes that fail, and by whom


def test_a_callback_that_cannot_write_is_named_not_metrics_csv(tmp_path):
    class Board:
        def __call__(self, info):
            raise FileExistsError(errno.EEXIST, "File exists", "tb")

    result = train.meta_train(
        task="QuadraticTask", steps=2, log_every=1, out_dir=tmp_path / "r",
        callbacks=[Board()], progress=False, plots=False,
    )  # fmt: skip
    assert result.status == "failed"
    assert result.message.startswith("cannot write the output of the Board callback at step 1")
    assert "metrics.csv" not in result.message


def test_evaluate_results_that_cannot_be_written_are_one_line_exit_1(tmp_path, monkeypatch, capsys):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "o/summary.csv"))

    monkeypatch.setattr(report, "write_results", full)
    with pytest.raises(SystemExit) as exc:
        cli.main([*EVAL, "--out", str(tmp_path / "o")])
    assert exc.value.code == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        f"learnopt evaluate: error: cannot write {tmp_path / 'o/summary.csv'} (OSError: No "
        "space left on device); nothing was written"
    )


# ------------------------------------------------------------------------- signals


def test_a_signal_while_a_task_is_written_waits_for_the_write(tmp_path, monkeypatch, capsys):
    write = report.write_results

    def interrupted_write(*args, **kwargs):
        written = write(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C between summary.md and config.json
        time.sleep(0.05)
        return written

    monkeypatch.setattr(report, "write_results", interrupted_write)
    out = tmp_path / "o"
    argv = [a if a != "QuadraticTask" else "QuadraticTask,SumQuadraticTask" for a in EVAL]
    assert cli.main([*argv, "--out", str(out)]) == 130
    assert json.loads((out / "config.json").read_text())["tasks_done"] == 1
    assert (out / "curves_QuadraticTask.png").is_file()
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (
        f"learnopt evaluate: stopped by SIGINT during task 2 of 2; kept the 1 finished task "
        f"in {out} (summary.md says 'Partial: 1 of 2 tasks done')"
    )


@pytest.fixture(scope="module")
def digits_data(tmp_path_factory) -> str:
    """One data folder for the subprocesses: the digits are prepared once."""
    return str(tmp_path_factory.mktemp("digits_data"))


def _stop_evaluate(out: Path, sig: int, delay: float, data: str) -> tuple[int, str]:
    """Runs ``learnopt evaluate`` in a subprocess and sends ``sig`` ``delay`` seconds after
    its second task started (it loads its data and compiles for about 2 s here, then
    trains for seconds: 3000 steps); returns (status, stderr)."""
    cmd = [sys.executable, "-m", "learnopt", "evaluate", "--optimizer", "Adam", "--lr", "0.01"]
    cmd += ["--tasks", "QuadraticTask,ImageMLP_Digits8_Relu32", "--baselines", "SGD"]
    cmd += ["--lrs", "0.01,0.1", "--steps", "3000", "--seeds", "1", "--no-baseline-cache"]
    cmd += ["--out", str(out)]
    env = {**os.environ, datasets_base.ENV_DATA_DIR: data}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    err = bytearray()
    started = threading.Event()

    def read() -> None:
        while chunk := os.read(proc.stderr.fileno(), 4096):
            err.extend(chunk)
            if b"ImageMLP_Digits8_Relu32" in err:  # the progress bar names the task
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert started.wait(120), err.decode(errors="replace")[-3000:]
    time.sleep(delay)
    proc.send_signal(sig)
    code = proc.wait(60)
    reader.join(10)
    return code, err.decode(errors="replace")


def _kept_the_first_task(out: Path, err: str, name: str) -> None:
    said = [line for line in err.splitlines() if line.startswith("learnopt evaluate: ")]
    assert said[-1:] == [
        f"learnopt evaluate: stopped by {name} during task 2 of 2; kept the 1 finished task "
        f"in {out} (summary.md says 'Partial: 1 of 2 tasks done')"
    ], err[-2000:]
    assert json.loads((out / "config.json").read_text())["tasks_done"] == 1
    assert (out / "summary.md").read_text().startswith("Partial: 1 of 2 tasks done.")
    assert (out / "curves_QuadraticTask.png").is_file()


def test_sigint_during_evaluate_ends_cleanly_with_130_keeping_the_finished_task(
    tmp_path, digits_data
):
    # A Ctrl-C while XLA compiles on its threads (the second task's programs, about
    # 0.5-1.5 s after it starts on this project's loaded 2-core machine) used to crash the
    # interpreter's shutdown (rc -11 in 18 of 25 tries at those moments): five tries.
    for i, delay in enumerate((0.5, 0.75, 1.0, 1.25, 1.5)):
        out = tmp_path / f"o{i}"
        code, err = _stop_evaluate(out, signal.SIGINT, delay, digits_data)
        assert code == 130, (delay, code, err[-2000:])
        _kept_the_first_task(out, err, "SIGINT")


def test_sigterm_during_evaluate_ends_with_143_and_says_what_it_kept(tmp_path, digits_data):
    out = tmp_path / "o"
    code, err = _stop_evaluate(out, signal.SIGTERM, 1.0, digits_data)
    assert code == 143, (code, err[-2000:])
    _kept_the_first_task(out, err, "SIGTERM")


# ------------------------------------------------- signals before the first meta-step


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("where", ["start", "begin"])
def test_a_signal_before_the_first_meta_step_ends_the_run_cleanly_and_frees_the_folder(
    tmp_path, monkeypatch, capsys, sig, where
):
    # SIGTERM while the run was being built (data, compile) or the initial theta evaluated
    # used to kill the process with no word (rc -15).
    from learnopt.run import session as run_session

    original = getattr(run_session.Session, where)

    def interrupted(self, *args, **kwargs):
        original(self, *args, **kwargs)
        os.kill(os.getpid(), sig)
        time.sleep(1.0)  # the handler raises here
        raise AssertionError("the signal did not stop the set-up")

    monkeypatch.setattr(run_session.Session, where, interrupted)
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    out = tmp_path / "run"
    code = cli.main([*QUAD, "--steps", "4", "--out", str(out)])
    name = signal.Signals(sig).name
    assert code == 128 + int(sig)
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (
        f"learnopt meta-train: interrupted by {name} before the first meta-step of this "
        "call: nothing was trained (checkpoints already in the folder are kept)"
    )
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers
    monkeypatch.undo()  # the folder is free: the run goes on where it was
    assert cli.main(["meta-train", "--resume", str(out), "--steps", "4", "--quiet"]) == 0
    assert (out / "theta.msgpack").is_file()
    assert (out / "metrics.csv").read_text().splitlines()[-1].split(",")[0] == "4"
