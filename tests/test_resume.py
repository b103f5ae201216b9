"""A resumed meta-training run ends bit-identical to the uninterrupted one.

The notes' walkthrough (LearnableAdam, full_grad, the digits MLP: a TFDS-backed data
stream) is stopped by SIGINT between checkpoints and resumed; a PES run (inner states,
PES accumulators, a host-side noise stream) is extended from a shorter finished run.
Theta and metrics.csv are compared byte for byte.

Each run is a fresh process, as a real resume is; they share a JAX compilation cache
so that the same program is compiled once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import PES_QUADRATIC

from learnopt import checkpoints
from learnopt.testing import assert_same_theta

WALKTHROUGH = dict(steps=12, checkpoint_every=5, log_every=2)
PES = dict(
    PES_QUADRATIC,
    trunc_length=3,
    total_length=9,
    steps=40,
    checkpoint_every=15,
    log_every=4,
)
SCRIPT = textwrap.dedent(
    """
    import json, os, signal, sys
    from learnopt import train

    out, kwargs, interrupt_at = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])

    def interrupt(info):
        if info.step == interrupt_at:
            os.kill(os.getpid(), signal.SIGINT)

    r = train.meta_train(out_dir=out, progress=False, plots=False, callbacks=[interrupt],
                         **kwargs)
    print(json.dumps({"status": r.status, "step": r.step, "checkpoint": str(r.checkpoint),
                      "position": r.learner.gradient_estimators[0].task_family.datasets
                      .train.get_state().get("position") if r.learner.gradient_estimators[0]
                      .task_family.datasets is not None else None}))
    """
)


@pytest.fixture
def run(tmp_path_factory, monkeypatch):
    base = tmp_path_factory.getbasetemp()
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        LEARNOPT_DATA_DIR=str(base / "tfds"),
        JAX_COMPILATION_CACHE_DIR=str(base / "jax-cache"),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
    )

    def run(out, interrupt_at=0, **kwargs):
        cmd = [sys.executable, "-c", SCRIPT, str(out), json.dumps(kwargs), str(interrupt_at)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode in (0, 130), proc.stderr
        return json.loads(proc.stdout.strip().splitlines()[-1])

    return run


def _same_run(a, b):
    assert_same_theta(a / "theta.msgpack", b / "theta.msgpack")
    assert (a / "metrics.csv").read_bytes() == (b / "metrics.csv").read_bytes()


def test_walkthrough_stopped_by_sigint_resumes_bit_identically(run, tmp_path):
    ref = run(tmp_path / "ref", **WALKTHROUGH)
    assert ref["status"] == "completed"
    out = tmp_path / "run"
    # Interrupted between the checkpoints of steps 5 and 10: one is written at step 8.
    first = run(out, interrupt_at=8, **WALKTHROUGH)
    assert first["status"] == "interrupted" and first["step"] == 8
    assert first["checkpoint"] == str(out / "checkpoints" / "step_00000008")
    # The data stream's position is in the checkpoint.
    with checkpoints.RunCheckpointer(out / "checkpoints") as ck:
        meta = ck.read_meta(8)
    assert meta["data"][0]["train"]["position"] == first["position"] > 0
    resumed = run(out, resume=True)
    assert resumed["status"] == "completed" and resumed["step"] == WALKTHROUGH["steps"]
    _same_run(tmp_path / "ref", out)


def test_pes_extended_from_a_finished_run_is_bit_identical(run, tmp_path):
    ref = run(tmp_path / "ref", **PES)
    assert ref["status"] == "completed"
    out = tmp_path / "run"
    short = run(out, **dict(PES, steps=25))
    assert short["status"] == "completed" and short["step"] == 25
    extended = run(out, resume=True, steps=PES["steps"])
    assert extended["status"] == "completed" and extended["step"] == PES["steps"]
    _same_run(tmp_path / "ref", out)
