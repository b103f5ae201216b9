# Celo-Adam with learnopt's hypergradient step adaptation (CeloAdam(step_adaptation=beta),
# beta 0.01 and 0.03, bound 2), alone and with weight decay 0.1 by progress, on
# meta-valid's six tasks (never heldout's), 3 seeds: the same tasks, seeds and settings as
# ../scale_shapes_2026-12-07, whose warmup-cosine grid and released Celo-Adam ("x1") rows
# are the comparison (the same code paths: the release's steps are unchanged, tested bit
# for bit). Does a per-tensor adaptation find the conv net's larger steps without
# costing the MLPs, the auto-encoder and the RNN LM theirs?
# Run from a worktree of the commit given as CODE. Resumable: each finished task is kept
# under tasks/ and reused when the script is rerun.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
CODE=${CODE:-2cedcf4}
SRC=/tmp/adapt-shapes
[ -d $SRC ] || git worktree add -f --detach $SRC $CODE
HERE=$ROOT/benchmarks/results/adapt_shapes_2026-12-07
cd $SRC && nice -n 5 $ROOT/.venv/bin/python benchmarks/schedule_shapes.py \
  --tasks ImageMLP_Mnist5k_10_Silu96x48,ImageMLP_Digits8_Elu16x16x16x16,ImageMLPAE_Mnist5k_128x32x128_bs128,Conv_Digits8_16x32x32,RNNLM_pystdlibbytes_Patch16_VanillaRNN64_Embed32_bs32,TransformerLM_PyStdlibBytes_MultiRuntime_1 \
  --groups adapt --adaptations 0.01,0.03 --weight-decays 0.1 --seeds 3 --out $HERE
