"""Outer training (meta-training): truncated steps, gradient estimators, learners.

Vocabulary, the same in every module and on the command line: ``trunc_length`` is the
number of inner steps one gradient estimate unrolls (a truncation; the library's TES and
TBPTT call it ``unroll_length``, which is accepted too); the length of a whole inner
training run comes from a truncation schedule (``ConstantTruncationSchedule(total_length)``).
Full-run estimators (FullGrad, FullES) unroll a whole run per estimate.

Importing the package imports the estimator modules, so that every estimator class is in
:data:`ESTIMATORS` (each registers itself under its class name where it is defined), and
the library's calling convention (:mod:`~learnopt.outer_trainers.library_convention`),
which every estimator class accepts.
"""

from learnopt.outer_trainers import (  # noqa: F401  (imported to register and adapt)
    full_es,
    full_grad,
    library_convention,
    noise_reuse_es,
    truncated_es,
    truncated_grad,
    truncated_pes,
)
from learnopt.outer_trainers.gradient_estimator import ESTIMATORS

__all__ = ["ESTIMATORS"]
