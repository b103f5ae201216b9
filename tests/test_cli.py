"""Tests for the ``learnopt`` command line (learnopt.cli)."""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from learnopt import checkpoints, cli, train
from learnopt.run import build as run_build
from learnopt.tasks.datasets import base as datasets_base

STEPS = 30
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ALL_FLAGS = (
    "--recipe",
    "--task",
    "--lopt",
    "--trainer",
    "--steps",
    "--trunc-length",
    "--total-length",
    "--num-tasks",
    "--std",
    "--outer-lr",
    "--max-grad-norm",
    "--seed",
    "--out",
    "--data-dir",
    "--log-every",
    "--checkpoint-every",
    "--keep-checkpoints",
    "--health-window",
    "--resume",
    "--overwrite",
    "--no-plots",
    "--quiet",
    "--tensorboard",
    # the recipe (tests/test_recipe.py)
    "--family",
    "--family-balance",
    "--lopt-arg",
    "--init-theta",
    "--freeze",
    "--eval-every",
    "--eval-tasks",
    "--eval-suite",
    "--eval-steps",
    "--eval-seeds",
    "--eval-at-start",
    "--eval-select",
    # several processes (tests/test_distributed.py)
    "--coordinator",
    "--num-processes",
    "--process-id",
    "--distributed",
    "--init-timeout",
    "--peer-timeout",
    "--all-devices",
    # the meta-objective (tests/test_meta_objective.py)
    "--meta-loss-split",
    "--meta-loss-weighting",
    "--meta-loss-window",
    "--meta-loss-power",
    "--meta-loss-transform",
)


@pytest.fixture(scope="session")
def data_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli_data")
    (root / "manual").mkdir()
    return root


@pytest.fixture(autouse=True)
def data_env(data_root, monkeypatch):
    """Data in a session tmp dir (never the home dir); an empty manual dir."""
    monkeypatch.setenv(datasets_base.ENV_DATA_DIR, str(data_root / "data"))
    monkeypatch.setenv(datasets_base.ENV_MANUAL_DIR, str(data_root / "manual"))


def _run(argv, monkeypatch):
    """Runs ``main(argv)`` in-process; returns (exit code, MetaTrainResult or None)."""
    results = []
    original = train.meta_train

    def capture(**kwargs):
        results.append(original(**kwargs))
        return results[-1]

    monkeypatch.setattr(train, "meta_train", capture)
    code = cli.main(argv)
    return code, (results[0] if results else None)


