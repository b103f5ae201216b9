# Celo-Adam with Adam's second-moment decay b2 = 0.95 and 0.99 (the release's 0.999),
# alone and with loss smoothing k = 0.9, on meta-valid's six tasks (never heldout's), on
# the same seeds as scale_shapes_2026-12-07's warmup-cosine grid and released Celo-Adam:
# language models are commonly trained with b2 = 0.95-0.99; do the language models, where
# Celo-Adam loses (the Transformer) or nearly ties (heldout's LSTM) training loss to tuned
# warmup-cosine Adam (b2 = 0.999), gain, and what do the other tasks lose?
# Run from a worktree of the commit given as CODE. Resumable per task (tasks/).
cd "$(dirname "$0")/../../.."
ROOT=$PWD
CODE=${CODE:-05c4fdc}
SRC=/tmp/rms-shapes
[ -d $SRC ] || git worktree add -f --detach $SRC $CODE
HERE=$ROOT/benchmarks/results/rms_shapes_2026-12-07
cd $SRC && nice -n 5 $ROOT/.venv/bin/python benchmarks/schedule_shapes.py \
  --tasks TransformerLM_PyStdlibBytes_MultiRuntime_1,RNNLM_pystdlibbytes_Patch16_VanillaRNN64_Embed32_bs32,ImageMLP_Mnist5k_10_Silu96x48,ImageMLP_Digits8_Elu16x16x16x16,ImageMLPAE_Mnist5k_128x32x128_bs128,Conv_Digits8_16x32x32 \
  --groups rms --rms-decays 0.95,0.99 --smoothings 0.9 --seeds 3 --out $HERE

# Then on heldout (2 seeds, against Adam and warmup-cosine Adam tuned over the default
# 9-rate grid; OptList and the reference schedule left out for time: the bar counts only
# the first two): the released CeloAdam (the comparison, by the same code and baselines)
# and CeloAdam(initial_rms_decays=(0.99,)) with the released theta
# (theta_b2_0.99.msgpack, written from pretrained.load("CeloAdam").theta by
# learnopt.learned_optimizers.theta_files.save). A hand-set option, measured, not a recipe.
PY=$ROOT/.venv/bin/python
for T in CeloAdam $HERE/theta_b2_0.99.msgpack; do
  NAME=$(basename $T .msgpack)
  OUT=$ROOT/runs/rms-heldout-$NAME
  [ -f $OUT/done ] || { (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta $T --seeds 2 \
    --baselines Adam,AdamWarmupCosine --out $OUT --overwrite) && touch $OUT/done; }
  cp $OUT/summary.md $HERE/heldout_${NAME}_summary.md
  cp $OUT/summary.csv $HERE/heldout_${NAME}_summary.csv
done

# Fairness: is the b2 gain one that warmup-cosine Adam would have too? Its grid on the
# same six tasks and seeds with b2 = 0.99 (folder wc_b2/; at the commit given as CODE2).
CODE2=${CODE2:-49b6f5f}
SRC2=/tmp/rms-shapes-wc
[ -d $SRC2 ] || git worktree add -f --detach $SRC2 $CODE2
cd $SRC2 && nice -n 5 $PY benchmarks/schedule_shapes.py \
  --tasks TransformerLM_PyStdlibBytes_MultiRuntime_1,RNNLM_pystdlibbytes_Patch16_VanillaRNN64_Embed32_bs32,ImageMLP_Mnist5k_10_Silu96x48,ImageMLP_Digits8_Elu16x16x16x16,ImageMLPAE_Mnist5k_128x32x128_bs128,Conv_Digits8_16x32x32 \
  --groups grid --grid-rms-decay 0.99 --seeds 3 --out $HERE/wc_b2

# Then: weight decay 0.1 by progress on top of b2 = 0.99 (can the valid column's decay
# and b2's training-loss gain go together?), the same six tasks and seeds (folder
# b2_wd/; at the commit given as CODE3).
CODE3=${CODE3:-6bbd6df}
SRC3=/tmp/rms-shapes-wd
[ -d $SRC3 ] || git worktree add -f --detach $SRC3 $CODE3
cd $SRC3 && nice -n 5 $PY benchmarks/schedule_shapes.py \
  --tasks TransformerLM_PyStdlibBytes_MultiRuntime_1,RNNLM_pystdlibbytes_Patch16_VanillaRNN64_Embed32_bs32,ImageMLP_Mnist5k_10_Silu96x48,ImageMLP_Digits8_Elu16x16x16x16,ImageMLPAE_Mnist5k_128x32x128_bs128,Conv_Digits8_16x32x32 \
  --groups rms --rms-decays 0.99 --weight-decays 0.1 --seeds 3 --out $HERE/b2_wd
