"""Tests for ``learnopt evaluate`` (learnopt.cli.evaluate, learnopt.evaluation.command), run
in-process on data-free tasks."""

from __future__ import annotations

import csv
import json

import jax
import pytest

from learnopt import checkpoints, cli
from learnopt.cli import args as cli_args
from learnopt.evaluation import config as eval_config
from learnopt.learned_optimizers import base as lopt_base
from learnopt.tasks.datasets import base as datasets_base

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
STEPS, SEEDS = 6, 2
# Small and data-free: a sweep of SGD over two learning rates on the quadratic.
FAST = [
    "--tasks",
    "QuadraticTask",
    "--baselines",
    "SGD",
    "--lrs",
    "0.01,0.3",
    "--steps",
    str(STEPS),
    "--seeds",
    str(SEEDS),
    "--eval-every",
    "3",
    "--quiet",
]


@pytest.fixture(autouse=True)
def data_env(tmp_path_factory, monkeypatch):
    root = tmp_path_factory.mktemp("eval_cli_data")
    monkeypatch.setenv(datasets_base.ENV_DATA_DIR, str(root / "data"))
    monkeypatch.setenv(datasets_base.ENV_MANUAL_DIR, str(root / "manual"))


def _rows(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return rows


@pytest.fixture(scope="module")
def adam_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("adam_run") / "out"
    code = cli.main(["evaluate", "--optimizer", "Adam", "--lr", "0.05", "--out", str(out), *FAST])
    return code, out


def test_evaluate_writes_every_output(adam_run, capsys):
    code, out = adam_run
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "config.json",
        "curves.csv",
        "curves.npz",
        "curves_QuadraticTask.png",
        "summary.csv",
        "summary.md",
        "sweep.csv",
    ]
    summary = _rows(out / "summary.csv")
    assert [(r["optimizer"], r["role"]) for r in summary] == [
        ("Adam(lr=0.05)", "candidate"),
        ("SGD", "best baseline"),
    ]
    assert summary[1]["learning_rate"] == "0.3" and summary[1]["at_edge"] == "1"
    assert float(summary[0]["final_train"]) > 0
    sweep = _rows(out / "sweep.csv")
    assert [(r["learning_rate"], r["selected"]) for r in sweep] == [("0.01", "0"), ("0.3", "1")]
    curves = _rows(out / "curves.csv")
    # (candidate + tuned SGD) x seeds x (train steps + valid points at 0, 3, 6)
    assert len(curves) == 2 * SEEDS * (STEPS + 3)
    assert {r["split"] for r in curves} == {"train", "outer_valid"}
    assert (out / "curves_QuadraticTask.png").read_bytes()[:8] == PNG_MAGIC
    config = json.loads((out / "config.json").read_text())
    assert config["candidate"] == "Adam(lr=0.05)" and config["tasks"] == ["QuadraticTask"]
    assert config["settings"]["learning_rates"] == {"SGD": [0.01, 0.3]}
    assert "| QuadraticTask |" in (out / "summary.md").read_text()


def test_evaluate_never_overwrites_without_the_flag(adam_run, capsys):
    _, out = adam_run
    before = (out / "summary.csv").read_bytes()
    argv = ["evaluate", "--optimizer", "SGD", "--lr", "0.1", "--out", str(out), *FAST]
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (out / "summary.csv").read_bytes() == before
    cache = out.parent / "cache"
    assert cli.main([*argv, "--overwrite", "--baseline-cache", str(cache)]) == 0
    assert len(list(cache.glob("QuadraticTask__SGD__*.npz"))) == 1
    assert _rows(out / "summary.csv")[0]["optimizer"] == "SGD(lr=0.1)"


