"""Tasks, task families and their datasets: the inner problems that optimizers train.

* ``base``: the ``Task`` and ``TaskFamily`` interfaces and the ``TASKS`` /
  ``TASK_FAMILIES`` registries;
* ``quadratics``: quadratic tasks and families (their synthetic batches in
  ``quadratics_data``);
* ``fixed``: single tasks on real data (``fixed.image_mlp.ImageMLP_FashionMnist8_Relu32``);
* ``parametric``: task families with sampled configurations;
* ``suites``: the meta-training buckets and the held-out evaluation suite;
* ``task_augmentation``: wrappers that turn a task (or family) into a related one (one
  kind per module of ``augmentations``);
* ``datasets``: lazy datasets (TFDS builders, embedded data); building a task touches
  no file and imports no TensorFlow.

Each module registers the tasks and families it defines; the imports below fill the
registries, so importing any module of the package lists every built-in task.
"""

from learnopt.tasks import (  # noqa: F401  (each registers its tasks or families)
    base,
    fixed,
    parametric,
    quadratics,
    suites,
)
