"""The building blocks the learned-optimizer architectures are made of.

The lower floor of :mod:`learnopt.learned_optimizers`: the gradient accumulators and the
per-element features they give (:mod:`.accumulators`, :mod:`.element_features`, the
library's decays-last forms in :mod:`.library_accumulators`), the per-element MLP in its
fastest form (:mod:`.per_element`, with the compiled CPU kernel of
:mod:`.fused_kernel`), the fraction-of-training features (:mod:`.progress`) and VeLO's
loss timescales (:mod:`.loss_timescales`). Nothing here imports an architecture; the
architectures (one module each in :mod:`learnopt.learned_optimizers`) import these.
"""
