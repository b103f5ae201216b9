"""One meta-training run over two processes is the single-process run.

Two local processes join on loopback with ``learnopt.distributed`` (JAX's multi-controller
runtime, gloo collectives), each with two forced host CPU devices: a 4-device global
mesh, the same code path as several GPU hosts. They meta-train PES (a quadratic family)
and FullGrad (the digits MLP, TFDS-backed), and must end with the same theta as each
other and as one process on one device. A 2-process run whose process 1 is SIGKILLed
stops process 0 too (non-zero exit), and the restarted job (the command line, on two
processes) resumes to the uninterrupted run's theta; the same checkpoint also resumes on
one process. Each run is a fresh set of processes sharing a JAX compilation cache.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from conftest import PES_QUADRATIC

from learnopt import checkpoints, distributed
from learnopt.tasks.datasets import base as datasets_base

PES = dict(
    PES_QUADRATIC,
    trunc_length=3,
    total_length=9,
    steps=16,
    log_every=4,
    checkpoint_every=8,
)
FULL_GRAD = dict(
    task="ImageMLP_Digits8_Relu32", trainer="full_grad", total_length=4, num_tasks=4, steps=6
)
# The session's XLA_FLAGS (conftest.py adds the options that only make CPU compilation
# faster), which every process of these tests inherits.
FAST_COMPILE = os.environ.get("XLA_FLAGS", "")

SCRIPT = textwrap.dedent(
    """
    import json, os, signal, sys
    from learnopt import distributed, train
    from learnopt.tasks.datasets import base as datasets_base

    pid, nproc, port, spec = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    spec = json.loads(spec)
    if nproc > 1:
        distributed.initialize(f"127.0.0.1:{port}", nproc, pid, num_cpu_devices=2,
                               init_timeout=120, peer_timeout=spec["peer_timeout"])
    gathered = [0]  # examples this process copied out of the digits arrays
    gather = datasets_base.SplitIterator._gather
    def counting(self, idx):
        gathered[0] += len(idx)
        return gather(self, idx)
    datasets_base.SplitIterator._gather = counting

    def kill(info):
        if pid == spec.get("kill_pid") and info.step == spec.get("kill_at"):
            os.kill(os.getpid(), signal.SIGKILL)

    out = []
    for run in spec["runs"]:
        gathered[0] = 0
        r = train.meta_train(out_dir=run["out"][pid], progress=False, plots=False,
                             callbacks=[kill], **run["kwargs"])
        ts = r.learner.gradient_estimators[0].truncated_step
        out.append({"status": r.status, "step": r.step,
                    "theta": {k: float(v) for k, v in r.theta.items()},
                    "rows": ts.local_rows, "gathered": gathered[0],
                    "devices": 1 if r.learner.mesh is None else r.learner.mesh.size})
    print("RESULT" + json.dumps(out), flush=True)
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    base = tmp_path_factory.mktemp("distributed")
    return dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        XLA_FLAGS=FAST_COMPILE,
        LEARNOPT_DATA_DIR=str(base / "tfds"),
        JAX_COMPILATION_CACHE_DIR=str(base / "jax-cache"),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        PYTHONUNBUFFERED="1",
    )


def _launch(commands: list[list[str]], env: dict, timeout: float = 300) -> list[tuple]:
    """Starts the processes of one job together; ``[(returncode, stdout, stderr)]``."""
    procs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for cmd in commands
    ]
    try:
        outputs = [p.communicate(timeout=timeout) for p in procs]
        return [(p.returncode, *o) for p, o in zip(procs, outputs, strict=True)]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def _meta_train(env: dict, nproc: int, runs: list[dict], **spec) -> list[tuple]:
    port = _free_port()
    spec = dict(spec, runs=runs)
    spec.setdefault("peer_timeout", 60)
    cmds = [
        [sys.executable, "-c", SCRIPT, str(pid), str(nproc), str(port), json.dumps(spec)]
        for pid in range(nproc)
    ]
    return _launch(cmds, env)


def _results(procs: list[tuple]) -> list[list[dict]]:
    out = []
    for rc, stdout, stderr in procs:
        assert rc == 0, stderr[-3000:]
        line = next(x for x in stdout.splitlines() if x.startswith("RESULT"))
        out.append(json.loads(line[len("RESULT") :]))
    return out


