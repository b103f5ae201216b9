"""Meta-training survives faults: SIGKILL at random moments (also in the middle of a
checkpoint write), a full disk, a file that cannot grow, an unwritable output folder.

The kill test runs meta-training in subprocesses (PES on a quadratic family with noise
data, so inner states, PES accumulators and a host-side data stream are all in the
checkpoint), kills it with SIGKILL several times, resumes each time, and ends with the
theta and metrics.csv of an uninterrupted run, byte for byte.
"""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import PES_QUADRATIC

from learnopt import checkpoints, train
from learnopt.checkpoints import durable
from learnopt.testing import assert_same_theta

STEPS = 240
SETTINGS = dict(
    PES_QUADRATIC,
    trunc_length=4,
    total_length=16,
    checkpoint_every=20,
    keep_checkpoints=2,
    log_every=5,
)

SCRIPT = textwrap.dedent(
    """
    import json, signal, sys, time
    from learnopt import train
    from learnopt.checkpoints import durable

    out, resume, delay, fsize = sys.argv[1], sys.argv[2] == "1", float(sys.argv[3]), sys.argv[4]
    settings = json.loads(sys.argv[5])
    if delay:  # widen the window in which a checkpoint is being written (before its rename)
        fsync_tree = durable.fsync_tree

        def slow(root):
            time.sleep(delay)
            fsync_tree(root)

        durable.fsync_tree = slow
    callbacks = []
    if fsize != "-":  # from step 40 on, no file may grow beyond this size (a full disk)
        import resource

        def limit(info):
            if info.step == 40:
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                resource.setrlimit(resource.RLIMIT_FSIZE, (int(fsize), int(fsize)))

        callbacks.append(limit)
    result = train.meta_train(
        out_dir=out, resume=resume, progress=False, plots=False, callbacks=callbacks,
        **settings,
    )
    print(result.message, file=sys.stderr)
    sys.exit(result.exit_code)
    """
)


def _start(out: Path, resume: bool, delay: float = 0.0, fsize: str = "-", **settings):
    args = [str(out), "1" if resume else "0", str(delay), fsize]
    import json

    cmd = [sys.executable, "-c", SCRIPT, *args, json.dumps(dict(SETTINGS, **settings))]
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        JAX_COMPILATION_CACHE_DIR=str(JAX_CACHE),  # the same program compiles once
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
    )
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _rows(out: Path) -> int:
    try:
        return max(0, len((out / "metrics.csv").read_text().splitlines()) - 1)
    except FileNotFoundError:
        return 0


def _temporaries(out: Path) -> list[Path]:
    ck = out / checkpoints.CHECKPOINT_DIR
    found = list(ck.glob("*.orbax-checkpoint-tmp*")) if ck.is_dir() else []
    return found + list(out.glob(".*.tmp*"))


def _wait(proc, until, timeout: float = 240.0) -> bool:
    """Polls ``until()`` every 5 ms while ``proc`` runs; False if the process ended."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if until():
            return True
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("the meta-training process made no progress")
        time.sleep(0.005)
    return False


JAX_CACHE = None


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run (in a subprocess too, so both run in the same conditions)."""
    global JAX_CACHE
    JAX_CACHE = tmp_path_factory.getbasetemp() / "jax-cache"
    out = tmp_path_factory.mktemp("faults") / "reference"
    proc = _start(out, resume=False, steps=STEPS)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()
    return out


