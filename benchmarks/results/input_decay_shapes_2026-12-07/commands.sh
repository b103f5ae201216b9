#!/bin/bash
# Which tensors Celo-Adam's weight decay should act on (issue 32, lever 3): decay on the
# matrices that read the data only (weight_decay_roles=["input"]) against the hand-set
# start (b2 = 0.99, decay 0.03 by progress on every tensor) and against decay on the
# hidden and output matrices, on meta-valid's two MLPs (never heldout), beside
# warmup-cosine Adam's grid and constant Adam (3 seeds, 1000 steps). At the commit CODE.
# (The first run also listed meta-valid's conv net and auto-encoder: stopped with the conv
# net 30% done after 35 minutes beside the test suite; this run reuses the MLPs' results.)
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
CODE=${CODE:-b8bf486}
SRC=/tmp/input-decay-shapes
[ -d $SRC ] || git worktree add -f --detach $SRC $CODE
HERE=$ROOT/benchmarks/results/input_decay_shapes_2026-12-07
B2='"initial_rms_decays": [0.99], "weight_decay_by_progress": true'
cd $SRC && PYTHONPATH=$SRC nice -n 10 $PY benchmarks/schedule_shapes.py \
  --tasks ImageMLP_Mnist5k_10_Silu96x48,ImageMLP_Digits8_Elu16x16x16x16 \
  --groups frontier,grid,custom --seeds 3 --out $HERE \
  --celoadam "start={$B2, \"weight_decay\": 0.03}" \
  --celoadam "input wd=0.1={$B2, \"weight_decay\": 0.1, \"weight_decay_roles\": [\"input\"]}" \
  --celoadam "input wd=0.3={$B2, \"weight_decay\": 0.3, \"weight_decay_roles\": [\"input\"]}" \
  --celoadam "input wd=1={$B2, \"weight_decay\": 1.0, \"weight_decay_roles\": [\"input\"]}" \
  --celoadam "hidden+output wd=0.1={$B2, \"weight_decay\": 0.1, \"weight_decay_roles\": [\"hidden\", \"output\"]}" \
  --celoadam "all wd=0.1={$B2, \"weight_decay\": 0.1}"
