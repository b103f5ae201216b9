#!/bin/bash
# Recipe 23's chosen theta (celoadam-es-from-release-broad, step 50) and its start on
# heldout at four more seeds (200-201, 300-301; tuned baselines over the same 4-rate grid as
# seeds 100-101), pooled with the committed seeds 0-1 and 100-101 into 8 seeds by
# benchmarks/seed_spread.py: which heldout margins a seed pair can reverse, for the bar's
# two baselines. The baseline key is 8aef6880ffb5 (recipe 23's).
# Run from a worktree of the commit given as CODE. Resumable: each finished step is skipped.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
CODE=${CODE:-683e74a}
SRC=/tmp/celoadam-es-schedule
[ -d $SRC ] || git worktree add -f --detach $SRC $CODE
R23=$ROOT/benchmarks/results/celoadam-es-from-release-broad_2026-12-07
HERE=$ROOT/benchmarks/results/celoadam-es-from-release-broad-8seeds_2026-12-08
H=$ROOT/runs/heldout-celoadam-es-from-release-broad
(cd $SRC && $PY -c "from learnopt.evaluation import fingerprint as f; h = f.source_hash()[:12]; print('baseline key', h); assert h == '8aef6880ffb5'") || exit 1
evaluate() {  # evaluate LABEL THETA [extra flags]: heldout, summary copied into HERE
  local label=$1 theta=$2; shift 2
  local out=$H-$label
  [ -f $out/done ] || { (cd $SRC && $PY -m learnopt evaluate --theta $theta \
    --baselines Adam,AdamWarmupCosine --out $out --overwrite "$@") && touch $out/done; } || exit 1
  cp $out/summary.md $HERE/heldout_${label}_summary.md; cp $out/summary.csv $HERE/heldout_${label}_summary.csv
}
LRS=0.00316,0.01,0.0316,0.1
for S in 200 300; do
  evaluate chosen-seed$S $R23/theta_chosen_step50.msgpack --lrs $LRS --seed $S --seeds 2
  evaluate start-seed$S $R23/theta_start.msgpack --lrs $LRS --seed $S --seeds 2
done
for B in Adam AdamWarmupCosine; do
  mkdir -p $HERE/seed_spread_$B
  (cd $SRC && PYTHONPATH=$SRC $PY benchmarks/seed_spread.py --baseline $B --out $HERE/seed_spread_$B \
    "chosen (8 seeds)=$H-chosen,$H-chosen-seed100,$H-chosen-seed200,$H-chosen-seed300" \
    "start (8 seeds)=$H-start,$H-start-seed100,$H-start-seed200,$H-start-seed300") \
    > $HERE/seed_spread_$B/seed_spread.md
done
echo "$(date) done"
