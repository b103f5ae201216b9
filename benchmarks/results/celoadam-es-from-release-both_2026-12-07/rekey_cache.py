"""One-off (2026-12-07): cached baselines made at source e212edafc052 re-keyed to today's key.

Between 4e7c630 (key e212edafc052) and 340f484 (key 8aef6880ffb5) the hashed files that
changed are evaluation/fingerprint.py (which files the key hashes), cache.py (a
docstring), config.py and periodic.py (the train+valid selection score); results.py and
report.py (summaries) left the key. None trains a baseline, so the cached curves are the
bytes either key would produce. Run once with the .venv at 340f484.
"""

import json
from pathlib import Path

import numpy as np

from learnopt.evaluation import cache as c

folder = Path.home() / ".cache/learnopt/baselines"
bc = c.BaselineCache(folder)
new = c.source_hash()
n = 0
for path in sorted(folder.glob("*.npz")):
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"][()]))
        arrays = {k: np.asarray(data[k]) for k in data.files if k != "meta"}
    key = meta["key"]
    if not key["source"].startswith("e212edafc052"):
        continue
    key = {**key, "source": new}
    meta = {**meta, "key": key}
    out = bc._path(key)
    if out.exists():
        continue
    bc._write(out, {"meta": np.asarray(json.dumps(meta, sort_keys=True)), **arrays})
    n += 1
print("re-keyed", n, "files to", new[:12])
