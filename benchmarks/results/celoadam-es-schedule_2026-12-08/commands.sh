#!/bin/bash
# Recipe celoadam-es-schedule (learnopt/run/_recipe_settings.py, _CELOADAM_ES_SCHEDULE):
# recipe 23 (celoadam-es-from-release-broad) with learnopt's schedule head (10 values, from
# zero) trained beside the two log scales by FullES at std 0.3, as a second phase from
# recipe 23's chosen theta (--init-theta; its b2 and decay scales are the start), outer rate
# 0.03 (a first run at 0.15, e3e8030, was stopped at step 15: see the recipe). 50 steps,
# chosen on meta-valid every 10 steps by both columns. Then on heldout as recipe 23 (chosen
# and final on seeds 0-1; chosen on seeds 100-101; seed spread). The start is recipe 23's
# chosen theta with a zero schedule head, which adds exactly 0 to the log step: its heldout
# evaluations are recipe 23's chosen ones, copied. The baseline key is 8aef6880ffb5.
# Run from a worktree of the commit given as CODE. Resumable: meta-training resumes from
# its checkpoints, each finished step below is skipped.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
CODE=${CODE:-683e74a}
SRC=/tmp/celoadam-es-schedule
[ -d $SRC ] || git worktree add -f --detach $SRC $CODE
NAME=celoadam-es-schedule
RUN=$ROOT/runs/$NAME
HERE=$ROOT/benchmarks/results/${NAME}_2026-12-08
START=$ROOT/benchmarks/results/celoadam-es-from-release-broad_2026-12-07/theta_chosen_step50.msgpack
(cd $SRC && $PY -c "from learnopt.evaluation import fingerprint as f; h = f.source_hash()[:12]; print('baseline key', h); assert h == '8aef6880ffb5'") || exit 1
if [ ! -f $RUN/done ]; then
  if [ -f $RUN/config.json ]; then
    (cd $SRC && $PY -m learnopt meta-train --resume $RUN)
  else
    (cd $SRC && $PY -m learnopt meta-train --recipe $NAME --init-theta $START --checkpoint-every 5 --out $RUN)
  fi && touch $RUN/done
  rc=$?; echo "$(date) meta-train rc=$rc"; [ $rc = 0 ] || exit $rc
fi
cp $RUN/eval.csv $RUN/eval.png $RUN/meta_loss.png $RUN/config.json $RUN/metrics.csv $HERE/ 2>/dev/null
cp $RUN/theta.msgpack $HERE/theta_final.msgpack
STEP=$($PY -c "from learnopt import checkpoints as c; print(c.load_theta_metadata('$RUN/theta_best.msgpack')['meta_training']['step'])")
cp $RUN/theta_best.msgpack $HERE/theta_chosen_step$STEP.msgpack
evaluate() {  # evaluate LABEL THETA [extra flags]: heldout, summary copied into HERE
  local label=$1 theta=$2; shift 2
  local out=$ROOT/runs/heldout-$NAME-$label
  [ -f $out/done ] || { (cd $SRC && $PY -m learnopt evaluate --theta $theta \
    --baselines Adam,AdamWarmupCosine --out $out --overwrite "$@") && touch $out/done; } || exit 1
  cp $out/summary.md $HERE/heldout_${label}_summary.md; cp $out/summary.csv $HERE/heldout_${label}_summary.csv
}
for L in chosen chosen-seed100; do  # the start's evaluations are recipe 23's chosen theta's
  [ -d $ROOT/runs/heldout-$NAME-start${L#chosen} ] || cp -r $ROOT/runs/heldout-celoadam-es-from-release-broad-$L $ROOT/runs/heldout-$NAME-start${L#chosen}
done
evaluate chosen $RUN/theta_best.msgpack --seeds 2
evaluate final $HERE/theta_final.msgpack --seeds 2
LRS=0.00316,0.01,0.0316,0.1
evaluate chosen-seed100 $RUN/theta_best.msgpack --lrs $LRS --seed 100 --seeds 2
H=$ROOT/runs/heldout-$NAME
for B in Adam AdamWarmupCosine; do
  mkdir -p $HERE/seed_spread_$B
  (cd $SRC && PYTHONPATH=$SRC $PY benchmarks/seed_spread.py --baseline $B --out $HERE/seed_spread_$B \
    "chosen (4 seeds)=$H-chosen,$H-chosen-seed100" "start (4 seeds)=$H-start,$H-start-seed100") \
    > $HERE/seed_spread_$B/seed_spread.md
done
echo "$(date) done"
