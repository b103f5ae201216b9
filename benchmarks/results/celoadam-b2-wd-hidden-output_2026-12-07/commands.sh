#!/bin/bash
# Recipe celoadam-b2-wd-hidden-output (learnopt/run/_recipe_settings.py, _CELOADAM_B2_WD_HIDDEN_OUTPUT): the
# released CeloAdam at b2 = 0.99 with weight decay 0.1 by progress on the hidden and
# output matrices only (weight_decay_roles), its log scale alone fine-tuned by PES on the
# wide MLP bucket, a conv bucket and the LSTM LM family (late log loss on a training and
# an outer-valid batch, outer Adam 1e-2), 1,000 steps, meta-valid every 250 steps (3
# seeds, start included, chosen by validation loss); then the chosen theta and the start
# evaluated once on heldout (2 seeds) against Adam and warmup-cosine Adam tuned over the
# default 9-rate grid (cached; the same baselines as recipes 17-19).
# Run from a worktree of the commit given as CODE. Resumable: meta-training resumes from
# its checkpoints, each finished step below is skipped.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
CODE=${CODE:-320664a}
SRC=/tmp/celoadam-b2-wd-hidden-output
[ -d $SRC ] || git worktree add -f --detach $SRC $CODE
NAME=celoadam-b2-wd-hidden-output
RUN=$ROOT/runs/$NAME
HERE=$ROOT/benchmarks/results/${NAME}_2026-12-07
(cd $SRC && $PY -c "from learnopt.evaluation import fingerprint as f; h = f.source_hash()[:12]; print('baseline key', h); assert h == 'e212edafc052'") || exit 1
if [ ! -f $RUN/done ]; then
  if [ -f $RUN/config.json ]; then
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --resume $RUN)
  else
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --recipe $NAME --checkpoint-every 50 --out $RUN)
  fi && touch $RUN/done
  rc=$?; echo "$(date) meta-train rc=$rc"; [ $rc = 0 ] || exit $rc
fi
cp $RUN/eval.csv $RUN/eval.png $RUN/meta_loss.png $RUN/config.json $RUN/metrics.csv $HERE/ 2>/dev/null
cp $RUN/theta.msgpack $HERE/theta_final.msgpack
STEP=$($PY -c "from learnopt import checkpoints as c; print(c.load_theta_metadata('$RUN/theta_best.msgpack')['meta_training']['step'])")
cp $RUN/theta_best.msgpack $HERE/theta_chosen_step$STEP.msgpack
OUT=$ROOT/runs/heldout-$NAME-chosen
[ -f $OUT/done ] || { (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta $RUN/theta_best.msgpack \
  --seeds 2 --baselines Adam,AdamWarmupCosine --out $OUT --overwrite) && touch $OUT/done; }
cp $OUT/summary.md $HERE/heldout_chosen_summary.md; cp $OUT/summary.csv $HERE/heldout_chosen_summary.csv
# The start (the released theta with the recipe's configuration, the decay head at zero).
[ -f $HERE/theta_start.msgpack ] || (cd $SRC && PYTHONPATH=$SRC $PY -c "
import json
from learnopt import pretrained
from learnopt.learned_optimizers import celo_adam, theta_files
cfg = json.load(open('$RUN/config.json'))['lopt_config']
lopt = celo_adam.CeloAdam(**cfg)
theta_files.save('$HERE/theta_start.msgpack', lopt, lopt.extend_theta(pretrained.load('CeloAdam').theta))
")
if [ "$STEP" != 0 ]; then
  OUT=$ROOT/runs/heldout-$NAME-start
  [ -f $OUT/done ] || { (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta $HERE/theta_start.msgpack \
    --seeds 2 --baselines Adam,AdamWarmupCosine --out $OUT --overwrite) && touch $OUT/done; }
  cp $OUT/summary.md $HERE/heldout_start_summary.md; cp $OUT/summary.csv $HERE/heldout_start_summary.csv
fi
