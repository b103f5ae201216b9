"""The run folder: one writer at a time (a live one refuses a second, a killed one never
blocks a resume), names the run writes that are taken by something else, and the space
reserved for the final theta (a full disk at the end keeps the trained theta).

Runs use QuadraticTask (no data, fast to compile); the process that holds a lock in the
lock tests is a plain Python process (no JAX), so they cost milliseconds.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from learnopt import checkpoints, train
from learnopt.checkpoints import durable
from learnopt.run import folder

QUAD = dict(task="QuadraticTask", progress=False, plots=False)

HOLDER = textwrap.dedent(
    """
    import sys, time
    from learnopt.run.folder import RunFolder

    f = RunFolder(sys.argv[1])
    f.lock()
    print("locked", flush=True)
    time.sleep(600)
    """
)


def _hold_lock(path):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "locked"
    return proc


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "quad"
    result = train.meta_train(steps=4, out_dir=out, checkpoint_every=2, **QUAD)
    assert result.ok
    return out


def test_a_second_run_on_a_folder_that_a_live_process_writes_is_refused(finished_run):
    proc = _hold_lock(finished_run)
    try:
        start = time.perf_counter()
        with pytest.raises(train.RunLockedError) as info:
            train.meta_train(out_dir=finished_run, resume=True, steps=6, **QUAD)
        message = str(info.value)
        assert f"process {proc.pid} on " in message
        assert f"{finished_run} is being written by another meta-training run" in message
        assert "\n" not in message
        assert time.perf_counter() - start < 5  # refused at once, before any work
        with pytest.raises(train.RunLockedError, match=f"process {proc.pid}"):
            train.meta_train(out_dir=finished_run, overwrite=True, steps=2, **QUAD)
    finally:
        proc.kill()
        proc.wait()


def test_a_killed_runs_lock_never_blocks_a_resume(finished_run):
    proc = _hold_lock(finished_run)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (finished_run / folder.LOCK_FILE).exists()  # left behind, and harmless
    result = train.meta_train(out_dir=finished_run, resume=True, steps=6, **QUAD)
    assert result.ok and result.step == 6


def test_the_lock_is_released_when_the_run_ends(tmp_path):
    out = tmp_path / "run"
    assert train.meta_train(steps=2, out_dir=out, **QUAD).ok
    holder = folder.RunFolder(out)
    holder.lock()  # would raise if the run had kept it
    holder.unlock()


def test_cli_refuses_a_folder_in_use_with_one_line(finished_run, capsys):
    from learnopt import cli

    proc = _hold_lock(finished_run)
    try:
        with pytest.raises(SystemExit) as info:
            cli.main(["meta-train", "--resume", str(finished_run), "--steps", "8", "--quiet"])
        assert info.value.code == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"process {proc.pid}" in err[0], err
    finally:
        proc.kill()
        proc.wait()


def test_a_directory_where_the_theta_file_goes_is_refused_before_work(tmp_path):
    out = tmp_path / "run"
    (out / "theta.msgpack").mkdir(parents=True)
    assert not train.holds_run(out)  # not mistaken for an earlier run
    with pytest.raises(ValueError, match=r"theta.msgpack is a directory, but the run writes"):
        train.meta_train(steps=2, out_dir=out, **QUAD)
    assert sorted(p.name for p in out.iterdir()) == ["theta.msgpack"]


def test_a_full_disk_at_the_end_keeps_the_trained_theta(tmp_path, monkeypatch):
    # checkpoint_every=0: the only checkpoint is the final one. The disk is full when it is
    # written, and stays full for every other write until the reserved space is freed.
    out = tmp_path / "run"
    reserve = out / folder.RESERVE_FILE
    write_atomic = durable.write_atomic
    save = checkpoints.RunCheckpointer.save

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    refused = []

    def writes_if_space(path, data):
        if reserve.exists() and path.name.startswith("theta"):
            refused.append(path)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return write_atomic(path, data)

    monkeypatch.setattr(checkpoints.RunCheckpointer, "save", full_disk)
    monkeypatch.setattr(durable, "write_atomic", writes_if_space)
    result = train.meta_train(steps=5, checkpoint_every=0, out_dir=out, **QUAD)
    assert result.status == "failed" and result.exit_code == 1
    assert "cannot write the final checkpoint at step 5" in result.message
    assert f"the final theta (step 5) is saved in {out / 'theta.msgpack'}" in result.message
    saved = checkpoints.load_theta(out / "theta.msgpack")
    for name, value in result.theta.items():
        np.testing.assert_array_equal(saved[name], value)
    assert not reserve.exists()  # given back
    assert refused == [out / "theta.msgpack"]  # the first write failed, the retry succeeded
    monkeypatch.setattr(checkpoints.RunCheckpointer, "save", save)


def test_a_folder_without_room_for_the_theta_is_refused_at_the_start(tmp_path, monkeypatch):
    def no_room(self, nbytes):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(folder.RunFolder, "reserve", no_room)
    with pytest.raises(ValueError, match="has no room for the run's theta file"):
        train.meta_train(steps=2, out_dir=tmp_path / "run", **QUAD)