def _read_csv(path: Path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def _check_png(path: Path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, path
    import matplotlib.image

    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


@pytest.mark.parametrize(
    "trainer, extra",
    [
        ("full_grad", []),
        ("pes", ["--trunc-length", "5", "--total-length", "20", "--num-tasks", "4"]),
    ],
)
def test_meta_train_writes_everything(trainer, extra, tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    argv = ["meta-train", "--trainer", trainer, "--steps", str(STEPS), "--out", str(out)]
    argv += ["--log-every", "7", "--checkpoint-every", "10", "--keep-checkpoints", "2", *extra]
    saves = []
    save = checkpoints.save_theta
    monkeypatch.setattr(
        checkpoints, "save_theta", lambda p, t, **kw: saves.append(p) or save(p, t, **kw)
    )
    code, result = _run(argv, monkeypatch)
    assert code == 0
    stdout = capsys.readouterr().out
    summary = stdout.strip().splitlines()[-1]
    assert f"LearnableAdam on ImageMLP_Digits8_Relu32 ({trainer}): meta-loss" in summary
    assert f"{STEPS} steps (" in summary

    files = sorted(p.name for p in out.iterdir())
    assert files == [
        "checkpoints",
        "config.json",
        "learning_rate.png",
        "meta_loss.png",
        "metrics.csv",
        "theta.msgpack",
    ]
    assert len(saves) == 3  # with the checkpoints of steps 10, 20 and 30 (the end)
    # The last two checkpoints are kept, named by their step.
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [
        "step_00000020",
        "step_00000030",
    ]
    config = json.loads((out / "config.json").read_text())
    assert config["trainer"] == trainer and config["steps"] == STEPS
    assert config["num_tasks"] == (1 if trainer == "full_grad" else 4)

    header, rows = _read_csv(out / "metrics.csv")
    theta_cols = [
        "theta/log_epsilon",
        "theta/log_lr",
        "theta/one_minus_beta1",
        "theta/one_minus_beta2",
    ]
    assert header == list(train.BASE_COLUMNS) + theta_cols
    assert len(rows) == STEPS
    assert [int(r[0]) for r in rows] == list(range(1, STEPS + 1))
    values = np.asarray([[float(x) for x in r] for r in rows])
    col = {name: values[:, i] for i, name in enumerate(header)}
    assert np.all(np.isfinite(col["meta_loss"]))
    assert np.all(col["meta_loss"] > 0)
    assert np.all(col["num_nonfinite"] == 0)
    assert np.all(col["finite"] == 1) and np.all(col["skipped"] == 0)
    assert np.all(col["update_norm"] > 0)
    np.testing.assert_allclose(col["learning_rate"], np.exp(col["theta/log_lr"]), rtol=1e-6)
    assert col["learning_rate"][-1] != col["learning_rate"][0]  # theta was trained

    # The saved theta is the learner's final theta, bit for bit, and matches the CSV.
    loaded = checkpoints.load_theta(out / "theta.msgpack")
    assert sorted(loaded) == ["log_epsilon", "log_lr", "one_minus_beta1", "one_minus_beta2"]
    for name, value in loaded.items():
        assert value.dtype == np.float32
        assert float(value) == float(np.asarray(result.theta[name]))
        assert float(value) == col[f"theta/{name}"][-1]
    np.testing.assert_array_equal(result.columns["meta_loss"], col["meta_loss"])

    _check_png(out / "meta_loss.png")
    _check_png(out / "learning_rate.png")


def test_summary_window_and_no_plots(tmp_path, monkeypatch, capsys):
    out = tmp_path / "q"
    argv = ["meta-train", "--task", "QuadraticTask", "--steps", "3", "--out", str(out)]
    code, result = _run([*argv, "--no-plots", "--quiet", "--max-grad-norm", "0.5"], monkeypatch)
    assert code == 0
    assert not list(out.glob("*.png"))
    assert "(mean of the first/last 1 step)" in capsys.readouterr().out
    _, rows = _read_csv(out / "metrics.csv")
    assert len(rows) == 3


def test_data_dir_flag_is_passed_down_not_written_to_the_environment(tmp_path, monkeypatch):
    before = os.environ[datasets_base.ENV_DATA_DIR]
    data_dir = tmp_path / "own_data"
    seen = []
    original = datasets_base.load_split_arrays

    def spy(*args, **kwargs):
        seen.append(os.environ[datasets_base.ENV_DATA_DIR])
        return original(*args, **kwargs)

    monkeypatch.setattr(datasets_base, "load_split_arrays", spy)
    argv = ["meta-train", "--steps", "1", "--no-plots", "--quiet", "--data-dir", str(data_dir)]
    code, _ = _run([*argv, "--out", str(tmp_path / "o"), "--total-length", "1"], monkeypatch)
    assert code == 0
    assert (data_dir / "learnopt_digits8").is_dir()  # prepared where --data-dir says
    assert seen == [before]  # loading happened with the environment untouched
    assert os.environ[datasets_base.ENV_DATA_DIR] == before


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--task", "NoSuchTask"], "Unknown task 'NoSuchTask'"),
        (["--task", "ImageMLP_Digits8_Relu3"], "did you mean 'ImageMLP_Digits8_Relu32'"),
        (["--lopt", "Adamm"], "Unknown learned optimizer 'Adamm'"),
        (["--steps", "0"], "argument --steps: must be >= 1, got 0"),
        (["--steps", "-5"], "argument --steps: must be >= 1, got -5"),
        (["--seed", "-1"], "argument --seed: must be an integer in [0, 2**32), got -1"),
        (["--seed", str(2**32)], "argument --seed: must be an integer in [0, 2**32)"),
        (["--keep-checkpoints", "0"], "argument --keep-checkpoints: must be >= 1, got 0"),
        (["--health-window", "-1"], "argument --health-window: must be >= 0"),
        (["--resume", "x", "--overwrite"], "--resume and --overwrite exclude each other"),
        (["--steps", "many"], "argument --steps: expected an integer, got 'many'"),
        (["--trunc-length", "0"], "argument --trunc-length: must be >= 1, got 0"),
        (["--unroll", "4"], "--unroll was renamed: use --trunc-length K"),
        (["--trunc-length", "3"], "full_grad unrolls whole inner runs: set their length with"),
        (["--num-tasks", "0"], "argument --num-tasks: must be >= 1, got 0"),
        (["--trainer", "sgd"], "argument --trainer: invalid choice: 'sgd'"),
        (["--std", "0"], "argument --std: must be a finite number > 0"),
        (["--outer-lr=-1e-3"], "argument --outer-lr: must be a finite number > 0"),
        (["--max-grad-norm", "inf"], "argument --max-grad-norm: must be a finite number > 0"),
        (["--log-every", "0"], "argument --log-every: must be >= 1"),
        (["--family-balance", "max"], "argument --family-balance: invalid choice: 'max'"),
        (["--checkpoint-every", "-1"], "argument --checkpoint-every: must be >= 0"),
        (
            ["--trainer", "pes", "--trunc-length", "300"],
            "--trunc-length (300, steps per estimate) must be <= --total-length (200",
        ),
    ],
)
def test_bad_input_exits_2_with_message(argv, message, tmp_path, capsys):
    out = tmp_path / "never"
    with pytest.raises(SystemExit) as exc:
        cli.main(["meta-train", *argv, "--out", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "learnopt meta-train: error:" in err
    assert message in err
    assert "Traceback" not in err
    assert not out.exists()


_OPT = ["--optimizer", "Adam", "--lr", "1e-3"]


@pytest.mark.parametrize(
    "argv, flag, match",
    [
        (["meta-train", "--task", "ImageMLP_Digits8_Relu3"], "--task", "ImageMLP_Digits8_Relu32"),
        (["meta-train", "--task", "imagemlp_digits8_relu32"], "--task", "ImageMLP_Digits8_Relu32"),
        (
            ["meta-train", "--family", "MetaTrain_MLP_Digit8_32"],
            "--family",
            "MetaTrain_MLP_Digits8_32",
        ),
        (["meta-train", "--lopt", "mlplopt"], "--lopt", "MLPLOpt"),
        (["meta-train", "--eval-every", "5", "--eval-suite", "heldot"], "--eval-suite", "heldout"),
        (
            ["meta-train", "--eval-every", "5", "--eval-tasks", "QuadraticTsk"],
            "--eval-tasks",
            "QuadraticTask",
        ),
        (["evaluate", "--optimizer", "adam", "--lr", "1e-3"], "--optimizer", "Adam"),
        (["evaluate", *_OPT, "--tasks", "QuadraticTsk"], "--tasks", "QuadraticTask"),
        (["evaluate", *_OPT, "--suite", "heldot"], "--suite", "heldout"),
        (["evaluate", *_OPT, "--baselines", "Adma"], "--baselines", "Adam"),
    ],
)
def test_unknown_names_are_one_short_line_with_the_closest_match(
    argv, flag, match, tmp_path, capsys
):
    out = tmp_path / "never"
    with pytest.raises(SystemExit) as exc:
        cli.main([*argv, "--out", str(out)])
    assert exc.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    prefix = f"learnopt {argv[0]}: error: {flag}: Unknown "
    assert lines[0].startswith(prefix) and len(lines) == 2, lines  # the error comes first
    message = lines[0].removeprefix(f"learnopt {argv[0]}: error: ")
    assert f"did you mean '{match}'" in message  # the closest match comes first
    assert len(message) < 300
    assert not out.exists()


def test_list_topic_prints_one_name_per_line(capsys):
    from learnopt.evaluation import suites
    from learnopt.tasks import base as tasks_base

    assert cli.main(["list", "tasks"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "ImageMLP_Digits8_Relu32" in lines and lines == tasks_base.TASKS.names()
    # The count an unknown name's message gives is what the listing prints.
    with pytest.raises(KeyError, match=f"'learnopt list tasks' shows all {len(lines)}\\)"):
        tasks_base.get_task("NoSuchTask")
    assert cli.main(["list", "suites"]) == 0
    rows = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert rows["heldout"] == f"{len(suites.get_suite('heldout'))} tasks"
    assert set(rows) == set(suites.suite_names())
    from learnopt import recipes

    assert cli.main(["list", "recipes"]) == 0
    rows = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert set(rows) == set(recipes.recipe_names())
    assert all(rows[n] == recipes.get_recipe(n).description for n in rows)


def test_out_is_a_file(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(SystemExit) as exc:
        cli.main(["meta-train", "--out", str(target), "--steps", "1"])
    assert exc.value.code == 2
    assert "is not a directory" in capsys.readouterr().err


def test_missing_dataset_gives_the_dataset_error(tmp_path, capsys):
    out = tmp_path / "fm"
    with pytest.raises(SystemExit) as exc:
        cli.main(["meta-train", "--task", "ImageMLP_FashionMnist8_Relu32", "--out", str(out)])
    assert exc.value.code == 1
    err = capsys.readouterr().err
    assert "learnopt meta-train: error: task ImageMLP_FashionMnist8_Relu32 needs data" in err
    assert "'fashion_mnist' is not available" in err
    assert "Traceback" not in err
    assert not out.exists()


def test_no_command_is_an_error(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([])
    assert exc.value.code == 2
    assert "COMMAND" in capsys.readouterr().err


def test_list_into_a_closed_pipe_ends_quietly():
    """``learnopt list tasks | head -1``: the reader stops early; no BrokenPipeError.

    The read end is closed before the listing is written, so every write meets it closed.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "learnopt", "list", "tasks"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0, err
    assert "Error" not in err and "Traceback" not in err, err


def test_a_name_given_twice_in_a_list_flag_is_an_error():
    from learnopt.cli import args as cli_args

    assert cli_args.name_list("A, B") == ("A", "B")
    with pytest.raises(argparse.ArgumentTypeError, match="T given twice"):
        cli_args.name_list("T,T")


def test_help_lists_every_flag(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["meta-train", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    parser = cli.build_parser()
    sub = parser._subparsers._group_actions[0].choices["meta-train"]
    declared = {
        s
        for a in sub._actions
        if a.help != argparse.SUPPRESS  # --unroll: only an error naming its replacements
        for s in a.option_strings
        if s.startswith("--")
    }
    assert declared == set(ALL_FLAGS) | {"--help"}
    for flag in declared:
        assert flag in text, flag
    for trainer in cli.TRAINERS:
        assert trainer in text
    assert "default: 2000" in text and "default: 4" in text and "default: 50" in text

    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for word in ("meta-train", "list", "--version", "--help"):
        assert word in text


def test_list(capsys):
    assert cli.main(["list"]) == 0
    text = capsys.readouterr().out
    for name in ("ImageMLP_Digits8_Relu32", "QuadraticTask", *cli.LOPTS, *cli.TRAINERS):
        assert name in text


def test_console_script_and_module(tmp_path):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    script = shutil.which("learnopt") or str(Path(sys.executable).with_name("learnopt"))
    assert Path(script).exists(), "the learnopt console script is not installed"
    for cmd in ([script, "meta-train", "--help"], [sys.executable, "-m", "learnopt", "--help"]):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "meta-train" in proc.stdout
    assert (
        "--checkpoint-every"
        in subprocess.run(
            [script, "meta-train", "--help"], capture_output=True, text=True, env=env
        ).stdout
    )
    proc = subprocess.run(
        [sys.executable, "-m", "learnopt", "meta-train", "--task", "Nope"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "Unknown task 'Nope'" in proc.stderr and "Traceback" not in proc.stderr


def test_help_does_not_import_jax():
    code = "import sys; from learnopt import cli; cli.build_parser(); print('jax' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "False", proc.stderr


def _interrupt_at(monkeypatch, call, action):
    """Makes the learner's ``call``-th update run ``action`` (raise, or send a signal)."""
    build = run_build.build_learner

    def build_interrupting(*args, **kwargs):
        learner = build(*args, **kwargs)
        update, calls = learner.update, []

        def update_or_interrupt(state, key):
            calls.append(1)
            if len(calls) == call:
                action()
            return update(state, key)

        learner.update = update_or_interrupt
        return learner

    monkeypatch.setattr(run_build, "build_learner", build_interrupting)


QUAD = ["meta-train", "--task", "QuadraticTask", "--quiet", "--log-every", "5"]


def test_second_ctrl_c_stops_at_once_keeping_finished_steps(tmp_path, monkeypatch, capsys):
    def ctrl_c():
        raise KeyboardInterrupt

    _interrupt_at(monkeypatch, 13, ctrl_c)
    out = tmp_path / "int"
    code, result = _run([*QUAD, "--steps", "30", "--out", str(out)], monkeypatch)
    assert code == 130
    assert result.interrupted and result.step == 12
    assert "interrupted after step 12 of 30" in capsys.readouterr().err
    header, rows = _read_csv(out / "metrics.csv")
    assert len(rows) == 12
    assert not (out / "theta.msgpack").exists()  # no checkpoint was due yet


def test_sigint_checkpoints_then_resume_finishes_the_run(tmp_path, monkeypatch, capsys):
    import signal

    _interrupt_at(monkeypatch, 13, lambda: os.kill(os.getpid(), signal.SIGINT))
    out = tmp_path / "sig"
    code, result = _run([*QUAD, "--steps", "30", "--out", str(out)], monkeypatch)
    assert code == 130
    assert result.status == "interrupted" and result.step == 13
    assert "SIGINT received" in capsys.readouterr().err
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_00000013"]
    header, rows = _read_csv(out / "metrics.csv")
    assert len(rows) == 13
    loaded = checkpoints.load_theta(out / "theta.msgpack")
    assert float(loaded["log_lr"]) == float(rows[-1][header.index("theta/log_lr")])

    monkeypatch.undo()
    monkeypatch.setattr(train, "meta_train", train.meta_train)
    code, resumed = _run(["meta-train", "--resume", str(out), "--quiet"], monkeypatch)
    assert code == 0 and resumed.step == 30
    _, rows = _read_csv(out / "metrics.csv")
    assert [int(r[0]) for r in rows] == list(range(1, 31))


def test_out_holding_a_run_is_refused_without_resume_or_overwrite(tmp_path, monkeypatch, capsys):
    out = tmp_path / "done"
    code, _ = _run([*QUAD, "--steps", "3", "--out", str(out), "--no-plots"], monkeypatch)
    assert code == 0
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    theta = (out / "theta.msgpack").read_bytes()
    with pytest.raises(SystemExit) as exc:
        cli.main([*QUAD, "--steps", "3", "--out", str(out), "--seed", "1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "already holds a meta-training run" in err
    assert "--resume DIR" in err and "--overwrite" in err
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before
    assert (out / "theta.msgpack").read_bytes() == theta

    code, result = _run([*QUAD, "--steps", "2", "--out", str(out), "--overwrite"], monkeypatch)
    assert code == 0 and result.step == 2
    _, rows = _read_csv(out / "metrics.csv")
    assert len(rows) == 2
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step_00000002"]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, data_root):
    """A finished 3-step run (the tests that use it must leave it unchanged)."""
    out = tmp_path_factory.mktemp("finished") / "r"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(datasets_base.ENV_DATA_DIR, str(data_root / "data"))
        assert cli.main([*QUAD, "--steps", "3", "--out", str(out), "--no-plots"]) == 0
    return out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--seed", "5"], "--resume: --seed=5 differs from the run's --seed=0"),
        (["--steps", "1"], "--steps must be >= the step of the run's latest checkpoint (3)"),
        (["--out", "elsewhere"], "--resume DIR continues the run in DIR"),
    ],
)
def test_resume_keeps_the_runs_settings(extra, message, finished_run, capsys):
    before = {p.name: p.stat().st_mtime_ns for p in finished_run.iterdir()}
    with pytest.raises(SystemExit) as exc:
        cli.main(["meta-train", "--resume", str(finished_run), *extra])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert {p.name: p.stat().st_mtime_ns for p in finished_run.iterdir()} == before


def test_resume_of_a_folder_without_a_run(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for target, message in (
        (tmp_path / "empty", "holds no run to resume (no config.json)"),
        (tmp_path / "missing", "there is no run at"),
    ):
        with pytest.raises(SystemExit) as exc:
            cli.main(["meta-train", "--resume", str(target)])
        assert exc.value.code == 2
        assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, first_line",
    [
        (["evaluate", "--stepz", "3"], "unrecognized arguments: --stepz 3 (did you mean --steps?)"),
        (["meta-train", "--outer-lrr", "1"], "(did you mean --outer-lr?)"),
        (["meta-train", "--lop", "MLPLOpt"], "ambiguous option: --lop could match --lopt"),
        (["list", "nope"], "argument TOPIC: invalid choice: 'nope'"),
    ],
)
def test_a_usage_error_is_its_line_then_where_the_flags_are(argv, first_line, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and "usage:" not in lines[0], lines
    assert lines[0].startswith(f"learnopt {argv[0]}: error: ") and first_line in lines[0]
    assert lines[1] == f"run 'learnopt {argv[0]} --help' for the flags"


def test_help_shows_flag_metavars_not_internal_destinations():
    import re

    for command in ("meta-train", "evaluate"):
        text = cli.build_parser()._subparsers._group_actions[0].choices[command].format_help()
        assert not re.search(r"\b[A-Z][A-Za-z]+\.[A-Z_]+\b", text), command
        assert "--std STD" in text or command == "evaluate"
