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


def test_scale_adapt_smooth_and_rms_groups_change_celoadam_and_grid_trains_warmup_cosine(
    repo_script, tmp_path
):
    module = repo_script("benchmarks/schedule_shapes.py")
    out = tmp_path / "out"
    argv = ["--tasks", "ImageMLP_Digits8_Relu32", "--steps", "30", "--seeds", "1"]
    argv += ["--groups", "celo,grid,scale,adapt,smooth,rms"]
    argv += ["--scales", "1,4", "--weight-decays", "3"]
    argv += ["--adaptations", "0.5", "--smoothings", "0.9", "--rms-decays", "0.95"]
    assert module.main([*argv, "--out", str(out)]) == 0
    train = {
        r["variant"]: float(r["final_train"])
        for r in csv.DictReader(open(out / "schedule_shapes.csv"))
    }
    grid = {f"WC {rate:g}" for rate in module.GRID}
    scaled = {"CeloAdam x1", "CeloAdam x4"}
    decayed = {"CeloAdam x1 wd=3 by progress", "CeloAdam x4 wd=3 by progress"}
    adapted = {"CeloAdam hd=0.5", "CeloAdam hd=0.5 wd=3 by progress"}
    smoothed = {"CeloAdam smooth=0.9", "CeloAdam smooth=0.9 wd=3 by progress"}
    rms = {"CeloAdam b2=0.95", "CeloAdam b2=0.95 smooth=0.9", "CeloAdam b2=0.95 wd=3 by progress"}
    assert set(train) == {"CeloAdam"} | grid | scaled | decayed | adapted | smoothed | rms
    # x1 is the release step for step (the head's bias log 1 = 0); x4 is not.
    assert train["CeloAdam x1"] == train["CeloAdam"]
    assert train["CeloAdam x4"] != train["CeloAdam"]
    assert train["CeloAdam hd=0.5"] != train["CeloAdam"]
    assert train["CeloAdam smooth=0.9"] != train["CeloAdam"]
    assert train["CeloAdam b2=0.95"] != train["CeloAdam"]
    assert train["WC 0.1"] != train["WC 0.00316"]


def test_kernels_group_leaves_a_net_without_kernels_as_the_release(repo_script, tmp_path):
    """(That it multiplies a conv kernel's steps is tests/test_celo_adam.py's.)"""
    module = repo_script("benchmarks/schedule_shapes.py")
    out = tmp_path / "out"
    argv = ["--tasks", "ImageMLP_Digits8_Relu32", "--steps", "20", "--seeds", "1"]
    argv += ["--groups", "celo,kernels", "--scales", "4", "--weight-decays", "3"]
    assert module.main([*argv, "--out", str(out)]) == 0
    train = {
        r["variant"]: float(r["final_train"])
        for r in csv.DictReader(open(out / "schedule_shapes.csv"))
    }
    assert set(train) == {"CeloAdam", "CeloAdam kernels x4", "CeloAdam kernels x4 wd=3 by progress"}
    assert train["CeloAdam kernels x4"] == train["CeloAdam"]
    assert train["CeloAdam kernels x4 wd=3 by progress"] != train["CeloAdam"]


def test_a_rerun_reuses_finished_tasks_with_the_same_settings_and_retrains_others(
    repo_script, tmp_path, monkeypatch, capsys
):
    module = repo_script("benchmarks/schedule_shapes.py")
    out = tmp_path / "out"
    argv = ["--tasks", "ImageMLP_Digits8_Relu32", "--steps", "20", "--seeds", "1"]
    argv += ["--groups", "frontier", "--out", str(out)]
    assert module.main(argv) == 0
    first = (out / "schedule_shapes.csv").read_text()
    assert (out / "tasks" / "ImageMLP_Digits8_Relu32.json").exists()
    capsys.readouterr()
    trained = []
    real = module.engine.TaskEvaluator
    monkeypatch.setattr(
        module.engine, "TaskEvaluator", lambda *a, **k: trained.append(a) or real(*a, **k)
    )
    assert module.main(argv) == 0
    assert trained == [] and "reused" in capsys.readouterr().err
    assert (out / "schedule_shapes.csv").read_text() == first
    # Other settings (here the seeds) train the task again.
    assert module.main([*argv, "--seeds", "2"]) == 0
    assert len(trained) == 1
    assert len((out / "schedule_shapes.csv").read_text().splitlines()) == 1 + 2 * 4


