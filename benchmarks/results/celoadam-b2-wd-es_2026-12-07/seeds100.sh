#!/bin/bash
# The hand-set start of recipes 17-19 (the released CeloAdam theta at b2 = 0.99 with weight
# decay 0.03 by progress; theta_start.msgpack) on heldout seeds 100-101, against Adam and
# warmup-cosine Adam tuned over 0.00316, 0.01, 0.0316 and 0.1 (every rate the 9-rate grid
# chose on seeds 0-1), then pooled with its seeds 0-1 evaluation (heldout_start_summary.md)
# by benchmarks/seed_spread.py: the baselines tuned again on the 4 pooled seeds, each margin
# beside the seed-to-seed spread. At the commit given as CODE.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
CODE=${CODE:-7154e18}
SRC=/tmp/seeds100-start
[ -d $SRC ] || git worktree add -f --detach $SRC $CODE
HERE=$ROOT/benchmarks/results/celoadam-b2-wd-es_2026-12-07
(cd $SRC && $PY -c "from learnopt.evaluation import fingerprint as f; h = f.source_hash()[:12]; print('baseline key', h); assert h == 'e212edafc052'") || exit 1
OUT=$ROOT/runs/heldout-seed100-celoadam-b2-wd-es-start
[ -f $OUT/done ] || { (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta $HERE/theta_start.msgpack \
  --baselines Adam,AdamWarmupCosine --lrs 0.00316,0.01,0.0316,0.1 --seed 100 --seeds 2 \
  --out $OUT --overwrite) && touch $OUT/done; } || exit 1
cp $OUT/summary.md $HERE/heldout_start_seed100_summary.md; cp $OUT/summary.csv $HERE/heldout_start_seed100_summary.csv
for B in Adam AdamWarmupCosine; do
  mkdir -p $HERE/seed_spread_$B
  (cd $SRC && PYTHONPATH=$SRC $PY benchmarks/seed_spread.py --baseline $B --out $HERE/seed_spread_$B \
    "start (seeds 0-1)=$ROOT/runs/heldout-celoadam-b2-wd-es-start" \
    "start (4 seeds)=$ROOT/runs/heldout-celoadam-b2-wd-es-start,$OUT") > $HERE/seed_spread_$B/seed_spread.md
done
