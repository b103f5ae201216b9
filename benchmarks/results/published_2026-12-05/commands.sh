#!/bin/bash
# Issue 29: meta-valid (2 seeds) for the default and the published entries, then the
# 5000-step rows (3 heldout tasks, 1 seed), from the frozen worktree /work/evaltree.
cd /work/main
export PYTHONPATH=/work/evaltree
PY=/work/main/.venv/bin/python
for name in ScheduledAdam_cosine_hparams CeloAdam Celo Celo2; do
  [ -f runs/mv-$name/summary.md ] && [ -f runs/mv-$name/done ] && continue
  nice -n 5 $PY -m learnopt evaluate --theta $name --suite meta-valid --seeds 2 --out runs/mv-$name --overwrite --quiet && touch runs/mv-$name/done
  echo "$(date) meta-valid $name rc=$?"
done
T5K=ImageMLP_Mnist5k_28_Relu128,Conv_Mnist5k_16_8x16_Tanh,RNNLM_pystdlibbytes_Patch16_GRU32_Embed16_bs32
for name in ScheduledAdam_cosine_hparams CeloAdam Celo Celo2; do
  [ -f runs/h5k-$name/done ] && continue
  nice -n 5 $PY -m learnopt evaluate --theta $name --tasks $T5K --steps 5000 --seeds 1 --out runs/h5k-$name --overwrite --quiet && touch runs/h5k-$name/done
  echo "$(date) 5000-step $name rc=$?"
done
