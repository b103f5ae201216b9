"""Task families with sampled configurations (the notes' library's ``tasks.parametric``).

Each module registers its families in ``learnopt.tasks.base.TASK_FAMILIES`` and its
constructors in ``cfgobject.CONFIGURABLES``; the imports below register them all.
"""

from learnopt.tasks.parametric import (  # noqa: F401  (each registers its families)
    cfgobject,
    image_conv,
    image_mlp,
    image_mlp_ae,
    lm_rnn,
    lm_transformer,
    parametric_utils,
)
