"""Fixed (single, non-sampled) tasks, e.g. :mod:`learnopt.tasks.fixed.image_mlp`.

Each module registers its tasks in ``learnopt.tasks.base.TASKS``; the imports below
register them all.
"""

from learnopt.tasks.fixed import (  # noqa: F401  (each registers its tasks)
    conv,
    image_mlp,
    image_mlp_ae,
    image_mlp_offline,
    resnet,
    rnn_lm,
    transformer_lm,
)
