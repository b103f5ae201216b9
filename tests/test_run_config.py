"""The run's configuration is the one home of its defaults: the command line's flags, their
``--help`` defaults and the values an empty command line runs with are all derived from it
(checked here against the dataclasses), and the API takes the same configuration."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from learnopt import _fields, cli, distributed
from learnopt.cli import args as cli_args
from learnopt.cli import meta_train as meta_train_cmd
from learnopt.evaluation.config import EvaluateConfig, PeriodicEvalConfig
from learnopt.run import config as run_config
from learnopt.run import settings as run_settings


def _subparser(name):
    parser = cli.build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return action.choices[name]


def _actions(parser):
    return {a.dest: a for a in parser._actions}


@pytest.mark.parametrize(
    "command, classes",
    [
        ("meta-train", (run_config.RunConfig, run_config.LaunchConfig, PeriodicEvalConfig)),
        ("evaluate", (EvaluateConfig,)),
    ],
)
def test_every_setting_has_its_flag_and_help_shows_its_default(command, classes):
    actions = _actions(_subparser(command))
    for cls in classes:
        for f in _fields.flags_of(cls):
            action = actions[cli_args.dest(cls, f.field)]
            assert f.flag in action.option_strings
            assert action.default is None  # "not given" is told from "given the default"
            if "{default}" in f.help:
                shown = cli_args._show_default(f.default)
                assert f"(default: {shown})" in action.help, (f.field, action.help)
            if f.choices is not None:
                assert tuple(action.choices) == tuple(f.choices)


def test_an_empty_command_line_runs_with_the_configurations_defaults():
    args = cli.build_parser().parse_args(["meta-train"])
    kwargs = meta_train_cmd.meta_train_kwargs(args)
    given = {name: kwargs.get(name) for name in run_config.RUN_SETTINGS}
    options = {name: kwargs.get(name) for name in run_config.RUN_OPTIONS}
    assert all(v is None for v in given.values()) and all(v is None for v in options.values())
    settings, options, custom = run_settings.resolve(given, options, {}, None, None)
    assert not custom
    defaults = {f.name: f.default for f in dataclasses.fields(run_config.RunConfig)}
    trunc, total, num_tasks = run_config.lengths(run_config.DEFAULT_TRAINER, None, None, None)
    assert settings == {
        "recipe": None,
        "task": run_config.DEFAULT_TASK,
        "families": None,
        "lopt": run_config.DEFAULT_LOPT,
        "lopt_config": {},
        "init_theta": None,
        "freeze": None,
        "trainer": run_config.DEFAULT_TRAINER,
        "trunc_length": trunc,
        "total_length": total,
        "num_tasks": num_tasks,
        "std": run_config.DEFAULT_STD,
        "meta_loss_split": None,
        "meta_loss_weighting": None,
        "meta_loss_window": None,
        "meta_loss_power": None,
        "meta_loss_transform": None,
        "outer_lr": run_config.DEFAULT_OUTER_LR,
        "max_grad_norm": None,
        "family_balance": None,
        "seed": defaults["seed"],
    }
    assert options == {name: defaults[name] for name in run_config.RUN_OPTIONS}
    # The notes' walkthrough, as the docs promise.
    assert (trunc, total, num_tasks) == (None, 4, 1) and options["steps"] == 2000
    launch = {f.name: f.default for f in dataclasses.fields(run_config.LaunchConfig)}
    assert kwargs["plots"] is launch["plots"] and kwargs["progress"] is not launch["quiet"]
    assert kwargs["overwrite"] is launch["overwrite"] and kwargs["callbacks"] == []


def test_functions_that_take_the_same_defaults_as_keywords_agree_with_the_configuration():
    launch = {f.name: f.default for f in dataclasses.fields(run_config.LaunchConfig)}
    params = inspect.signature(distributed.initialize).parameters
    for name in ("init_timeout", "peer_timeout"):
        assert params[name].default == launch[name], name
    from learnopt.evaluation import periodic

    cfg = PeriodicEvalConfig()
    ev = periodic.PeriodicEval(10)
    assert (ev.tasks, ev.steps, ev.seeds) == (tuple(cfg.tasks), cfg.steps, cfg.seeds)
    assert ev.learning_rates == tuple(cfg.learning_rates)
    from learnopt.run import build

    params = inspect.signature(build.build_learner).parameters
    assert params["task"].default == run_config.DEFAULT_TASK
    assert params["lopt"].default == run_config.DEFAULT_LOPT
    assert params["trainer"].default == run_config.DEFAULT_TRAINER
    assert params["std"].default == run_config.DEFAULT_STD
    assert params["outer_lr"].default == run_config.DEFAULT_OUTER_LR


def test_family_balance_choices_are_the_workers_balances():
    from learnopt.outer_trainers import worker

    assert run_config.FAMILY_BALANCES == worker.BALANCES


def test_every_trainer_name_is_a_registered_estimator_class():
    from learnopt.outer_trainers import ESTIMATORS

    for name, (cls_name, _) in run_config.TRAINERS.items():
        assert cls_name in ESTIMATORS, name
        assert ESTIMATORS.constructor(cls_name).__name__ == cls_name


def test_config_given_is_what_differs_from_the_defaults():
    assert run_config.RunConfig().given() == {}
    cfg = run_config.RunConfig(trainer="pes", steps=2000, seed=3, families=("A", "B"))
    assert cfg.given() == {"trainer": "pes", "seed": 3, "families": ("A", "B")}
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.steps = 5


def test_lengths_fill_in_the_trainers_defaults_and_check_them():
    assert run_config.lengths("full_grad", None, None, None) == (None, 4, 1)
    assert run_config.lengths("pes", None, None, None) == (4, 200, 8)
    assert run_config.lengths("full_es", None, 7, 2) == (None, 7, 2)
    with pytest.raises(ValueError, match="full_es unrolls whole inner runs"):
        run_config.lengths("full_es", 3, None, None)
    with pytest.raises(ValueError, match=r"trunc_length \(9, steps per estimate\) must be <="):
        run_config.lengths("tbptt", 9, 8, None)


def test_every_default_is_written_once_and_shown_as_written():
    """The run's defaults are run.config's constants and each trainer's entry; the
    recipes' truncation is one table; what --help, the API, the estimators the run builds
    and the recipes show is that value, whatever it is."""
    from learnopt.learned_optimizers import base as lopt_base
    from learnopt.outer_trainers import ESTIMATORS
    from learnopt.run import build, recipes, trainers
    from learnopt.tasks import quadratics

    actions = _actions(_subparser("meta-train"))
    shown = {
        f.field: actions[cli_args.dest(run_config.RunConfig, f.field)].help
        for f in _fields.flags_of(run_config.RunConfig)
    }
    trunc, total = run_config.DEFAULT_TRUNC_LENGTH, run_config.DEFAULT_TOTAL_LENGTH
    assert f"(default: {trunc};" in shown["trunc_length"]
    assert f"(default: {total['full']})" in shown["total_length"]
    assert f"(default: {total['truncated']};" in shown["total_length"]
    assert f"(default: {run_config.DEFAULT_STD:g};" in shown["std"]
    assert f"(default: {run_config.DEFAULT_OUTER_LR:g};" in shown["outer_lr"]
    assert f"{trainers.DEFAULT_POPULATION} for the others" in shown["num_tasks"]
    params = {
        name: {p.name: p.default for p in inspect.signature(fn).parameters.values()}
        for name, fn in (("make", build.make_estimator), ("learner", build.build_learner))
    }
    for kind in ("make", "learner"):
        assert params[kind]["std"] == run_config.DEFAULT_STD
        assert params[kind]["trunc_length"] is params[kind]["total_length"] is None
        assert params[kind]["num_tasks"] is None  # the trainer's

    fam = quadratics.CurvatureQuadraticFamily(dim=3)
    for name, spec in trainers.SPECS.items():
        if spec.num_tasks != trainers.DEFAULT_POPULATION:
            assert f"{spec.num_tasks} for {name}" in shown["num_tasks"]
        assert run_config.DEFAULT_NUM_TASKS[name] == spec.num_tasks
        assert (name in run_config.FULL_TRAINERS) is spec.full
        assert set(spec.takes) <= {f.name for f in dataclasses.fields(run_config.RunConfig)}
        assert run_config.lengths(name, None, None, None) == (
            None if spec.full else trunc,
            total["full" if spec.full else "truncated"],
            spec.num_tasks,
        )
        est = build.make_estimator(name, fam, lopt_base.LearnableSGD())
        assert est.truncated_step.num_tasks == spec.num_tasks
        assert (
            est.truncated_step.trunc_sched.total_length
            == total["full" if spec.full else "truncated"]
        )
        if "trunc_length" in spec.takes:
            assert est.trunc_length == trunc
            # The estimator class's own default (the notes' library's) is its attribute.
            cls = ESTIMATORS.constructor(spec.estimator)
            assert cls(est.truncated_step).trunc_length == cls.default_trunc_length
        if "std" in spec.takes:
            assert est.std == run_config.DEFAULT_STD

    table = recipes.TRAINING_DEFAULTS["MLPLOpt"]
    truncation = {k: table[k] for k in recipes.TRUNCATION_SETTINGS}
    for name, spec in trainers.SPECS.items():
        got = recipes.training_defaults("MLPLOpt", name)
        assert all(got.get(k) == (None if spec.full else v) for k, v in truncation.items())
    for recipe in map(recipes.get_recipe, recipes.recipe_names()):
        if recipe.settings.get("trainer") == "pes":
            assert {k: recipe.settings[k] for k in truncation} == truncation, recipe.name


def test_meta_train_takes_the_configuration_or_the_same_keywords():
    from learnopt import train

    cfg = run_config.RunConfig(task="QuadraticTask", steps=3, seed=1)
    a = train.meta_train(cfg, progress=False, plots=False)
    b = train.meta_train(task="QuadraticTask", steps=3, seed=1, progress=False, plots=False)
    c = train.meta_train(cfg, steps=4, progress=False, plots=False)  # a keyword wins
    assert a.ok and b.ok and a.step == b.step == 3 and c.step == 4
    assert {k: float(v) for k, v in a.theta.items()} == {k: float(v) for k, v in b.theta.items()}
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'step' \(did you mean"):
        train.meta_train(task="QuadraticTask", step=3)
    with pytest.raises(TypeError, match="config must be a RunConfig"):
        train.meta_train({"task": "QuadraticTask"})
