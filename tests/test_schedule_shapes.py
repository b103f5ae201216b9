"""benchmarks/schedule_shapes.py: schedule shapes' final train and valid loss, per seed."""

from __future__ import annotations

import csv

import pytest


def test_every_variant_is_trained_on_every_seed_and_the_heads_act(repo_script, tmp_path):
    module = repo_script("benchmarks/schedule_shapes.py")
    out = tmp_path / "out"
    argv = ["--tasks", "ImageMLP_Digits8_Relu32", "--steps", "40", "--seeds", "2"]
    assert module.main([*argv, "--out", str(out)]) == 0
    rows = list(csv.DictReader(open(out / "schedule_shapes.csv")))
    variants = {r["variant"] for r in rows}
    heads = len(module.HEADS) + len(module.REGIME_BIASES)
    assert len(variants) == len(module.WARMUPS) + len(module.FRONTIER) + 1 + heads
    assert len(rows) == 2 * len(variants)
    train = {(r["variant"], r["seed"]): float(r["final_train"]) for r in rows}
    # The early head takes larger steps than the released schedule from the first one,
    # so the same seeds end at other losses; warmup-cosine's warmups differ likewise.
    assert train["CeloAdam early", "0"] != train["CeloAdam", "0"]
    assert train["WC warmup 0.05", "0"] != train["WC warmup 0.3", "0"]
    assert train["Adam 0.01", "0"] != train["Adam 0.00316", "0"]
    assert (out / "schedule_shapes.png").stat().st_size > 0
    assert "| ImageMLP_Digits8_Relu32 | CeloAdam late |" in (out / "schedule_shapes.md").read_text()


def test_weight_decay_group_trains_decayed_celoadam_beside_the_release(repo_script, tmp_path):
    module = repo_script("benchmarks/schedule_shapes.py")
    out = tmp_path / "out"
    argv = ["--tasks", "ImageMLP_Digits8_Relu32", "--steps", "40", "--seeds", "1"]
    argv += ["--groups", "celo,weight_decay", "--weight-decays", "3", "--out", str(out)]
    assert module.main(argv) == 0
    train = {
        r["variant"]: float(r["final_train"])
        for r in csv.DictReader(open(out / "schedule_shapes.csv"))
    }
    assert set(train) == {"CeloAdam", "CeloAdam wd=3", "CeloAdam wd=3 by progress"}
    assert train["CeloAdam wd=3"] != train["CeloAdam"]


def test_bad_groups_and_weight_decays_are_errors_naming_them(repo_script, capsys):
    module = repo_script("benchmarks/schedule_shapes.py")
    for argv, match in (
        (["--groups", "celo,nope"], "--groups: unknown nope"),
        (["--weight-decays", "0.1,x"], "--weight-decays: not a comma-separated list"),
        (["--groups", "weight_decay"], "--groups weight_decay needs --weight-decays"),
        (["--weight-decays", "0.1,-1"], "--weight-decays: every decay must be > 0"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            module.main(argv)
        assert exit_info.value.code == 2
        assert match in capsys.readouterr().err