def test_sigkill_at_random_moments_then_resume_gives_the_uninterrupted_theta(reference, tmp_path):
    rng = random.Random(1234)
    out = tmp_path / "killed"
    kills = []
    # Kills while a checkpoint is being written (its temporary folder exists), at a random
    # moment after some progress, and again during a write.
    for i, during_write in enumerate((True, False, True)):
        proc = _start(out, resume=i > 0, delay=0.15, steps=STEPS)
        start_rows = _rows(out)
        if during_write:
            hit = _wait(proc, lambda: any((out / "checkpoints").glob("*.orbax-checkpoint-tmp*")))
        else:
            hit = _wait(proc, lambda n=start_rows: _rows(out) > n + 3)
            time.sleep(rng.uniform(0.0, 0.6))
            hit = hit and proc.poll() is None
        assert hit, "the run ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kills.append((during_write, bool(_temporaries(out)), _rows(out)))
        assert proc.returncode == -signal.SIGKILL
    # At least one kill left a half-written checkpoint behind.
    assert any(during and left for during, left, _ in kills), kills

    proc = _start(out, resume=True, steps=STEPS)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()
    assert _temporaries(out) == []  # the next start removed what the kills left
    assert_same_theta(out / "theta.msgpack", reference / "theta.msgpack")
    assert (out / "metrics.csv").read_bytes() == (reference / "metrics.csv").read_bytes()
    steps = [int(p.name.split("_")[1]) for p in (out / "checkpoints").iterdir()]
    assert sorted(steps) == [STEPS - 20, STEPS]


def test_file_size_limit_keeps_the_last_good_checkpoint_and_says_so(reference, tmp_path):
    # A real OS-level write failure (EFBIG from RLIMIT_FSIZE) inside Orbax's writer.
    out = tmp_path / "full"
    proc = _start(out, resume=False, fsize="4000", steps=STEPS)
    _, err = proc.communicate(timeout=600)
    err = err.decode()
    assert proc.returncode == 1, err
    lines = [line for line in err.splitlines() if line.startswith("learnopt meta-train:")]
    assert len(lines) == 1, err
    assert "cannot write a checkpoint at step 40" in lines[0], lines[0]
    assert "File too large" in lines[0], lines[0]
    assert "the last good checkpoint is" in lines[0] and "step_00000020" in lines[0], lines[0]
    assert _temporaries(out) == []
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_00000020"]
    # The space is back: the run resumes from the last good checkpoint and ends as if
    # nothing had happened.
    proc = _start(out, resume=True, steps=STEPS)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()
    assert_same_theta(out / "theta.msgpack", reference / "theta.msgpack")


def test_full_disk_during_a_checkpoint_write(tmp_path, monkeypatch, capsys):
    # ENOSPC raised where a full disk surfaces for buffered writes: the fsync before the
    # rename. The checkpoint is abandoned (its temporary folder removed), the run stops.
    calls = []
    fsync_tree = durable.fsync_tree

    def full_after_first_checkpoint(root):
        calls.append(root)
        if Path(root).name.startswith("step_00000002") and ".orbax-checkpoint-tmp" in str(root):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(root))
        fsync_tree(root)

    monkeypatch.setattr(durable, "fsync_tree", full_after_first_checkpoint)
    out = tmp_path / "run"
    result = train.meta_train(
        task="QuadraticTask",
        steps=6,
        checkpoint_every=1,
        log_every=1,
        out_dir=out,
        progress=False,
        plots=False,
    )
    assert result.status == "failed" and result.exit_code == 1
    assert result.step == 2
    assert "No space left on device" in result.message
    assert f"the last good checkpoint is {out / 'checkpoints' / 'step_00000001'}" in result.message
    assert "\n" not in result.message
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"learnopt meta-train: {result.message}"
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["step_00000001"]
    with checkpoints.RunCheckpointer(out / "checkpoints") as ck:
        state, meta = ck.restore(result.state)
    assert meta["step"] == 1 and int(state.outer_iteration) == 1
    theta = checkpoints.load_theta(out / "theta.msgpack")
    np.testing.assert_array_equal(theta["log_lr"], state.theta_opt_state.params["log_lr"])


def test_unwritable_output_folder_is_refused_before_training(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    for out in (blocker / "run", Path("/sys/learnopt-unwritable-run")):
        with pytest.raises(ValueError, match=r"out_dir: .* is not a writable directory"):
            train.meta_train(task="QuadraticTask", steps=1, out_dir=out, progress=False)
