#!/bin/bash
# Issue 32, second run of celoadam-head-valid: the released CeloAdam's scheduler head
# fine-tuned on the MLP buckets' late log validation loss, theta_best now chosen on
# meta-valid's validation loss over 3 seeds (the recipe's --eval-select valid, seeds 3,
# start included); then the chosen theta and its start on heldout (9 tasks, 1000 steps,
# 2 seeds) against the four tuned baselines. Resumable: rerun the script.
cd "$(dirname "$0")/../../.."
PY=.venv/bin/python
RUN=runs/celoadam-head-valid2
if [ ! -f $RUN/done ]; then
  if [ -f $RUN/config.json ]; then
    nice -n 5 $PY -m learnopt meta-train --resume $RUN
  else
    nice -n 5 $PY -m learnopt meta-train --recipe celoadam-head-valid --out $RUN
  fi && touch $RUN/done
  echo "$(date) meta-train rc=$?"
fi
for pair in "chosen:$RUN/theta_best.msgpack" "start:CeloAdam"; do
  name=${pair%%:*}; theta=${pair#*:}
  [ -f runs/heldout-head2-$name/done ] && continue
  nice -n 5 $PY -m learnopt evaluate --theta "$theta" --seeds 2 --out runs/heldout-head2-$name --overwrite \
    && touch runs/heldout-head2-$name/done
  echo "$(date) heldout $name rc=$?"
done
