"""The meta-training recipe: ``learnopt meta-train --lopt NAME --trainer pes --family ...``.

One tiny run (MLPLOpt of width 2 on two quadratic families, a few meta-steps, a periodic
evaluation on ``QuadraticTask``) shared by the tests through a module fixture, then a
resume of it; everything else checks settings without compiling.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from learnopt import cli, recipes, train
from learnopt.cli import args as cli_args
from learnopt.cli import meta_train as meta_train_cmd
from learnopt.evaluation import periodic
from learnopt.learned_optimizers import theta_files
from learnopt.run import build
from learnopt.run.config import RunConfig
from learnopt.tasks import suites
from learnopt.tasks.datasets import base as datasets_base

FAMILIES = ("FixedDimQuadraticFamily", "NoisyQuadraticFamily")
TINY = [
    "--lopt-arg", "hidden_size=2", "--lopt-arg", "hidden_layers=1",
    "--trunc-length", "2", "--total-length", "6", "--num-tasks", "2",
    "--log-every", "2", "--checkpoint-every", "0", "--no-plots", "--quiet",
]  # fmt: skip
EVAL = ["--eval-every", "2", "--eval-tasks", "QuadraticTask", "--eval-steps", "20"]


@pytest.fixture(autouse=True)
def data_env(tmp_path_factory, monkeypatch):
    monkeypatch.setenv(datasets_base.ENV_DATA_DIR, str(tmp_path_factory.getbasetemp() / "data"))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("recipe") / "run"
    argv = ["meta-train", "--lopt", "MLPLOpt", "--trainer", "pes", "--steps", "4"]
    argv += [x for f in FAMILIES for x in ("--family", f)] + TINY + EVAL
    argv = [a for a in argv if a != "--no-plots"] + ["--family-balance", "norm"]
    assert cli.main([*argv, "--out", str(out)]) == 0
    return out


def test_families_are_one_estimator_each_with_the_architecture_defaults(run):
    config = json.loads((run / "config.json").read_text())
    assert config["families"] == list(FAMILIES) and config["task"] is None
    # The recipe's MLPLOpt defaults, updated by --lopt-arg.
    expected = {**recipes.LOPT_DEFAULTS["MLPLOpt"], "hidden_size": 2, "hidden_layers": 1}
    assert config["lopt_config"] == expected
    # Training settings not given on the command line come from the recipe.
    defaults = recipes.TRAINING_DEFAULTS["MLPLOpt"]
    assert config["outer_lr"] == defaults["outer_lr"]
    assert config["max_grad_norm"] == defaults["max_grad_norm"]
    assert config["std"] == defaults["std"]
    assert config["trunc_length"] == 2 and config["total_length"] == 6  # given ones win
    assert config["family_balance"] == "norm"
    learner = build.build_learner(task=list(FAMILIES), lopt="MLPLOpt", family_balance="norm")
    assert (
        learner.balance == "norm"
        and build.build_learner(task=list(FAMILIES), lopt="MLPLOpt").balance == "mean"
    )


def test_metrics_csv_has_each_familys_meta_loss_and_estimate_norm(run):
    with open(run / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4
    for row in rows:
        family_losses = [float(row[f"{i}_TruncatedPES/meta_loss"]) for i in range(2)]
        # the run's meta-loss is the mean of its families'
        np.testing.assert_allclose(float(row["meta_loss"]), np.mean(family_losses), rtol=1e-5)
        assert all(float(row[f"{i}_TruncatedPES/grad_norm"]) > 0 for i in range(2))
        # balanced: the combined estimate is the mean of two unit vectors, so at most 1
        assert float(row["grad_norm"]) <= 1.0 + 1e-5
    assert (run / "families.png").stat().st_size > 0  # and they are drawn


def test_the_run_theta_file_rebuilds_its_optimizer(run):
    trained = theta_files.load(run / "theta.msgpack")
    assert trained.lopt.hidden_size == 2 and trained.lopt.step_mult == 0.01
    md = trained.metadata["meta_training"]
    assert md["families"] == list(FAMILIES) and md["estimators"] == list(FAMILIES)
    assert md["trainer"] == "pes" and md["step"] == 4


def test_eval_every_keeps_the_best_theta_by_the_periodic_score(run):
    rows = periodic.read_eval_csv(run / "eval.csv")  # steps 2, 4 (and 6 once resumed)
    scores = {r["step"]: periodic.eval_score([r]) for r in rows}
    best = theta_files.load(run / periodic.BEST_THETA_FILE)
    md = best.metadata["meta_training"]
    assert md["step"] == min(scores, key=scores.__getitem__)
    assert md["score"] == pytest.approx(min(scores.values()))
    assert md["tasks"] == ["QuadraticTask"] and best.lopt.hidden_size == 2


def test_a_resumed_run_keeps_its_recipe_and_appends_evaluations(run):
    argv = ["meta-train", "--resume", str(run), "--steps", "6", "--quiet", "--no-plots", *EVAL]
    assert cli.main(argv) == 0
    rows = periodic.read_eval_csv(run / "eval.csv")
    assert [r["step"] for r in rows] == [2, 4, 6]
    assert theta_files.load(run / "theta.msgpack").metadata["meta_training"]["step"] == 6
    with pytest.raises(ValueError, match="lopt_config.*differs"):
        train.meta_train(out_dir=run, resume=True, steps=8, lopt_config={"hidden_size": 3})
    with pytest.raises(ValueError, match="family_balance.*differs"):
        train.meta_train(out_dir=run, resume=True, steps=8, family_balance="mean")


def test_a_resumed_run_evaluates_as_it_did_without_repeating_the_eval_flags(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["meta-train", "--lopt", "LearnableSGD", "--trainer", "pes", "--task", "QuadraticTask"]
    argv += ["--trunc-length", "2", "--total-length", "6", "--num-tasks", "2", "--log-every", "2"]
    argv += ["--checkpoint-every", "0", "--no-plots", "--quiet", "--out", str(out)]
    assert cli.main([*argv, "--steps", "2", *EVAL]) == 0
    saved = json.loads((out / periodic.SETTINGS_FILE).read_text())
    assert saved["every"] == 2 and saved["tasks"] == ["QuadraticTask"] and saved["steps"] == 20
    resume = ["meta-train", "--resume", str(out), "--steps", "4", "--quiet", "--no-plots"]
    assert cli.main(resume) == 0
    assert [r["step"] for r in periodic.read_eval_csv(out / "eval.csv")] == [2, 4]
    (out / periodic.SETTINGS_FILE).write_text("{not json")
    with pytest.raises(SystemExit) as e:
        cli.main([*resume[:3], "--steps", "6"])
    assert e.value.code == 2 and "eval_config.json" in capsys.readouterr().err


def test_the_meta_train_mixture_stands_for_its_buckets():
    assert build.expand_families(["meta-train"]) == list(suites.META_TRAIN_BUCKETS)
    assert build.expand_families(["QuadraticTask"]) == ["QuadraticTask"]  # a task is fine
    with pytest.raises(ValueError, match="given twice"):
        build.expand_families(["meta-train", "MetaTrain_MLP_Digits8_32"])
    with pytest.raises(ValueError, match="Unknown task family 'NoSuchFamily'"):
        build.expand_families(["NoSuchFamily"])


def test_settings_are_checked_before_anything_runs(tmp_path, capsys):
    with pytest.raises(ValueError, match="task and families exclude each other"):
        train.meta_train(task="QuadraticTask", families=["QuadraticTask"])
    with pytest.raises(ValueError, match="lopt_config applies to a learned optimizer given by"):
        train.meta_train(lopt=recipes_lopt(), lopt_config={"step_mult": 1.0})
    with pytest.raises(ValueError, match="lopt_config: MLPLOpt: .*no_such"):
        train.build_lopt("MLPLOpt", {"no_such": 1})
    for argv, message in [
        (["--lopt-arg", "step_mult"], "--lopt-arg must look like KEY=VALUE"),
        (["--eval-tasks", "QuadraticTask"], "--eval-tasks/--eval-suite need --eval-every"),
        (["--eval-every", "5", "--eval-tasks", "NoTask"], "--eval-tasks: Unknown task"),
        (["--eval-every", "5", "--eval-suite", "nope"], "--eval-suite: Unknown suite"),
        (["--task", "QuadraticTask", "--family", "QuadraticTask"], "--task and --family exclude"),
    ]:
        with pytest.raises(SystemExit) as e:
            cli.main(["meta-train", "--out", str(tmp_path / "x"), *argv])
        assert e.value.code == 2
        assert message in capsys.readouterr().err


def recipes_lopt():
    from learnopt.learned_optimizers import mlp_lopt

    return mlp_lopt.MLPLOpt(hidden_size=2)


def test_lopt_arg_values_are_json_or_words():
    assert meta_train_cmd.lopt_config(["a=1e-3", "b=[0.1,0.1]", "c=Adam", "d=True", "e=null"]) == {
        "a": 1e-3,
        "b": [0.1, 0.1],
        "c": "Adam",
        "d": True,
        "e": None,
    }


def test_training_defaults_leave_full_run_trainers_their_lengths():
    assert "total_length" not in recipes.training_defaults("MLPLOpt", "full_grad")
    assert recipes.training_defaults("MLPLOpt", "pes")["total_length"] == 1000
    assert recipes.training_defaults("LearnableAdam", "pes") == {}  # the walkthrough's
    assert np.isfinite(recipes.TRAINING_DEFAULTS["Celo2"]["outer_lr"])


def test_evaluate_rebuilds_the_optimizer_from_the_theta_file(run, tmp_path, capsys):
    theta = str(run / "theta.msgpack")
    fast = ["--tasks", "QuadraticTask", "--steps", "20", "--seeds", "1", "--baselines", "Adam"]
    fast += ["--lrs", "0.1", "--no-plots", "--quiet"]
    out = tmp_path / "eval"
    assert cli.main(["evaluate", "--theta", theta, "--out", str(out), *fast]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["lopt"] == "MLPLOpt" and "hidden_size=2" in config["lopt_repr"]
    with pytest.raises(SystemExit) as e:
        cli.main(
            ["evaluate", "--theta", theta, "--lopt", "LearnableAdam", "--out", str(out), *fast]
        )
    assert e.value.code == 2
    assert "holds a theta of MLPLOpt" in capsys.readouterr().err


# ------------------------------------------------------------------- named recipes


def test_named_recipes_are_whole_runs_whose_flags_parse_back_to_them():
    parser = cli.build_parser()
    assert set(recipes.recipe_names()) >= {"mlplopt-mlp8k", "scheduledadam-cosine-tensor"}
    for name in recipes.recipe_names():
        recipe = recipes.get_recipe(name)
        assert {"lopt", "trainer", "steps"} <= set(recipe.settings), name
        args = parser.parse_args(["meta-train", *recipe.flags()])
        given = cli_args.given(args, RunConfig)
        given["lopt_config"] = meta_train_cmd.lopt_config(given.get("lopt_config", ()))
        expected = {k: (tuple(v) if k == "families" else v) for k, v in recipe.settings.items()}
        expected.setdefault("lopt_config", {})
        assert given == expected, name
        callbacks = meta_train_cmd._eval_callbacks(args, quiet=True)
        if recipe.evaluation:
            (ev,) = callbacks
            assert ev.every == recipe.evaluation["every"]
            assert ev.tasks == suites.META_VALID  # meta-validation, never heldout
    with pytest.raises(ValueError, match="did you mean 'mlplopt-mlp8k'"):
        recipes.get_recipe("mlplopt-mlp8")


def test_a_recipe_fills_what_is_not_given_and_records_it(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["meta-train", "--recipe", "scheduledadam-late", "--steps", "2",
            "--lopt-arg", "hidden_size=2", "--trunc-length", "2", "--total-length", "6",
            "--num-tasks", "2", "--outer-lr", "0.01", "--checkpoint-every", "0", "--no-plots",
            "--quiet", "--out", str(out)]  # fmt: skip
    for family in FAMILIES:
        argv += ["--family", family]
    argv += ["--eval-every", "2", "--eval-tasks", "QuadraticTask", "--eval-steps", "20"]
    assert cli.main(argv) == 0
    config = json.loads((out / "config.json").read_text())
    recipe = recipes.get_recipe("scheduledadam-late")
    assert config["recipe"] == "scheduledadam-late"
    assert config["lopt"] == "ScheduledAdam"
    # The recipe's lopt_config, updated by the given argument.
    assert config["lopt_config"] == {**recipe.settings["lopt_config"], "hidden_size": 2}
    for name in ("meta_loss_weighting", "meta_loss_power", "meta_loss_transform", "trainer"):
        assert config[name] == recipe.settings[name], name
    # Given flags win over the recipe's.
    assert config["outer_lr"] == 0.01 and config["total_length"] == 6
    assert config["families"] == list(FAMILIES)
    assert len(np.loadtxt(out / "metrics.csv", delimiter=",", skiprows=1, ndmin=2)) == 2
    eval_settings = json.loads((out / periodic.SETTINGS_FILE).read_text())
    assert eval_settings["steps"] == 20 and eval_settings["every"] == 2
    with pytest.raises(SystemExit):
        cli.main(["meta-train", "--recipe", "no-such-recipe", "--out", str(tmp_path / "x")])
    assert "unknown recipe 'no-such-recipe'" in capsys.readouterr().err


def test_a_recipe_drops_what_belongs_to_the_architecture_or_trainer_replaced():
    from learnopt.run import loop, recipes

    name = "scheduledadam-cosine-hparams-wide-shared"
    recipe = recipes.get_recipe(name).settings
    assert recipe["lopt"] == "ScheduledAdam" and recipe.get("lopt_config")
    given = {"recipe": name, "lopt": "MLPLOpt", "trainer": None}
    applied = loop._recipe_settings_that_apply(given)
    assert "lopt_config" not in applied  # ScheduledAdam's arguments are not MLPLOpt's
    assert applied["families"] == recipe["families"]  # the rest of the recipe stays
    same = loop._recipe_settings_that_apply(
        {"recipe": name, "lopt": "ScheduledAdam", "trainer": None}
    )
    assert same["lopt_config"] == recipe["lopt_config"]
    pes = "mlplopt-mlp8k"
    assert recipes.get_recipe(pes).settings["trunc_length"] == 20
    full = loop._recipe_settings_that_apply({"recipe": pes, "lopt": None, "trainer": "full_grad"})
    assert "trunc_length" not in full and "std" not in full
    assert full["total_length"] == recipes.get_recipe(pes).settings["total_length"]
    tes = loop._recipe_settings_that_apply({"recipe": pes, "lopt": None, "trainer": "tes"})
    assert tes["trunc_length"] == 20 and tes["std"] == 0.01
