#!/bin/bash
# Recipe celoadam-b2-wd-head-lm (learnopt/run/_recipe_settings.py, _CELOADAM_B2_WD_HEAD_LM):
# the released CeloAdam at b2 = 0.99 with weight decay 0.03 by progress (recipe 17's
# hand-set start), its 65-value step-size head fine-tuned by PES on the Transformer and
# LSTM LM families (unit-norm balance, late log loss on the outer-valid split, outer Adam
# 1e-3), 1,000 steps, meta-valid every 250 steps (3 seeds, start included, chosen by
# validation loss); then the chosen theta evaluated once on heldout (2 seeds) against
# Adam and warmup-cosine Adam tuned over the default 9-rate grid (cached). The start's
# heldout row is ../celoadam-b2-wd-es_2026-12-07/heldout_start_summary.md (the same
# configuration and theta, the same code for the evaluation), the released CeloAdam's
# ../rms_shapes_2026-12-07/heldout_CeloAdam_summary.md.
# Run from a worktree of the commit given as CODE. Resumable: meta-training resumes from
# its checkpoints, each finished step below is skipped.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
CODE=${CODE:-c7def89}
SRC=/tmp/celoadam-b2-wd-head-lm
[ -d $SRC ] || git worktree add -f --detach $SRC $CODE
NAME=celoadam-b2-wd-head-lm
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
