"""The memory check before meta-training: batches that cannot fit are refused up front."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from learnopt.outer_trainers import memory_check
from learnopt.run import build

TASK = "ImageMLP_Digits8_Relu32"


def _full_es_learner(total_length: int, num_tasks: int = 2):
    return build.build_learner(
        task=TASK,
        lopt="LearnableAdam",
        trainer="full_es",
        total_length=total_length,
        num_tasks=num_tasks,
        meta_loss_split="train+outer_valid",
    )


def test_whole_run_bytes_match_the_fetched_batches_and_leave_the_data_where_it_was():
    probed = _full_es_learner(30)
    fresh = _full_es_learner(30)
    ahead = memory_check.whole_run_bytes(probed)
    after_probe = probed.get_datas()
    assert ahead == [memory_check.nbytes(d) for d in after_probe]
    assert ahead[0] > 0
    # The probe fetched a step and moved the datasets back: the run sees the same batches.
    for a, b in zip(
        jax.tree_util.tree_leaves(after_probe),
        jax.tree_util.tree_leaves(fresh.get_datas()),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)


def test_a_whole_run_too_large_for_memory_is_refused_before_its_batches_are_fetched(
    monkeypatch,
):
    learner = _full_es_learner(10_000_000)
    fetched = []
    monkeypatch.setattr(learner, "get_datas", lambda: fetched.append(1) or ())
    with pytest.raises(memory_check.BatchesDoNotFitError) as info:
        learner.init(jax.random.PRNGKey(0))
    message = str(info.value)
    assert "FullES, whole runs of 10000000 steps, num_tasks=2" in message
    assert "total_length" in message and "host memory available" in message
    assert fetched == []


def test_the_check_can_be_turned_off(monkeypatch):
    monkeypatch.setenv(memory_check.SKIP_ENV, "1")
    assert memory_check.skipped()
    monkeypatch.setenv(memory_check.SKIP_ENV, "0")
    assert not memory_check.skipped()


class _Device:
    def __init__(self, platform, limit=None, in_use=0):
        self.platform = platform
        self._stats = None if limit is None else {"bytes_limit": limit, "bytes_in_use": in_use}

    def memory_stats(self):
        return self._stats


def test_on_the_cpu_the_host_holds_the_batches_twice():
    cpu = _Device("cpu")
    assert memory_check.check_batches_fit([400], ["e"], host_bytes=800, device=cpu) == 400
    with pytest.raises(memory_check.BatchesDoNotFitError, match="held twice"):
        memory_check.check_batches_fit([401], ["e"], host_bytes=800, device=cpu)


def test_on_an_accelerator_each_device_holds_its_share():
    gpu = _Device("gpu", limit=1000, in_use=200)
    fit = dict(num_devices=2, host_bytes=10**9, device=gpu)
    assert memory_check.check_batches_fit([1500], ["e"], **fit) == 1500
    with pytest.raises(memory_check.BatchesDoNotFitError, match="each of the 2 device"):
        memory_check.check_batches_fit([1700], ["e"], **fit)
    # A backend that reports no memory statistics is not checked on the device.
    quiet = _Device("tpu")
    assert memory_check.check_batches_fit([10**12], ["e"], host_bytes=10**13, device=quiet)


def test_unknown_host_memory_and_empty_batches_pass(monkeypatch):
    monkeypatch.setattr(memory_check, "available_host_bytes", lambda: None)
    assert memory_check.check_batches_fit([10**15], ["e"], device=_Device("cpu")) == 10**15
    assert memory_check.check_batches_fit([0], ["e"], host_bytes=1) == 0


def test_available_host_bytes_reads_the_machine():
    available = memory_check.available_host_bytes()
    assert available is None or available > 0


def test_meta_train_refuses_a_whole_run_that_cannot_fit_with_exit_2_and_writes_nothing(
    tmp_path, capsys
):
    from learnopt import cli

    out = tmp_path / "run"
    argv = ["meta-train", "--task", TASK, "--trainer", "full_es", "--num-tasks", "2"]
    argv += ["--total-length", "100000000", "--steps", "1", "--quiet", "--out", str(out)]
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "one outer step's batches take" in err and "--total-length" in err
    assert not (out / "metrics.csv").exists()
