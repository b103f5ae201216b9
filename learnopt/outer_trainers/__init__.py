"""Outer training (meta-training): truncated steps, gradient estimators, learners.

Vocabulary, the same in every module, the registry and the command line:
``trunc_length`` is the number of inner steps one gradient estimate unrolls (a
truncation; the library's TES and TBPTT call it ``unroll_length``, which is accepted
too); the length of a whole inner training run comes from a truncation schedule
(``ConstantTruncationSchedule(total_length)``). Full-run estimators (FullGrad, FullES)
unroll a whole run per estimate.
"""
