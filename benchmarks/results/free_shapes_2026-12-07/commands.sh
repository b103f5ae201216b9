# Learning-rate-free Adams (Prodigy, D-Adaptation's AdamW) on warmup-cosine's shape with
# peak 1, on meta-valid's six tasks (never heldout's), on the same seeds as
# scale_shapes_2026-12-07's warmup-cosine grid (its tuned rate per task is read from
# there): do they find, in one run, the per-task step that tuned warmup-cosine Adam gets
# by a search, and so train the conv net and the language models as well as it?
# Run from a worktree of the commit given as CODE (the script as committed there).
# Resumable: each finished task is kept under tasks/ and reused when the script is rerun.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
CODE=${CODE:-d6ea10b}
SRC=/tmp/free-shapes
[ -d $SRC ] || git worktree add -f --detach $SRC $CODE
HERE=$ROOT/benchmarks/results/free_shapes_2026-12-07
cd $SRC && nice -n 5 $ROOT/.venv/bin/python benchmarks/schedule_shapes.py \
  --tasks ImageMLP_Mnist5k_10_Silu96x48,ImageMLP_Digits8_Elu16x16x16x16,ImageMLPAE_Mnist5k_128x32x128_bs128,Conv_Digits8_16x32x32,RNNLM_pystdlibbytes_Patch16_VanillaRNN64_Embed32_bs32,TransformerLM_PyStdlibBytes_MultiRuntime_1 \
  --groups free --seeds 3 --out $HERE
