# Recipe celoadam-b2-wd-es (learnopt/run/_recipe_settings.py, _CELOADAM_B2_WD_ES): the
# released CeloAdam at b2 = 0.99 with weight decay 0.03 by progress, the two log scales
# (second-moment decay, weight decay) meta-trained by FullES over whole 1000-step runs (50
# steps, meta-valid every 10 steps, 3 seeds, start included), then the chosen theta
# evaluated once on heldout (2 seeds) against Adam and warmup-cosine Adam tuned over the
# default 9-rate grid (cached; OptList and the reference schedule left out for time, as
# for the release's and the hand-set b2's rows in ../rms_shapes_2026-12-07/).
# Run from a worktree of the commit given as CODE. Resumable: meta-training resumes from
# its checkpoints, each finished step below is skipped.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
CODE=${CODE:-41989d0}
SRC=/tmp/celoadam-b2-wd-es
[ -d $SRC ] || git worktree add -f --detach $SRC $CODE
NAME=celoadam-b2-wd-es
RUN=$ROOT/runs/$NAME
HERE=$ROOT/benchmarks/results/${NAME}_2026-12-07
(cd $SRC && $PY -c "from learnopt.evaluation import fingerprint as f; h = f.source_hash()[:12]; print('baseline key', h); assert h == 'e212edafc052'") || exit 1
if [ ! -f $RUN/done ]; then
  if [ -f $RUN/config.json ]; then
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --resume $RUN)
  else
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --recipe $NAME --checkpoint-every 5 --out $RUN)
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
# The start (step 0's theta: the release at b2 = 0.99, weight decay 0.03 by progress, both
# heads at zero) on heldout the same way. (Measured first, by the first attempt of this
# script: its meta-training was killed for memory after the step-0 meta-validation and
# the script went on to this evaluation of theta_best, which was the start.)
OUT=$ROOT/runs/heldout-$NAME-start
[ -f $OUT/done ] || { (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta $HERE/theta_start.msgpack \
  --seeds 2 --baselines Adam,AdamWarmupCosine --out $OUT --overwrite) && touch $OUT/done; }
cp $OUT/summary.md $HERE/heldout_start_summary.md; cp $OUT/summary.csv $HERE/heldout_start_summary.csv
# Diagnostic, not the recipe's result (its chosen theta is the start): the final theta
# (step 50) on heldout the same way.
OUT=$ROOT/runs/heldout-$NAME-final
[ -f $OUT/done ] || { (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta $HERE/theta_final.msgpack \
  --seeds 2 --baselines Adam,AdamWarmupCosine --out $OUT --overwrite) && touch $OUT/done; }
cp $OUT/summary.md $HERE/heldout_final_summary.md; cp $OUT/summary.csv $HERE/heldout_final_summary.csv
