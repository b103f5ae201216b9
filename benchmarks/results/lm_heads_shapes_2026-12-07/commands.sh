# The hand-set schedule heads (early: larger steps before tau 0.2; late: steps down to
# e^-2 after tau 0.6; both) on meta-valid's two language models, 3 seeds: the same tasks,
# seeds and settings as ../scale_shapes_2026-12-07, whose warmup-cosine grid and released
# Celo-Adam rows are the comparison. Is the Transformer's gap to tuned warmup-cosine Adam
# (which no step multiplier closed) in the schedule's shape?
# Run from a worktree of the commit given as CODE. Resumable per task (tasks/).
cd "$(dirname "$0")/../../.."
ROOT=$PWD
CODE=${CODE:-2cedcf4}
SRC=/tmp/adapt-shapes
[ -d $SRC ] || git worktree add -f --detach $SRC $CODE
HERE=$ROOT/benchmarks/results/lm_heads_shapes_2026-12-07
cd $SRC && nice -n 5 $ROOT/.venv/bin/python benchmarks/schedule_shapes.py \
  --tasks RNNLM_pystdlibbytes_Patch16_VanillaRNN64_Embed32_bs32,TransformerLM_PyStdlibBytes_MultiRuntime_1 \
  --groups heads --seeds 3 --out $HERE
