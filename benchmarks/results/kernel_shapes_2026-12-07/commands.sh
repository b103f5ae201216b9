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

# Then, on heldout's two conv nets (the only heldout tasks with rank >= 4 tensors: on the
# other seven the option is the release step for step), 2 seeds, against warmup-cosine
# Adam tuned over 0.01, 0.0316 and 0.1 (the full 9-point grid's tuned rates on these two
# tasks were 0.0316 and 0.1 in every earlier heldout evaluation; the four baselines over
# the full grid cost 116 conv runs, over an hour and a half on this machine), beside the
# released CeloAdam evaluated by the same code and baselines: the
# released theta with kernel_step_mult=4 (theta_kernels_x4.msgpack) and with weight
# decay 0.1 by progress as well (theta_kernels_x4_wd.msgpack), both written from
# pretrained.load("CeloAdam") by learnopt.learned_optimizers.theta_files.save.
# Measurements of hand-set options, not recipes.
PY=$ROOT/.venv/bin/python
CONVS=Conv_Mnist5k_16_8x16_Tanh,Conv_Mnist5k_12_8x16x16_batchnorm
for T in celoadam kernels_x4 kernels_x4_wd; do
  OUT=$ROOT/runs/heldout-convs-$T-$CODE
  THETA=$HERE/theta_$T.msgpack; [ $T = celoadam ] && THETA=CeloAdam
  [ -f $OUT/done ] || { (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta $THETA \
    --tasks $CONVS --baselines AdamWarmupCosine --lrs 0.01,0.0316,0.1 --seeds 2 --out $OUT \
    --overwrite) && touch $OUT/done; }
  cp $OUT/summary.md $HERE/heldout_convs_${T}_summary.md
  cp $OUT/summary.csv $HERE/heldout_convs_${T}_summary.csv
done
