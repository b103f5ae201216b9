#!/bin/bash
# Recipe 20's chosen theta (its start: the released CeloAdam theta at b2 = 0.99 with weight
# decay 0.1 by progress on the hidden and output matrices; theta_chosen_step0.msgpack) on
# heldout seeds 100-101, against Adam and warmup-cosine Adam tuned over 0.00316, 0.01,
# 0.0316 and 0.1 (cached by ../celoadam-b2-wd-es_2026-12-07/seeds100.sh), then pooled with
# its seeds 0-1 evaluation by benchmarks/seed_spread.py beside recipe 17's hand-set start
# pooled the same way. At the commit given as CODE.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
CODE=${CODE:-fd2e46f}
SRC=/tmp/seeds100-hidden-output
[ -d $SRC ] || git worktree add -f --detach $SRC $CODE
HERE=$ROOT/benchmarks/results/celoadam-b2-wd-hidden-output_2026-12-07
(cd $SRC && $PY -c "from learnopt.evaluation import fingerprint as f; h = f.source_hash()[:12]; print('baseline key', h); assert h == 'e212edafc052'") || exit 1
OUT=$ROOT/runs/heldout-seed100-celoadam-b2-wd-hidden-output
[ -f $OUT/done ] || { (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta $HERE/theta_chosen_step0.msgpack \
  --baselines Adam,AdamWarmupCosine --lrs 0.00316,0.01,0.0316,0.1 --seed 100 --seeds 2 \
  --out $OUT --overwrite) && touch $OUT/done; } || exit 1
cp $OUT/summary.md $HERE/heldout_chosen_seed100_summary.md; cp $OUT/summary.csv $HERE/heldout_chosen_seed100_summary.csv
R17=$ROOT/runs/heldout-celoadam-b2-wd-es-start,$ROOT/runs/heldout-seed100-celoadam-b2-wd-es-start
for B in Adam AdamWarmupCosine; do
  mkdir -p $HERE/seed_spread_$B
  (cd $SRC && PYTHONPATH=$SRC $PY benchmarks/seed_spread.py --baseline $B --out $HERE/seed_spread_$B \
    "hidden+output (seeds 0-1)=$ROOT/runs/heldout-celoadam-b2-wd-hidden-output-chosen" \
    "hidden+output (4 seeds)=$ROOT/runs/heldout-celoadam-b2-wd-hidden-output-chosen,$OUT" \
    "recipe 17 start (4 seeds)=$R17") > $HERE/seed_spread_$B/seed_spread.md
done
