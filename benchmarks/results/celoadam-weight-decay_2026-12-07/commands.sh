#!/bin/bash
# Issue 32, recipe celoadam-weight-decay: the released CeloAdam with learnopt's weight
# decay (decoupled, scaled by the scheduled step and by the loss progress, lambda = 0.1 at
# the start) and its one-value log scale alone fine-tuned (everything else frozen), PES
# on the wide MLP bucket, a conv bucket and the LSTM LM family (outer-valid late log
# loss), outer rate 1e-2, 1,000 steps, meta-validated (1000 steps, 3 seeds, start
# included) every 250 steps; theta_best chosen on the validation loss. Then the chosen
# theta on heldout seeds 0-1 against the four tuned baselines, beside the released
# CeloAdam measured by the same code.
# The code: commit c948e9e (whose tuned baselines are cached: the baseline key is the
# source hash outside learned_optimizers/, run/ and a few others) with this stop's
# learned_optimizers/celo_adam.py and run/ recipe files from main (commit given as MAIN),
# which leave that key unchanged (checked below).
# Resumable: rerun the script.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
BASE=${BASE:-c948e9e}
MAIN=${MAIN:-a6134c0}
SRC=/tmp/eval-wd
NAME=celoadam-weight-decay
RUN=$ROOT/runs/$NAME
HERE=$ROOT/benchmarks/results/${NAME}_2026-12-07
if [ ! -d $SRC ]; then
  git worktree add -f $SRC $BASE
  for f in learnopt/learned_optimizers/celo_adam.py learnopt/run/_recipe_settings.py learnopt/run/recipes.py; do
    git show $MAIN:$f > $SRC/$f
  done
fi
(cd $SRC && $PY -c "from learnopt.evaluation import fingerprint as f; h = f.source_hash()[:12]; print('baseline key', h); assert h == '25394390cba0'") || exit 1
if [ ! -f $RUN/done ]; then
  if [ -f $RUN/config.json ]; then
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --resume $RUN)
  else
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --recipe $NAME --out $RUN)
  fi && touch $RUN/done
  echo "$(date) meta-train rc=$?"
fi
cp $RUN/eval.csv $RUN/eval.png $RUN/meta_loss.png $RUN/config.json $HERE/ 2>/dev/null
cp $RUN/theta.msgpack $HERE/theta_final.msgpack
STEP=$($PY -c "from learnopt import checkpoints as c; print(c.load_theta_metadata('$RUN/theta_best.msgpack')['meta_training']['step'])")
cp $RUN/theta_best.msgpack $HERE/theta_chosen_step$STEP.msgpack
OUT=$ROOT/runs/heldout-$NAME-chosen
if [ ! -f $OUT/done ]; then
  (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta $RUN/theta_best.msgpack --seeds 2 --out $OUT --overwrite) \
    && touch $OUT/done
  echo "$(date) heldout rc=$?"
fi
cp $OUT/summary.md $HERE/heldout_chosen_summary.md; cp $OUT/summary.csv $HERE/heldout_chosen_summary.csv
# The recipe's start (the released theta with the scale at zero: lambda = 0.1 by
# progress, hand-set; theta_start.msgpack, written by CeloAdam(...).extend_theta) and its
# final theta (step 1000), on heldout with the same code and baselines, as measurements
# beside the chosen one (what the meta-training added):
for T in start final; do
  OUTT=$ROOT/runs/heldout-$NAME-$T
  [ -f $OUTT/done ] || { (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta $HERE/theta_$T.msgpack \
    --seeds 2 --out $OUTT --overwrite) && touch $OUTT/done; }
  cp $OUTT/summary.md $HERE/heldout_${T}_summary.md; cp $OUTT/summary.csv $HERE/heldout_${T}_summary.csv
done
