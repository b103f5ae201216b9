# Larger steps for Celo-Adam, alone and with weight decay by progress, beside
# warmup-cosine Adam at the evaluation grid's rates around the tuned ones, on meta-valid's
# six tasks (never heldout's): does any single step multiplier make Celo-Adam's final
# training loss lower than tuned warmup-cosine Adam's on the language models and the conv
# net (where heldout says it loses), and what does it cost the MLPs? "x1 wd" is the
# release with lambda = 0.1 by progress (recipe 15's hand-set start).
# Run from a worktree of the commit given as CODE (the script as committed there).
# Resumable: each finished task is kept under tasks/ and reused when the script is rerun.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
CODE=${CODE:-11f35a5}
SRC=/tmp/scale-shapes
[ -d $SRC ] || git worktree add -f --detach $SRC $CODE
HERE=$ROOT/benchmarks/results/scale_shapes_2026-12-07
cd $SRC && nice -n 5 $ROOT/.venv/bin/python benchmarks/schedule_shapes.py \
  --tasks ImageMLP_Mnist5k_10_Silu96x48,ImageMLP_Digits8_Elu16x16x16x16,ImageMLPAE_Mnist5k_128x32x128_bs128,Conv_Digits8_16x32x32,RNNLM_pystdlibbytes_Patch16_VanillaRNN64_Embed32_bs32,TransformerLM_PyStdlibBytes_MultiRuntime_1 \
  --groups grid,scale --scales 1,2,4 --weight-decays 0.1 --seeds 3 --out $HERE
