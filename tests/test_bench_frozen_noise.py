"""benchmarks/bench_frozen_noise.py: the frozen keys' noise in an ES estimate, measured."""

from __future__ import annotations

import numpy as np

from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.outer_trainers import gradient_learner, truncated_pes
from learnopt.outer_trainers import lopt_truncated_step as lts
from learnopt.outer_trainers import truncation_schedule as tsched
from learnopt.tasks import quadratics


def test_the_trainable_leaf_carries_more_signal_with_the_frozen_leaf_unperturbed(
    repo_script, capsys
):
    module = repo_script("benchmarks/bench_frozen_noise.py")
    lopt = lopt_base.LearnableSGDM(initial_lr=0.03, initial_momentum=0.8)
    ts = lts.VectorizedLOptTruncatedStep(
        quadratics.CurvatureQuadraticFamily(dim=4),
        lopt,
        tsched.ConstantTruncationSchedule(20),
        num_tasks=4,
    )
    est = truncated_pes.TruncatedPES(ts, trunc_length=5, std=0.01)
    learner = gradient_learner.SingleMachineGradientLearner(
        lopt, [est], opt_base.Adam(1e-3), frozen_keys=["log_lr"]
    )
    # one_minus_momentum's meta-gradient is small beside log_lr's, whose noise drowns it
    out = module.measure_learner(learner, draws=16, seed=0)
    # Measured: 0.268 against -0.009 (no signal measurable with log_lr perturbed).
    assert out["frozen unperturbed"]["signal"] > out["all perturbed"]["signal"] + 0.1
    assert est.frozen_keys == ("log_lr",)  # restored after the measurement
    assert "theta has 2 values, 1 trainable" in capsys.readouterr().out
    assert np.isfinite(out["all perturbed"]["cosine"])