def _close(a: dict, b: dict, rtol: float = 1e-4) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert abs(a[k] - b[k]) <= rtol * max(1.0, abs(a[k])), (k, a[k], b[k])


@pytest.fixture(scope="module")
def runs(env, tmp_path_factory):
    """PES and FullGrad on one process (one device) and on two (2 x 2 devices)."""
    base = tmp_path_factory.mktemp("runs")
    one = _results(
        _meta_train(
            env,
            1,
            [
                {"out": [str(base / "one-pes")], "kwargs": PES},
                {"out": [None], "kwargs": FULL_GRAD},
            ],
        )
    )[0]
    # Process 1 is given a folder that does not exist: only process 0 may touch out_dir.
    two = _results(
        _meta_train(
            env,
            2,
            [
                {"out": [str(base / "two-pes"), str(base / "absent")], "kwargs": PES},
                {"out": [None, None], "kwargs": FULL_GRAD},
            ],
        )
    )
    return {"base": base, "one": one, "two": two}


def test_two_processes_end_with_the_single_process_theta(runs):
    one, (p0, p1) = runs["one"], runs["two"]
    for i, name in enumerate(("pes", "full_grad")):
        assert one[i]["status"] == p0[i]["status"] == p1[i]["status"] == "completed", name
        assert one[i]["devices"] == 1 and p0[i]["devices"] == 4
        assert p0[i]["theta"] == p1[i]["theta"], name  # replicated: identical everywhere
        _close(one[i]["theta"], p0[i]["theta"])
        assert one[i]["theta"]["log_lr"] != pytest.approx(np.log(1e-3), abs=1e-4)  # it moved
    # Each process drew only the batch rows of its own two tasks.
    assert p0[1]["rows"] == [0, 2] and p1[1]["rows"] == [2, 4] and one[1]["rows"] is None
    assert p0[1]["gathered"] == p1[1]["gathered"] == one[1]["gathered"] // 2 > 0


def test_only_process_zero_writes_the_run(runs):
    base = runs["base"]
    assert not (base / "absent").exists()
    one, two = base / "one-pes", base / "two-pes"
    config = json.loads((two / "config.json").read_text())
    assert config["processes"] == 2 and config["devices"] == 4
    assert json.loads((one / "config.json").read_text())["devices"] == 1
    for run in (one, two):
        assert len((run / "metrics.csv").read_text().splitlines()) == PES["steps"] + 1
    with checkpoints.RunCheckpointer(two / "checkpoints") as ck:
        assert ck.steps() == [8, 16]


def test_killed_two_process_run_resumes_to_the_same_theta(runs, env, tmp_path):
    out = tmp_path / "run"
    # Process 1 dies (SIGKILL) after step 12; the checkpoint of step 8 is the last one.
    spec = dict(kill_pid=1, kill_at=12, peer_timeout=10)
    (rc0, _, err0), (rc1, _, _) = _meta_train(
        env, 2, [{"out": [str(out), str(out)], "kwargs": PES}], **spec
    )
    assert rc1 == -signal.SIGKILL
    assert rc0 != 0  # process 0 stopped too, with an error
    assert "heartbeat" in err0 or "task died" in err0, err0[-2000:]
    with checkpoints.RunCheckpointer(out / "checkpoints") as ck:
        assert ck.latest_step() == 8
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)

    # The job restarted: the same command line on every process, with --resume.
    port = _free_port()
    cli_env = dict(env, XLA_FLAGS=f"{FAST_COMPILE} --xla_force_host_platform_device_count=2")
    cmds = [
        [sys.executable, "-m", "learnopt", "meta-train", "--resume", str(out), "--quiet"]
        + ["--no-plots", "--coordinator", f"127.0.0.1:{port}", "--num-processes", "2"]
        + ["--process-id", str(pid), "--init-timeout", "120", "--peer-timeout", "60"]
        for pid in range(2)
    ]
    for rc, _, stderr in _launch(cmds, cli_env):
        assert rc == 0, stderr[-3000:]
    ref = runs["base"] / "two-pes"
    theta, ref_theta = (checkpoints.load_theta(d / "theta.msgpack") for d in (out, ref))
    for k in ref_theta:
        np.testing.assert_array_equal(theta[k], ref_theta[k])
    assert (out / "metrics.csv").read_bytes() == (ref / "metrics.csv").read_bytes()

    # The checkpoint written by two processes resumes on one (on one device).
    (resumed,) = _results(
        _meta_train(env, 1, [{"out": [str(copy)], "kwargs": dict(PES, resume=True)}])
    )
    assert resumed[0]["status"] == "completed" and resumed[0]["step"] == PES["steps"]
    _close(resumed[0]["theta"], runs["two"][0][0]["theta"])


