#!/bin/bash
# Issue 32: the chosen theta of celoadam-mup-head-lm on seeds 100-101 (warmup-cosine Adam
# tuned over 0.01, 0.0316, 0.1, as ../celoadam-head-multi_2026-12-06/replicate.sh, which
# ran its start, WidthAware(CeloAdam, 64), and CeloAdam on the same seeds), then the
# margins on seeds 0-1, on seeds 100-101 and on the 4 seeds pooled
# (benchmarks/seed_spread.py), written beside this file. Resumable: rerun the script.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
COMMIT=${COMMIT:-1419aba}
SRC=/tmp/eval-$COMMIT
[ -d $SRC ] || git worktree add -f $SRC $COMMIT
HERE=$ROOT/benchmarks/results/celoadam-mup-head-lm_2026-12-06
OUT=$ROOT/runs/heldout-seed100-mup-head-lm
# the run's choice (commands.sh), kept beside the results
[ -f $HERE/theta_chosen.msgpack ] || cp $ROOT/runs/celoadam-mup-head-lm/theta_best.msgpack $HERE/theta_chosen.msgpack
if [ ! -f $OUT/done ]; then
  (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta $HERE/theta_chosen.msgpack --seeds 2 \
      --seed 100 --baselines AdamWarmupCosine --lrs 0.01,0.0316,0.1 --out $OUT --overwrite) \
    && touch $OUT/done
  echo "$(date) heldout seed100 mup-head-lm rc=$?"
fi
R=$ROOT/runs
$PY benchmarks/seed_spread.py --out $HERE \
  "CeloAdam width-aware (the start), seeds 0-1=$R/heldout-celoadam-muP64" \
  "celoadam-mup-head-lm (chosen), seeds 0-1=$R/heldout-celoadam-mup-head-lm-chosen" \
  "CeloAdam width-aware (the start), seeds 100-101=$R/heldout-seed100-CeloAdam-muP64" \
  "celoadam-mup-head-lm (chosen), seeds 100-101=$OUT" \
  "CeloAdam width-aware (the start), 4 seeds=$R/heldout-celoadam-muP64,$R/heldout-seed100-CeloAdam-muP64" \
  "celoadam-mup-head-lm (chosen), 4 seeds=$R/heldout-celoadam-mup-head-lm-chosen,$OUT" \
  > $HERE/seed_spread.md
tail -12 $HERE/seed_spread.md