def test_bad_groups_and_weight_decays_are_errors_naming_them(repo_script, capsys):
    module = repo_script("benchmarks/schedule_shapes.py")
    for argv, match in (
        (["--groups", "celo,nope"], "--groups: unknown nope"),
        (["--weight-decays", "0.1,x"], "--weight-decays: not a comma-separated list"),
        (["--groups", "weight_decay"], "--groups weight_decay needs --weight-decays"),
        (["--weight-decays", "0.1,-1"], "--weight-decays: every value must be a positive"),
        (["--scales", "2,0"], "--scales: every value must be a positive"),
        (["--scales", "2,nan"], "--scales: every value must be a positive"),
        (["--scales", "two"], "--scales: not a comma-separated list"),
        (["--groups", "scale"], "--groups scale needs --scales"),
        (["--groups", "kernels"], "--groups kernels needs --scales"),
        (["--groups", "adapt"], "--groups adapt needs --adaptations"),
        (["--adaptations", "0.1,-2"], "--adaptations: every value must be a positive"),
        (["--groups", "smooth"], "--groups smooth needs --smoothings"),
        (["--smoothings", "0.9,1"], "--smoothings: every value must be below 1"),
        (["--groups", "rms"], "--groups rms needs --rms-decays"),
        (["--rms-decays", "1.5"], "--rms-decays: every value must be below 1"),
        (["--grid-rms-decay", "1"], "--grid-rms-decay must be in (0, 1)"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            module.main(argv)
        assert exit_info.value.code == 2
        assert match in capsys.readouterr().err


def test_free_group_trains_learning_rate_free_adams_to_finite_losses(repo_script, tmp_path):
    module = repo_script("benchmarks/schedule_shapes.py")
    out = tmp_path / "out"
    argv = ["--tasks", "ImageMLP_Digits8_Relu32", "--steps", "80", "--seeds", "1"]
    assert module.main([*argv, "--groups", "free", "--out", str(out)]) == 0
    rows = {r["variant"]: r for r in csv.DictReader(open(out / "schedule_shapes.csv"))}
    assert set(rows) == {"Prodigy WC", "D-Adapt AdamW WC"}
    # A warmup from exactly 0 made D-Adaptation's first estimate 0 / 0 (NaN losses).
    for row in rows.values():
        assert float(row["final_train"]) < float("inf") and float(row["final_valid"]) > 0
    # Ten classes: log 10 = 2.30 at chance; D-Adaptation has moved below it in 80 steps.
    assert float(rows["D-Adapt AdamW WC"]["final_train"]) < 2.2


def test_grid_rms_decay_names_and_changes_the_warmup_cosine_grid(repo_script, tmp_path):
    module = repo_script("benchmarks/schedule_shapes.py")
    out = tmp_path / "out"
    argv = ["--tasks", "ImageMLP_Digits8_Relu32", "--steps", "20", "--seeds", "1"]
    assert module.main([*argv, "--groups", "grid", "--out", str(out / "a")]) == 0
    argv += ["--groups", "grid", "--grid-rms-decay", "0.9", "--out", str(out / "b")]
    assert module.main(argv) == 0
    a, b = (
        {
            r["variant"]: float(r["final_train"])
            for r in csv.DictReader(open(out / x / "schedule_shapes.csv"))
        }
        for x in ("a", "b")
    )
    assert set(b) == {f"WC {rate:g} b2=0.9" for rate in module.GRID}
    assert all(b[f"{name} b2=0.9"] != a[name] for name in a)


def test_custom_group_builds_celoadam_from_json_and_the_release_config_is_the_release(
    repo_script, tmp_path
):
    module = repo_script("benchmarks/schedule_shapes.py")
    out = tmp_path / "out"
    argv = ["--tasks", "ImageMLP_Digits8_Relu32", "--steps", "20", "--seeds", "1"]
    argv += ["--groups", "celo,custom", "--celoadam", "same={}", "--out", str(out)]
    argv += ["--celoadam", 'b2=0.9={"initial_rms_decays": [0.9], "weight_decay": 0.3}']
    assert module.main(argv) == 0
    train = {
        r["variant"]: float(r["final_train"])
        for r in csv.DictReader(open(out / "schedule_shapes.csv"))
    }
    assert set(train) == {"CeloAdam", "same", "b2=0.9"}
    assert train["same"] == train["CeloAdam"]
    assert train["b2=0.9"] != train["CeloAdam"]


@pytest.mark.parametrize(
    "value, match",
    [
        ("nameless", "expected NAME=JSON"),
        ("x={bad", "--celoadam x: not JSON"),
        ("x=[1]", "--celoadam x: expected a JSON object"),
        ('x={"no_such_argument": 1}', "--celoadam x: "),
        ('x={"initial_rms_decays": [1.5]}', "--celoadam x: "),
    ],
)
def test_bad_custom_variants_are_errors_naming_them(repo_script, capsys, value, match):
    module = repo_script("benchmarks/schedule_shapes.py")
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--celoadam", value])
    assert exit_info.value.code == 2
    assert match in capsys.readouterr().err


def test_groups_that_share_a_variant_train_it_once(repo_script):
    module = repo_script("benchmarks/schedule_shapes.py")
    names = [s.name for s in module.variants(0.0316, ("frontier", "grid"))]
    assert len(names) == len(set(names))
    assert "WC 0.01" in names and "Adam 0.01" in names
    # Each variant where it first came: frontier's, then the rest of the grid.
    assert names.index("Adam 0.01") < names.index("WC 0.01") < names.index("WC 0.1")
