"""Meta-training: gradient estimators, the worker computation and the learners.

The notes' library's module path, kept as the face of five modules, one concept each:

* :mod:`~learnopt.outer_trainers.gradient_estimator`: the :class:`GradientEstimator`
  protocol in learnopt's traced convention, its records (:class:`OuterState`,
  :class:`GradientEstimatorOut`, ...) and the estimator registry;
* :mod:`~learnopt.outer_trainers.worker`: a worker's computation, every estimator's
  estimate averaged (:class:`WorkerWeights` in, :class:`AggregatedGradient` out);
* :mod:`~learnopt.outer_trainers.outer_update`: :class:`GradientLearner`, which applies
  averaged estimates with an outer optimizer, clipping them and skipping non-finite ones;
* :mod:`~learnopt.outer_trainers.fused_learner`: :class:`SingleMachineGradientLearner`, both in
  one XLA program per outer step that compiles once;
* :mod:`~learnopt.outer_trainers.library_convention`: the library's calling convention
  (``WorkerWeights`` first, on the host; :func:`gradient_worker_compute`) on top of them.
"""

from __future__ import annotations

from learnopt.outer_trainers.fused_learner import SingleMachineGradientLearner, SingleMachineState
from learnopt.outer_trainers.gradient_estimator import (
    ESTIMATORS,
    GradientEstimator,
    GradientEstimatorOut,
    GradientEstimatorState,
    OuterState,
    UnrollInfo,
    is_host_style,
)
from learnopt.outer_trainers.library_convention import (
    ParameterCheckpoint,
    WorkerComputeOut,
    gradient_worker_compute,
)
from learnopt.outer_trainers.outer_update import (
    GradientLearner,
    GradientLearnerState,
    OptCheckpoint,
)
from learnopt.outer_trainers.worker import AggregatedGradient, WorkerWeights

__all__ = [
    "OuterState",
    "WorkerWeights",
    "AggregatedGradient",
    "WorkerComputeOut",
    "GradientEstimatorState",
    "UnrollInfo",
    "GradientEstimatorOut",
    "ParameterCheckpoint",
    "OptCheckpoint",
    "GradientEstimator",
    "GradientLearnerState",
    "GradientLearner",
    "gradient_worker_compute",
    "SingleMachineState",
    "SingleMachineGradientLearner",
    "ESTIMATORS",
    "is_host_style",
]
