# Celo-Adam with only its conv kernels' steps multiplied (CeloAdam(kernel_step_mult=c),
# c = 2 and 4), alone and with weight decay 0.1 by progress, on meta-valid's conv net,
# 3 seeds: the same task, seeds and settings as ../scale_shapes_2026-12-07 (whose grid of
# warmup-cosine Adam and released Celo-Adam rows are the comparison). Meta-valid's other
# tasks have no rank >= 4 tensor: there the option is the release (tested). Does the 4x
# that beat tuned warmup-cosine's training loss on the conv net need the biases and the
# readout too?
# Run from a worktree of the commit given as CODE. Resumable per task (tasks/).
cd "$(dirname "$0")/../../.."
ROOT=$PWD
CODE=${CODE:-ad6ea32}
SRC=/tmp/kernel-shapes
[ -d $SRC ] || git worktree add -f --detach $SRC $CODE
HERE=$ROOT/benchmarks/results/kernel_shapes_2026-12-07
cd $SRC && nice -n 5 $ROOT/.venv/bin/python benchmarks/schedule_shapes.py \
  --tasks Conv_Digits8_16x32x32 --groups kernels --scales 2,4 --weight-decays 0.1 --seeds 3 \
  --out $HERE
