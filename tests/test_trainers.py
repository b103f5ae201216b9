"""A gradient estimator becomes a trainer of runs by one registration: its class in
``ESTIMATORS`` and one ``TrainerSpec`` in ``learnopt.run.trainers``. A toy estimator,
registered here only, reaches the command line (``--trainer`` choices, ``--help``,
``learnopt list trainers``), the run's builder and a whole ``learnopt meta-train`` run,
with no other file touched."""

from __future__ import annotations

import copy
import json

import jax
import pytest

from learnopt import cli, train
from learnopt.learned_optimizers import base as lopt_base
from learnopt.outer_trainers import full_grad
from learnopt.outer_trainers.gradient_estimator import ESTIMATORS
from learnopt.run import build, trainers
from learnopt.run import config as run_config
from learnopt.tasks import quadratics


@pytest.fixture
def toy(monkeypatch):
    """Registers ``ToyEstimator`` and the trainer ``toy`` for one test (copies of both
    registries stand in for them, so nothing stays registered afterwards)."""
    monkeypatch.setattr(ESTIMATORS, "_entries", dict(ESTIMATORS._entries))
    monkeypatch.setattr(trainers, "SPECS", copy.copy(trainers.SPECS))

    @ESTIMATORS.register
    class ToyEstimator(full_grad.FullGrad):
        """FullGrad with its estimate scaled by ``scale``."""

        def __init__(self, truncated_step, scale, std):
            super().__init__(truncated_step)
            self.scale, self.std = scale, std

        def compute_gradient_estimate(self, theta, key, state, datas, outer_state=None):
            out, metrics = super().compute_gradient_estimate(theta, key, state, datas)
            grad = jax.tree_util.tree_map(lambda g: self.scale * g, out.grad)
            return out.replace(grad=grad), metrics

    spec = trainers.register(
        trainers.TrainerSpec(
            "toy",
            "ToyEstimator",
            "a toy: half of full_grad's meta-gradient",
            full=True,
            num_tasks=3,
            builder=lambda settings, step, cls: cls(step, scale=0.5, std=settings.std),
        )
    )
    yield ToyEstimator, spec


def _trainer_action():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices["meta-train"]
    return sub, next(a for a in sub._actions if "--trainer" in a.option_strings)


def test_a_registered_estimator_is_a_trainer_of_the_command_line_and_the_run(toy, tmp_path, capsys):
    cls, spec = toy
    sub, action = _trainer_action()
    assert "toy" in action.choices
    assert f"toy        ToyEstimator: {spec.help}" in sub.format_help()
    assert "toy" in cli.list_names("trainers")
    assert run_config.TRAINERS["toy"] == ("ToyEstimator", spec.help)
    assert "toy" in run_config.FULL_TRAINERS and run_config.DEFAULT_NUM_TASKS["toy"] == 3
    assert train.TRAINERS["toy"] == f"ToyEstimator: {spec.help}"

    fam = quadratics.CurvatureQuadraticFamily(dim=3)
    est = build.make_estimator("toy", fam, lopt_base.LearnableSGD(), total_length=5, std=0.2)
    assert isinstance(est, cls) and (est.scale, est.std) == (0.5, 0.2)
    assert est.truncated_step.num_tasks == 3 and est.horizon == 5
    learner = build.build_learner(task="QuadraticTask", trainer="toy")
    assert isinstance(learner.gradient_estimators[0], cls)
    with pytest.raises(ValueError, match="toy unrolls whole inner runs"):
        build.make_estimator("toy", fam, lopt_base.LearnableSGD(), trunc_length=2)

    out = tmp_path / "run"
    argv = ["meta-train", "--trainer", "toy", "--task", "QuadraticTask", "--steps", "3"]
    assert cli.main([*argv, "--out", str(out), "--quiet", "--no-plots"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert (config["trainer"], config["num_tasks"], config["total_length"]) == ("toy", 3, 4)
    assert "(toy): meta-loss" in capsys.readouterr().out


def test_without_the_registration_the_toy_is_unknown():
    _, action = _trainer_action()
    assert "toy" not in action.choices and "toy" not in run_config.TRAINERS
    with pytest.raises(KeyError, match="Unknown trainer 'toy'"):
        build.make_estimator("toy", quadratics.QuadraticTask(), lopt_base.LearnableSGD())
