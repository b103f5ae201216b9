"""benchmarks/schedule_probe.py: the steps a learned schedule takes along fixed loss curves."""

from __future__ import annotations

import csv

import jax
import jax.numpy as jnp
import pytest

from learnopt.learned_optimizers import theta_files
from learnopt.learned_optimizers.celo_adam import CeloAdam


def test_a_regime_head_is_probed_with_and_without_it(repo_script, tmp_path):
    """A small Celo-Adam whose regime head shrinks the step: on the memorizing curve its
    late steps are smaller than with the head at zero, on the language-model curve (whose
    loss barely falls) nearly the same; the first theta's ratios are 1."""
    module = repo_script("benchmarks/schedule_probe.py")
    lopt = CeloAdam(lstm_hidden_size=4, regime_head=True)
    theta = lopt.init(jax.random.PRNGKey(0))
    theta["rnn_params"]["regime_step_size"]["b"] = jnp.full((1,), 2.0)
    path = theta_files.save(tmp_path / "t.msgpack", lopt, theta)
    assert module.main(["--theta", f"small={path}", "--out", str(tmp_path / "out")]) == 0
    rows = list(csv.DictReader(open(tmp_path / "out" / "schedule_probe.csv")))
    assert {r["theta"] for r in rows} == {"small", "small (regime head off)"}
    assert len(rows) == 2 * len(module.CURVES) * 1000
    size = {(r["theta"], r["curve"], int(r["step"])): float(r["step_size"]) for r in rows}
    on, off = size["small", "memorizing", 990], size["small (regime head off)", "memorizing", 990]
    assert on < 0.5 * off  # r near -0.9 there: exp(2 r) ~ 0.17
    on, off = (
        size["small", "language-model", 990],
        size["small (regime head off)", "language-model", 990],
    )
    assert 0.85 * off < on <= off
    table = (tmp_path / "out" / "schedule_probe.md").read_text()
    assert "| memorizing | small | " in table and "(1.00)" in table
    assert (tmp_path / "out" / "schedule_probe.png").stat().st_size > 0


def test_tasks_add_the_first_thetas_recorded_loss_curve(repo_script, tmp_path, capsys):
    module = repo_script("benchmarks/schedule_probe.py")
    lopt = CeloAdam(lstm_hidden_size=4)
    path = theta_files.save(tmp_path / "t.msgpack", lopt, lopt.init(jax.random.PRNGKey(0)))
    out = tmp_path / "out"
    argv = ["--theta", f"small={path}", "--out", str(out), "--tasks", "ImageMLP_Digits8_Relu32"]
    assert module.main(argv) == 0
    rows = list(csv.DictReader(open(out / "schedule_probe.csv")))
    assert len(rows) == (len(module.CURVES) + 1) * 1000
    size = {(r["curve"], int(r["step"])): float(r["step_size"]) for r in rows}
    recorded = [size["ImageMLP_Digits8_Relu32", k] for k in range(1000)]
    # A real loss sequence differs from every fixed curve, and so do the steps read from it.
    assert all(recorded != [size[c, k] for k in range(1000)] for c in module.CURVES)
    assert "| ImageMLP_Digits8_Relu32 | small | " in (out / "schedule_probe.md").read_text()
    with pytest.raises(SystemExit):
        module.main([*argv[:4], "--tasks", "NoSuchTask"])
    assert "--tasks: Unknown task 'NoSuchTask'" in capsys.readouterr().err
