"""The shipped meta-trained thetas: one line to load, plain optax to use, provenance on board."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from learnopt import pretrained
from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import theta_files
from learnopt.registry import UnknownNameError

ROOT = Path(__file__).resolve().parents[1]


def test_at_least_one_small_entry_ships_with_its_provenance():
    names = pretrained.names()
    assert pretrained.DEFAULT in names
    for name in names:
        path = pretrained.path(name)
        assert path.stat().st_size < 256 * 1024  # kilobytes, not megabytes
        md = pretrained.metadata(name)
        assert md["registered"] and md["architecture"] in lopt_base.LOPTS
        training = md["meta_training"]
        if training.get("published"):
            continue  # test_published_entries_name_their_source_and_ship_its_licence
        assert md["licence"] == "Apache-2.0"
        assert training["command"].startswith("learnopt meta-train")
        assert training["wall_minutes"] <= 60
        assert "out_dir" not in training  # nothing of the machine that made it
        text = pretrained.describe(name)
        assert training["command"] in text and "learnopt evaluate" in text
        assert "wins" in text.lower()  # the evaluation summary against tuned baselines


def test_published_entries_name_their_source_and_ship_its_licence():
    published = [n for n in pretrained.names() if pretrained.metadata(n)["meta_training"].get(
        "published")]  # fmt: skip
    assert {"Celo", "CeloAdam"} <= set(published)
    for name in published:
        md = pretrained.metadata(name)
        training = md["meta_training"]
        src = training["source"]
        assert src["repository"].startswith("github.com/") and len(src["commit"]) == 40
        assert len(src["sha256"]) == 64 and int(src["sha256"], 16) >= 0
        assert md["licence"] in ("MIT", "BSD-3-Clause")
        licence = pretrained.path(name).parent / training["licence_file"]
        assert md["licence"].split("-")[0] in licence.read_text()  # the licence's own text
        assert "arXiv" in training["paper"] and training["converted_by"].startswith(
            f"python examples/convert_published.py {name}"
        )
        assert (
            pretrained.source(name) == f"{src['repository']}@{src['commit'][:7]} ({md['licence']})"
        )
        text = pretrained.describe(name)
        assert src["commit"] in text and src["sha256"] in text and "learnopt evaluate" in text
        assert "wins" in text.lower()


def test_list_pretrained_names_each_entry_with_its_source():
    from learnopt.cli import list_names

    lines = list_names("pretrained")
    assert [line.split()[0] for line in lines] == pretrained.names()
    celo = next(line for line in lines if line.startswith("Celo "))
    assert "github.com/amoudgl/celo@66d9761 (MIT)" in celo
    default = next(line for line in lines if line.startswith(pretrained.DEFAULT + " "))
    assert "learnopt meta-train" in default and "(Apache-2.0)" in default


def test_the_package_data_includes_the_entries():
    config = (ROOT / "pyproject.toml").read_text()
    assert '"learnopt.pretrained" = ["*.msgpack", "*.md", "LICENSE-*.txt"]' in config


def test_load_rebuilds_the_optimizer_without_declaring_it():
    trained = pretrained.load()
    md = pretrained.metadata()
    assert type(trained.lopt).__name__ == md["architecture"]
    for key, value in md["config"].items():
        got = getattr(trained.lopt, key)
        assert (list(got) if isinstance(got, tuple) else got) == value, key
    lopt, theta = trained
    assert jax.tree.structure(theta) == jax.tree.structure(lopt.init(jax.random.PRNGKey(0)))
    assert sum(np.size(x) for x in jax.tree.leaves(theta)) == md["num_theta"]


def test_unknown_names_list_the_entries():
    with pytest.raises(UnknownNameError, match=pretrained.DEFAULT):
        pretrained.load("no-such-theta")
    # A path is not a name, even one that reaches an entry's file.
    with pytest.raises(UnknownNameError, match=pretrained.DEFAULT):
        pretrained.load(f"../pretrained/{pretrained.DEFAULT}")
    with pytest.raises(TypeError, match="name must be a string"):
        pretrained.path(3)


def test_as_optax_composes_with_chain_schedules_and_weight_decay():
    trained = pretrained.load()
    tx = optax.chain(
        trained.as_optax(num_steps=60, weight_decay=1e-4),
        optax.scale_by_schedule(optax.linear_schedule(1.0, 0.5, 60)),
    )
    target = jnp.linspace(-1.0, 1.0, 12).reshape(3, 4)

    def loss_fn(p):
        return jnp.mean((p["w"] - target) ** 2)

    @jax.jit
    def step(params, state):
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, state = tx.update(grads, state, params, value=loss)
        return optax.apply_updates(params, updates), state, loss

    params = {"w": jnp.zeros((3, 4))}
    state = tx.init(params)
    losses = []
    for _ in range(60):
        params, state, loss = step(params, state)
        losses.append(float(loss))
    assert np.isfinite(losses).all()
    assert losses[-1] < 0.5 * losses[0]


def test_a_corrupted_copy_is_refused_with_the_file_named(tmp_path):
    bad = tmp_path / "copy.msgpack"
    bad.write_bytes(pretrained.path().read_bytes()[:-40])
    with pytest.raises(ValueError, match="copy.msgpack"):
        theta_files.load(bad)


def test_the_example_trains_a_flax_model_in_a_plain_optax_loop(repo_script):
    example = repo_script("examples/pretrained_flax_mlp.py")
    first, last, accuracy = example.main(steps=150)
    assert last < 0.5 * first
    assert accuracy > 0.8


def test_make_pretrained_packages_a_run(tmp_path, repo_script):
    make = repo_script("examples/make_pretrained.py")
    run, ev, out = tmp_path / "run", tmp_path / "eval", tmp_path / "out"
    for d in (run, ev, out):
        d.mkdir()
    trained = pretrained.load()
    theta_files.save(
        run / "theta.msgpack",
        trained.lopt,
        trained.theta,
        meta_training={"trainer": "pes", "out_dir": "/somewhere"},
    )
    (ev / "summary.md").write_text("| task | wins |\n")
    path = make.main(
        ["--run", str(run), "--eval", str(ev), "--name", "x", "--minutes", "3",
         "--command", "learnopt meta-train --steps 3", "--eval-command", "learnopt evaluate",
         "--out", str(out)]
    )  # fmt: skip
    md = theta_files.read_metadata(path)
    assert md["licence"] == "Apache-2.0" and "out_dir" not in md["meta_training"]
    assert md["meta_training"]["command"] == "learnopt meta-train --steps 3"
    assert json.dumps(md["config"]) and "| task | wins |" in (out / "x.md").read_text()


def test_each_model_card_says_which_inputs_the_entry_reads_as_measured():
    measured = {}
    for name in pretrained.names():
        lines = [x for x in pretrained.describe(name).splitlines() if x.startswith("**Reads**:")]
        assert len(lines) == 1, name
        measured[name] = pretrained.reads(name)
        assert ("the training loss" in lines[0]) == measured[name]["loss"], (name, measured)
        assert ("the run length T" in lines[0]) == measured[name]["run_length"], (name, measured)
    # The measurement can tell: Celo reads both, Celo2 neither.
    assert measured["Celo"] == {"loss": True, "run_length": True}
    assert measured["Celo2"] == {"loss": False, "run_length": False}
