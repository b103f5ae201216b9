#!/bin/bash
# What moves Celo-Adam's hand-set start (b2 = 0.99, weight decay 0.03 by progress) on
# meta-valid's two language models (never heldout): Adam's b1, b2 and eps, plain weight
# decay, loss smoothing and the base step, beside warmup-cosine Adam's grid and constant
# Adam (3 seeds, 1000 steps). At the commit given as CODE.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
CODE=${CODE:-de08e90}
SRC=/tmp/lm-shapes
[ -d $SRC ] || git worktree add -f --detach $SRC $CODE
HERE=$ROOT/benchmarks/results/lm_shapes_2026-12-07
HS='"initial_rms_decays": [0.99], "weight_decay": 0.03, "weight_decay_by_progress": true'
cd $SRC && PYTHONPATH=$SRC nice -n 5 $PY benchmarks/schedule_shapes.py \
  --tasks TransformerLM_PyStdlibBytes_MultiRuntime_1,RNNLM_pystdlibbytes_Patch16_VanillaRNN64_Embed32_bs32 \
  --groups frontier,grid,custom --seeds 3 --out $HERE \
  --celoadam "start={$HS}" \
  --celoadam "start b1=0.95={$HS, \"initial_momentum_decays\": [0.95]}" \
  --celoadam "start b1=0.8={$HS, \"initial_momentum_decays\": [0.8]}" \
  --celoadam "start b2=0.95={\"initial_rms_decays\": [0.95], \"weight_decay\": 0.03, \"weight_decay_by_progress\": true}" \
  --celoadam "start eps=1e-6={$HS, \"initial_epsilon\": 1e-6}" \
  --celoadam "start step x0.5={$HS, \"step_mult\": 0.0005}" \
  --celoadam "start step x2={$HS, \"step_mult\": 0.002}" \
  --celoadam "start smooth=0.9={$HS, \"loss_smoothing\": 0.9}" \
  --celoadam "start smooth=0.9 step x0.5={$HS, \"loss_smoothing\": 0.9, \"step_mult\": 0.0005}" \
  --celoadam "b2=0.99 plain wd=0.01={\"initial_rms_decays\": [0.99], \"weight_decay\": 0.01}" \
  --celoadam "b2=0.99 plain wd=0.1={\"initial_rms_decays\": [0.99], \"weight_decay\": 0.1}"
