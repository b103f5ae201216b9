"""Learned optimizers: ``lopt.init(key) -> theta``, ``lopt.opt_fn(theta) -> Optimizer``.

Modules (each registers its learned optimizers in ``base.LOPTS``; the imports at the
end of this file register them all):

* ``base``: the ``LearnedOptimizer`` interface, ``LearnableSGD/SGDM/Adam``, the registry;
* ``mlp_lopt.MLPLOpt``: per-parameter MLP (Metz et al., 2019);
* ``adafac_mlp_lopt.AdafacMLPLOpt``: per-parameter MLP with Adafactor features (Metz et
  al., 2022, "Practical tradeoffs");
* ``adafac_nominal.MLPNomLOpt``: the same with a nominal hand-designed term;
* ``rnn_mlp_lopt.RNNMLPLOpt``: per-tensor LSTM conditioning a per-parameter MLP (Metz et
  al., 2020);
* ``nn_adam.NNAdam``: Adam with per-tensor hyperparameters steered by an LSTM;
* ``hyper_v2.HyperV2``: VeLO's hypernetwork architecture (Metz et al., 2022);
* ``scheduled_adam.ScheduledAdam``: Adam's direction with a learned schedule over the
  fraction of training done (arXiv:2011.02159, 2501.12670);
* ``celo.Celo``: VeLO's update rule under a learned LSTM schedule over the fraction of
  training done, meta-trained in two phases (Moudgil et al., 2025, arXiv:2501.12670);
* ``celo_adam.CeloAdam``: Adam's update under Celo's learned LSTM schedule (the
  release's ``celo_adam``, Moudgil et al., 2025);
* ``celo2.Celo2``: a normalized, compute-efficient update rule (Moudgil et al., 2026);
* ``controlled_adam.ControlledAdam``: a learned, bounded per-tensor controller of
  ScheduledAdam's warmup-cosine step and weight decay (LHOPT-style, arXiv:2106.00958);
* ``width_aware``: ``WidthAware``, any of them with width-aware (muP) steps per tensor,
  and ``WidthAwareSteps``, the same for any optimizer
  (arXiv:2203.03466, 2406.00153);
* ``common``: shared accumulators, features and Haiku-layout layers (the library's path);
* ``convert``, ``theta_files``: loading a ``theta`` saved by learned_optimization; theta
  files with their metadata.

The architectures are built on ``blocks`` (:mod:`learnopt.learned_optimizers.blocks`):
accumulators and their features, the per-element MLP and its fused kernel, the
fraction-of-training features (``blocks.progress``; the ``*_tau`` variants) and VeLO's
loss timescales. Nothing in ``blocks`` imports an architecture.

The ported architectures keep learned_optimization's names, constructor arguments,
maths and theta layout, so its meta-trained thetas load here.
"""

from learnopt.learned_optimizers import (  # noqa: F401  (each registers its architectures)
    adafac_mlp_lopt,
    adafac_nominal,
    base,
    celo,
    celo2,
    celo_adam,
    controlled_adam,
    hyper_v2,
    mlp_lopt,
    nn_adam,
    rnn_mlp_lopt,
    scheduled_adam,
    width_aware,
)
