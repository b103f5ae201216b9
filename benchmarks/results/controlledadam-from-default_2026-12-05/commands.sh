#!/bin/bash
# Issue 32, controlledadam-from-default: the shipped default (ScheduledAdam, Adam on a
# fixed warmup-cosine schedule, 8 values) under ControlledAdam's bounded per-tensor
# step/decay controller, the controller alone meta-trained (PES, wide MLP bucket, late
# log training loss); theta_best chosen on meta-valid over 3 seeds, start included.
# Then the chosen theta and its start on heldout (9 tasks, 1000 steps, 2 seeds) against
# the four tuned baselines. Resumable: rerun the script.
#
# Both steps run the code of commit 9fc14f7 (where the recipe was committed): the
# evaluation from a worktree of it, so that its baselines' cache key (a hash of the
# source baselines run) matches the baselines tuned there.
cd "$(dirname "$0")/../../.."
ROOT=$PWD
PY=$ROOT/.venv/bin/python
RUN=$ROOT/runs/controlled1
SRC=/tmp/eval-9fc14f7
[ -d $SRC ] || git worktree add -f $SRC 9fc14f7
if [ ! -f $RUN/done ]; then
  if [ -f $RUN/config.json ]; then
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --resume $RUN)
  else
    (cd $SRC && nice -n 5 $PY -m learnopt meta-train --recipe controlledadam-from-default --out $RUN)
  fi && touch $RUN/done
  echo "$(date) meta-train rc=$?"
fi
for pair in "chosen:$RUN/theta_best.msgpack" "start:ScheduledAdam_cosine_hparams"; do
  name=${pair%%:*}; theta=${pair#*:}
  OUT=$ROOT/runs/heldout-controlled1-$name
  [ -f $OUT/done ] && continue
  (cd $SRC && nice -n 5 $PY -m learnopt evaluate --theta "$theta" --seeds 2 --out $OUT --overwrite) \
    && touch $OUT/done
  echo "$(date) heldout $name rc=$?"
done
