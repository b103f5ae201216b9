# Celo-Adam whose scheduler reads a running mean of the training loss
# (CeloAdam(loss_smoothing=k), k = 0.9, 0.97, 0.99), alone and with weight decay 0.1 by
# progress, on meta-valid's six tasks (never heldout's), on the same seeds as
# scale_shapes_2026-12-07's warmup-cosine grid and released Celo-Adam ("CeloAdam x1"
# there): the released scheduler cuts its step on the Transformer, whose minibatch
# losses swing widely; does smoothing close the Transformer's gap to tuned warmup-cosine
# Adam, and what does it do to the other five tasks?
# Run from a worktree of the commit given as CODE (the script as committed there).
# Resumable: each finished task is kept under tasks/ and reused when the script is rerun.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
CODE=${CODE:-fa48ede}
SRC=/tmp/smooth-shapes
[ -d $SRC ] || git worktree add -f --detach $SRC $CODE
HERE=$ROOT/benchmarks/results/smooth_shapes_2026-12-07
cd $SRC && nice -n 5 $ROOT/.venv/bin/python benchmarks/schedule_shapes.py \
  --tasks TransformerLM_PyStdlibBytes_MultiRuntime_1,RNNLM_pystdlibbytes_Patch16_VanillaRNN64_Embed32_bs32,ImageMLP_Mnist5k_10_Silu96x48,ImageMLP_Digits8_Elu16x16x16x16,ImageMLPAE_Mnist5k_128x32x128_bs128,Conv_Digits8_16x32x32 \
  --groups smooth --smoothings 0.9,0.97,0.99 --weight-decays 0.1 --seeds 3 --out $HERE
# Then, on the two language models only (where the decays above moved the result
# most), lighter smoothing: k = 0.5, 0.7, 0.8 (folder finer/).
cd $SRC && nice -n 5 $ROOT/.venv/bin/python benchmarks/schedule_shapes.py \
  --tasks TransformerLM_PyStdlibBytes_MultiRuntime_1,RNNLM_pystdlibbytes_Patch16_VanillaRNN64_Embed32_bs32 \
  --groups smooth --smoothings 0.5,0.7,0.8 --seeds 3 --out $HERE/finer
# The step the released scheduler reads off meta-valid's two language models' recorded
# minibatch losses (the release's own run, seed 0), and what it reads with k = 0.9 off
# the same losses (schedule_probe/: open loop, the same loss sequence for both).
$ROOT/.venv/bin/python -c "
from learnopt import pretrained
from learnopt.learned_optimizers import theta_files
from learnopt.learned_optimizers.celo_adam import CeloAdam
theta_files.save('/tmp/celoadam_smooth09.msgpack', CeloAdam(loss_smoothing=0.9), pretrained.load('CeloAdam').theta)"
cd $SRC && $ROOT/.venv/bin/python benchmarks/schedule_probe.py --theta released=CeloAdam \
  --theta smooth0.9=/tmp/celoadam_smooth09.msgpack \
  --tasks TransformerLM_PyStdlibBytes_MultiRuntime_1,RNNLM_pystdlibbytes_Patch16_VanillaRNN64_Embed32_bs32 \
  --out $HERE/schedule_probe
