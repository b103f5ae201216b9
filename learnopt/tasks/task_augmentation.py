"""Augmentations: wrappers that turn a Task (or TaskFamily) into a related one.

Like data augmentation for supervised learning, these widen the distribution a learned
optimizer is meta-trained on, without new models (Metz et al. 2022, "Practical
tradeoffs between memory, compute, and performance in learned optimizers"):

* :class:`ReparamWeights` / :class:`ReparamWeightsFamily`: train ``w / s`` instead of
  ``w`` (the loss sees ``(w / s) * s``): the same function, gradients scaled by ``s``.
  Families draw ``s`` log-uniformly per sample: one for all weights (``global``), one
  per tensor (``tensor``) or one per parameter (``parameter``).
* :class:`ReducedBatchsizeTask` / :class:`ReducedBatchsizeFamily`: the first
  ``fraction`` of every batch (the same data iterator, smaller batches).
* :class:`ConvertFloatDType` / :func:`ConvertFloatDTypeTaskFamily`: parameters and
  float data in another dtype (bfloat16 by default).
* :class:`ModifyTaskGradient` and the gradient transforms built on it:
  :func:`NormalizeTaskGradient` (unit global norm), :func:`SubsampleDirectionsTaskGradient`
  (the gradient projected on random directions, as ES would see it) and
  :func:`AddGradientNoise` (Gaussian noise of a given standard deviation, learnopt's).
* :class:`ScaleLoss` / :class:`ScaleLossTaskFamily` (learnopt's): the loss times a
  constant (sampled log-uniformly per family member); ``normalizer`` undoes it.
* :class:`AsyncDelayedGradients` / :func:`AsyncDelayedGradientsTaskFamily`: the
  gradient at the params of earlier steps (stale gradients, kept in the model state).

Family wrappers whose quantity is sampled (reparameterization scale, loss scale,
gradient noise) draw it inside ``family.sample`` as an array, so a population of members
with different values is one ``vmap``.

Each kind lives in its own module of :mod:`learnopt.tasks.augmentations` (``wrapping``,
``reparam``, ``batch_size``, ``dtype``, ``gradients``, ``loss_scale``, ``delayed``); this
module, the notes' library's path, re-exports every name.
"""

from __future__ import annotations

from learnopt.tasks.augmentations.batch_size import ReducedBatchsizeFamily, ReducedBatchsizeTask
from learnopt.tasks.augmentations.delayed import (
    AsyncDelayedGradients,
    AsyncDelayedGradientsTaskFamily,
    DelayedParamsState,
)
from learnopt.tasks.augmentations.dtype import ConvertFloatDType, ConvertFloatDTypeTaskFamily
from learnopt.tasks.augmentations.gradients import (
    AddGradientNoise,
    AddGradientNoiseTaskFamily,
    ModifyTaskGradient,
    NormalizeTaskGradient,
    NormalizeTaskGradientTaskFamily,
    SubsampleDirectionsTaskGradient,
    SubsampleDirectionsTaskGradientTaskFamily,
)
from learnopt.tasks.augmentations.loss_scale import ScaleLoss, ScaleLossTaskFamily
from learnopt.tasks.augmentations.reparam import ReparamWeights, ReparamWeightsFamily
from learnopt.tasks.augmentations.wrapping import PyTree as PyTree
from learnopt.tasks.augmentations.wrapping import WrappedTaskFamilyWithTaskWrapper

# ``PyTree as PyTree``: importable here as before, not part of the API.
__all__ = [
    "AddGradientNoise",
    "AddGradientNoiseTaskFamily",
    "AsyncDelayedGradients",
    "AsyncDelayedGradientsTaskFamily",
    "ConvertFloatDType",
    "ConvertFloatDTypeTaskFamily",
    "DelayedParamsState",
    "ModifyTaskGradient",
    "NormalizeTaskGradient",
    "NormalizeTaskGradientTaskFamily",
    "ReducedBatchsizeFamily",
    "ReducedBatchsizeTask",
    "ReparamWeights",
    "ReparamWeightsFamily",
    "ScaleLoss",
    "ScaleLossTaskFamily",
    "SubsampleDirectionsTaskGradient",
    "SubsampleDirectionsTaskGradientTaskFamily",
    "WrappedTaskFamilyWithTaskWrapper",
]