def test_theta_and_its_learned_optimizer_from_a_meta_train_folder(tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["meta-train", "--task", "QuadraticTask", "--steps", "5", "--out", str(run)]
    assert cli.main([*argv, "--quiet", "--no-plots"]) == 0
    assert json.loads((run / "config.json").read_text())["lopt"] == "LearnableAdam"
    out = tmp_path / "eval"
    argv = ["evaluate", "--theta", str(run / "theta.msgpack"), "--out", str(out), *FAST]
    assert cli.main(argv) == 0
    assert _rows(out / "summary.csv")[0]["optimizer"] == "LearnableAdam"
    assert json.loads((out / "config.json").read_text())["lopt"] == "LearnableAdam"
    assert "LearnableAdam vs tuned baselines" in capsys.readouterr().out


def test_a_shipped_entry_is_evaluated_by_its_name(tmp_path):
    from learnopt.evaluation import command

    lopt, theta = command.load_learned_candidate("MLPLOpt_mlp8k")
    assert type(lopt).__name__ == "MLPLOpt"
    assert jax.tree.structure(theta) == jax.tree.structure(lopt.init(jax.random.PRNGKey(0)))
    # A file of that name in the working folder would win: a path is never a name.
    with pytest.raises(command.EvalError, match=r"no shipped entry of that name \(entries: Celo"):
        command.load_learned_candidate(str(tmp_path / "MLPLOpt_mlp8k"))


def _error(argv, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    return e.value.code, capsys.readouterr().err


def test_bad_theta_files_get_clear_errors(tmp_path, capsys):
    base = ["evaluate", "--out", str(tmp_path / "out"), *FAST]
    missing = tmp_path / "missing.msgpack"
    code, err = _error([*base, "--theta", str(missing), "--lopt", "LearnableAdam"], capsys)
    assert code == 2 and f"no theta file at {missing}" in err

    corrupt = tmp_path / "corrupt.msgpack"
    corrupt.write_bytes(b"\xc1 this is not msgpack")
    code, err = _error([*base, "--theta", str(corrupt), "--lopt", "LearnableAdam"], capsys)
    assert code == 1 and str(corrupt) in err
    assert "expected a msgpack theta of LearnableAdam" in err and "log_lr []" in err

    other = tmp_path / "sgd" / "theta.msgpack"
    checkpoints.save_theta(other, lopt_base.LearnableSGDM().init(jax.random.PRNGKey(0)))
    (other.parent / "config.json").write_text(json.dumps({"lopt": "LearnableAdam"}))
    code, err = _error([*base, "--theta", str(other)], capsys)
    assert code == 1 and f"{other} does not hold a theta of LearnableAdam" in err
    assert "one_minus_momentum" in err

    lone = tmp_path / "lone.msgpack"
    checkpoints.save_theta(lone, lopt_base.LearnableSGD().init(jax.random.PRNGKey(0)))
    code, err = _error([*base, "--theta", str(lone)], capsys)
    assert code == 2 and "--lopt is needed" in err

    code, err = _error([*base, "--theta", str(lone), "--lopt", "LearnableAdamm"], capsys)
    assert code == 2 and "did you mean 'LearnableAdam'" in err


def test_candidate_flags_must_agree(tmp_path, capsys):
    base = ["evaluate", "--out", str(tmp_path / "out"), *FAST]
    assert "--optimizer needs --lr" in _error([*base, "--optimizer", "Adam"], capsys)[1]
    assert "--theta PATH" in _error(base, capsys)[1]
    code, err = _error([*base, "--optimizer", "Adam", "--lr", "0.1", "--suite", "smoke"], capsys)
    assert code == 2 and "not both" in err
    argv = [*base, "--optimizer", "SGD", "--lr", "0.1", "--no-baseline-cache"]
    code, err = _error([*argv, "--baseline-cache", str(tmp_path / "c")], capsys)
    assert code == 2 and "--baseline-cache and --no-baseline-cache exclude each other" in err
    assert (
        "Unknown task"
        in _error([*base[:3], "--tasks", "Nope", "--optimizer", "SGD", "--lr", "0.1"], capsys)[1]
    )


def test_help_lists_the_evaluate_command(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "evaluate    evaluate a learned optimizer" in capsys.readouterr().out


def test_flags_are_the_evaluate_configuration():
    parser = cli.build_parser()
    args = parser.parse_args(["evaluate"])
    assert cli_args.given(args, eval_config.EvaluateConfig) == {}  # defaults stay unset
    argv = ["evaluate", "--steps", "7", "--tasks", "A,B", "--lrs", "0.1,1", "--no-plots"]
    given = cli_args.given(parser.parse_args([*argv, "--quiet"]), eval_config.EvaluateConfig)
    assert eval_config.EvaluateConfig(**given) == eval_config.EvaluateConfig(
        steps=7, tasks=("A", "B"), lrs=(0.1, 1.0), plots=False, quiet=True
    )
    defaults = eval_config.EvaluateConfig()
    assert (defaults.steps, defaults.seeds, defaults.select_by) == (1000, 3, "final")
    assert (defaults.valid_split, defaults.valid_batches, defaults.seed) == ("outer_valid", 5, 0)


def test_the_default_baseline_cache_follows_xdg(monkeypatch, tmp_path):
    from learnopt.evaluation import cache

    monkeypatch.setenv(cache.ENV_CACHE_DIR, str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.default_cache_dir() == tmp_path / "mine" / "baselines"
    monkeypatch.delenv(cache.ENV_CACHE_DIR)
    assert cache.default_cache_dir() == tmp_path / "xdg" / "learnopt" / "baselines"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # ignored, as XDG says
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.default_cache_dir() == tmp_path / "home" / ".cache" / "learnopt" / "baselines"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.default_cache_dir() == tmp_path / "home" / ".cache" / "learnopt" / "baselines"


def _count_trained(monkeypatch):
    """Every sweep the evaluation trains, as ``(task, sweep name, runs)``."""
    from learnopt.evaluation import runner

    trained = []

    class Counting(runner.TaskEvaluator):
        def __init__(self, task, sweeps, **kwargs):
            super().__init__(task, sweeps, **kwargs)
            for s in self.sweeps:
                trained.append((task.name, s.name, s.size * self.num_seeds))

    monkeypatch.setattr(runner, "TaskEvaluator", Counting)
    return trained


def test_a_killed_run_keeps_its_finished_tasks_and_a_rerun_reuses_their_baselines(
    tmp_path, monkeypatch, capsys
):
    from learnopt import tensorboard
    from learnopt.evaluation import cache, runner

    out = tmp_path / "out"
    argv = ["evaluate", "--optimizer", "Adam", "--lr", "0.05", "--out", str(out), *FAST]
    argv[argv.index("QuadraticTask")] = "QuadraticTask,SumQuadraticTask"
    trained = _count_trained(monkeypatch)
    train_task, calls = runner._train_task, []

    def killed_on_the_second_task(*args, **kwargs):
        calls.append(args[0].name)
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C while the second task trains
        return train_task(*args, **kwargs)

    monkeypatch.setattr(runner, "_train_task", killed_on_the_second_task)
    assert cli.main(argv) == 130
    assert calls == ["QuadraticTask", "SumQuadraticTask"]
    rows = _rows(out / "summary.csv")
    assert [(r["task"], r["optimizer"]) for r in rows] == [
        ("QuadraticTask", "Adam(lr=0.05)"),
        ("QuadraticTask", "SGD"),
    ]
    assert {r["task"] for r in _rows(out / "curves.csv")} == {"QuadraticTask"}
    assert (out / "summary.md").read_text().startswith("Partial: 1 of 2 tasks done.")
    assert (out / "curves_QuadraticTask.png").read_bytes()[:8] == PNG_MAGIC
    config = json.loads((out / "config.json").read_text())
    cache_dir = cache.default_cache_dir()  # the test's own folder (tests/conftest.py)
    assert config["tasks_done"] == 1 and config["baseline_cache_dir"] == str(cache_dir)
    assert [p.name.split("__")[:2] for p in cache_dir.glob("*.npz")] == [["QuadraticTask", "SGD"]]
    assert trained == [
        ("QuadraticTask", "Adam(lr=0.05)", SEEDS),
        ("QuadraticTask", "SGD", 2 * SEEDS),
    ]

    # The same evaluation again: the first task's baselines come from the cache.
    monkeypatch.setattr(runner, "_train_task", train_task)
    trained.clear()
    board = tmp_path / "tb"
    assert cli.main([*argv, "--overwrite", "--tensorboard", str(board)]) == 0
    assert trained == [
        ("QuadraticTask", "Adam(lr=0.05)", SEEDS),
        ("SumQuadraticTask", "Adam(lr=0.05)", SEEDS),
        ("SumQuadraticTask", "SGD", 2 * SEEDS),
    ]
    rerun = _rows(out / "summary.csv")
    assert rerun[:2] == rows  # cached baselines and a retrained candidate: same numbers
    assert [r["task"] for r in rerun] == ["QuadraticTask"] * 2 + ["SumQuadraticTask"] * 2
    assert not (out / "summary.md").read_text().startswith("Partial")
    assert json.loads((out / "config.json").read_text())["tasks_done"] == 2

    # TensorBoard: one run per optimizer, the seed-mean curves of curves.csv.
    scalars = tensorboard.read_scalars(board / "Adam_lr_0.05_")
    for task in ("QuadraticTask", "SumQuadraticTask"):
        losses = [
            float(r["loss"])
            for r in _rows(out / "curves.csv")
            if r["task"] == task and r["optimizer"] == "Adam(lr=0.05)" and r["split"] == "train"
        ]
        mean = [sum(losses[s::STEPS][:SEEDS]) / SEEDS for s in range(STEPS)]
        got = scalars[f"train_loss/{task}"]
        assert [step for step, _ in got] == list(range(STEPS))
        assert [v for _, v in got] == pytest.approx(mean, rel=1e-6)
        assert f"summary/normalized_loss/{task}" in scalars
    assert [step for step, _ in scalars["suite/wins"]] == [1, 2]
    assert "train_loss/QuadraticTask" in tensorboard.read_scalars(board / "SGD")


def test_the_progress_bar_counts_training_runs_and_drops_cached_ones(capsys):
    from learnopt.evaluation import engine, runner, sweeps

    candidate, sgd = sweeps.lr_sweep("Adam", [0.1], name="cand"), sweeps.lr_sweep("SGD", [0.1, 1])
    settings = engine.training_settings(None, num_steps=10, num_seeds=3)
    bar = runner._RunsBar(["A", "B"], [candidate, sgd], settings)
    assert bar.bar.total == 2 * (1 + 2) * 3
    bar.start_task([candidate, sgd], [])
    bar.task_callback(3)  # 3 of the 10 steps of 9 runs: 2.7 runs, shown as 2 whole ones
    assert bar.bar.n == 2 and isinstance(bar.bar.n, int)
    for _ in range(7):
        bar.task_callback(1)
    assert bar.bar.n == 9
    bar.start_task([candidate], [sgd])  # task B: SGD from the cache
    assert bar.bar.total == 9 + 3
    bar.task_callback(10)
    assert bar.bar.n == pytest.approx(bar.bar.total)
    bar.close()
    err = capsys.readouterr().err
    assert "12/12 runs" in err and "<00:00" in err  # whole runs, and the ETA
    assert ".7/" not in err and ".0/" not in err
