"""The README's API tour runs as written (with fewer meta-steps)."""

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_tour_runs_and_meta_trains(tmp_path, monkeypatch):
    monkeypatch.setenv("LEARNOPT_DATA_DIR", str(tmp_path / "tfds"))
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) == 1, "expected one python block (the tour)"
    code = blocks[0].replace("range(2000)", "range(60)")
    namespace: dict = {}
    exec(compile(code, str(README), "exec"), namespace)
    learner, state = namespace["learner"], namespace["state"]
    assert np.isfinite(float(namespace["meta_loss"]))
    assert int(state.outer_iteration) == 60
    # The last learner built in the tour (PES) initializes too.
    pes_state = learner.init(namespace["key"])
    assert int(pes_state.outer_iteration) == 0