def test_a_missing_process_fails_with_a_clear_message(env):
    code = (
        "from learnopt import distributed; "
        f"distributed.initialize('127.0.0.1:{_free_port()}', 2, 0, init_timeout=2)"
    )
    ((rc, _, stderr),) = _launch([[sys.executable, "-c", code]], env, timeout=120)
    assert rc == 1
    assert "not every process joined the run" in stderr and "within 2 s" in stderr


# ---------------------------------------------------------------- in-process pieces


def _arrays_datasets() -> datasets_base.Datasets:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 255, (50, 2, 2, 1), dtype=np.uint8)
    labels = rng.integers(0, 3, 50).astype(np.int32)
    return datasets_base.datasets_from_arrays(
        {"train": (images, labels), "test": (images[:10], labels[:10])}, batch_size=3
    )


@pytest.mark.parametrize(
    "shape, axis, start, stop",
    [
        ((4, 6), 1, 2, 5),
        ((5, 8), 1, 0, 4),
        ((3,), 0, 1, 2),
        ((2, 3, 4), 2, 1, 3),
        ((9, 8), 1, 4, 8),
    ],
)
def test_take_slice_is_the_slice_of_take_and_advances_alike(shape, axis, start, stop):
    full, part = _arrays_datasets().train, _arrays_datasets().train
    for _ in range(3):  # across epoch boundaries (40 train examples, 3 per batch)
        a = full.take(*shape)
        b = part.take_slice(shape, axis, start, stop)
        index = (slice(None),) * axis + (slice(start, stop),)
        for k in a:
            np.testing.assert_array_equal(a[k][index], b[k])
        assert full.get_state() == part.get_state()
    # An iterator without take_slice: everything is drawn, then sliced.
    stacking = datasets_base.Datasets(*(iter(range(100)) for _ in range(4))).train
    assert datasets_base.take_slice(stacking, (2, 3), 1, 1, 3).tolist() == [[1, 2], [4, 5]]
    assert next(stacking) == 6


def test_take_slice_rejects_bad_slices():
    train = _arrays_datasets().train
    with pytest.raises(ValueError, match="start, stop"):
        train.take_slice((2, 4), 1, 3, 2)
    with pytest.raises(ValueError, match="axis"):
        train.take_slice((2, 4), 2, 0, 1)


def test_single_process_mesh_rows_and_argument_checks():
    mesh = distributed.population_mesh()
    assert distributed.local_rows(mesh, 4) == (0, 4)
    assert not distributed.spans_processes(mesh) and distributed.is_primary()
    with pytest.raises(ValueError, match="coordinator_address must be 'HOST:PORT'"):
        distributed.initialize("localhost", 2, 0)
    with pytest.raises(ValueError, match="go together"):
        distributed.initialize("localhost:1234", 2)
    with pytest.raises(ValueError, match="process_id"):
        distributed.initialize("localhost:1234", 2, 2)
    assert not distributed.is_initialized()
    # Single process: the agreement helpers are plain calls.
    assert distributed.run_on_primary(lambda: {"a": 1}) == {"a": 1}
    assert distributed.broadcast_json([1, "x"]) == [1, "x"]
    np.testing.assert_array_equal(distributed.all_gather_ints([3, 4]), [[3, 4]])


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--coordinator", "h:1"], "go together"),
        (["--init-timeout", "5"], "apply to a multi-process run"),
        (["--distributed", "--process-id", "0"], "--distributed takes"),
        (["--coordinator", "nohost", "--num-processes", "2", "--process-id", "0"], "HOST:PORT"),
    ],
)
def test_cli_multi_process_flags_are_checked(flags, message, tmp_path, capsys):
    from learnopt import cli

    with pytest.raises(SystemExit) as e:
        cli.main(["meta-train", "--out", str(tmp_path / "r"), "--steps", "1", *flags])
    assert e.value.code == 2
    assert message in capsys.readouterr().err
    assert not Path(tmp_path / "r").exists()
