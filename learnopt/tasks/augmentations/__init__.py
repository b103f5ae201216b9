"""The augmentations of :mod:`learnopt.tasks.task_augmentation`, one kind per module.

* :mod:`~learnopt.tasks.augmentations.wrapping`: what they are built on, a task wrapper
  that forwards everything, :class:`WrappedTaskFamilyWithTaskWrapper` and log-uniform
  draws;
* :mod:`~learnopt.tasks.augmentations.reparam`: :class:`ReparamWeights` and its family;
* :mod:`~learnopt.tasks.augmentations.batch_size`: :class:`ReducedBatchsizeTask` and its
  family;
* :mod:`~learnopt.tasks.augmentations.dtype`: :class:`ConvertFloatDType` and its family;
* :mod:`~learnopt.tasks.augmentations.gradients`: :class:`ModifyTaskGradient` and the
  gradient transforms built on it (normalized, subsampled directions, added noise);
* :mod:`~learnopt.tasks.augmentations.loss_scale`: :class:`ScaleLoss` and its family;
* :mod:`~learnopt.tasks.augmentations.delayed`: :class:`AsyncDelayedGradients` (stale
  gradients) and its family.

Import them from :mod:`learnopt.tasks.task_augmentation` (the notes' library's path),
which re-exports every name; a new kind of augmentation is a module here, re-exported
there.
"""
