"""Meta-training that starts from a shipped or saved theta and keeps parts of it fixed
(``learnopt meta-train --init-theta NAME_OR_PATH --freeze KEY``; issue 32), through the
command line: the start is the file's theta under the file's configuration, frozen parts
stay bit-identical, both are recorded in config.json and kept on resume, and every bad
value is one clear error before any work.

The runs use ``ScheduledAdam_cosine_hparams`` (8 values) on the data-free quadratic, so
each costs one small compile.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest

from learnopt import cli, pretrained
from learnopt.learned_optimizers import base as lopt_base
from learnopt.learned_optimizers import theta_files
from learnopt.run import build

ENTRY = "ScheduledAdam_cosine_hparams"
RUN = ["meta-train", "--task", "QuadraticTask", "--quiet", "--no-plots", "--trainer", "full_es"]
RUN += ["--total-length", "3", "--num-tasks", "2"]


def _leaves(theta) -> dict[str, np.ndarray]:
    flat, _ = jax.tree_util.tree_flatten_with_path(theta)
    return {jax.tree_util.keystr(p): np.asarray(v) for p, v in flat}


def _error(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    return capsys.readouterr().err.splitlines()[0]


@pytest.fixture(scope="module")
def frozen_run(tmp_path_factory) -> Path:
    """Two meta-steps from the shipped entry with two of its five keys frozen."""
    out = tmp_path_factory.mktemp("init_theta") / "run"
    argv = [*RUN, "--init-theta", ENTRY, "--freeze", "log_lr", "--freeze", "beta1_logit"]
    assert cli.main([*argv, "--steps", "2", "--out", str(out)]) == 0
    return out


def test_the_run_starts_from_the_entry_and_keeps_the_frozen_keys(frozen_run):
    start = _leaves(pretrained.load(ENTRY).theta)
    trained = theta_files.load(frozen_run / "theta.msgpack")
    end = _leaves(trained.theta)
    assert trained.lopt.name == "ScheduledAdam"
    for key in ("['log_lr']", "['beta1_logit']"):
        np.testing.assert_array_equal(end[key], start[key])
    moved = [k for k in start if not np.array_equal(start[k], end[k])]
    assert moved and set(moved) <= {"['beta2_logit']", "['kind_offsets']", "['log_epsilon']"}
    # The unfrozen values moved from the entry's, not from the architecture's init: a
    # couple of small outer steps leave them near the file's values.
    init = _leaves(trained.lopt.init(jax.random.PRNGKey(0)))
    for key in moved:
        assert np.abs(end[key] - start[key]).max() < np.abs(init[key] - start[key]).max()


def test_config_json_records_the_start_and_the_file_s_configuration(frozen_run):
    config = json.loads((frozen_run / "config.json").read_text())
    assert config["init_theta"] == ENTRY
    assert config["freeze"] == ["log_lr", "beta1_logit"]
    assert config["lopt"] == "ScheduledAdam"
    assert config["lopt_config"] == pretrained.metadata(ENTRY)["config"]


def test_a_resumed_run_keeps_init_theta_and_freeze(frozen_run, capsys):
    err = _error(["meta-train", "--resume", str(frozen_run), "--freeze", "log_lr"], capsys)
    assert "--freeze" in err and "differs from the run's" in err
    assert cli.main(["meta-train", "--resume", str(frozen_run), "--steps", "3", "--quiet"]) == 0
    end = _leaves(theta_files.load(frozen_run / "theta.msgpack").theta)
    start = _leaves(pretrained.load(ENTRY).theta)
    np.testing.assert_array_equal(end["['log_lr']"], start["['log_lr']"])
    config = json.loads((frozen_run / "config.json").read_text())
    assert (config["init_theta"], config["freeze"]) == (ENTRY, ["log_lr", "beta1_logit"])


def test_a_theta_file_path_starts_a_run_and_is_recorded_absolute(tmp_path, monkeypatch):
    trained = pretrained.load(ENTRY)
    theta_files.save(tmp_path / "mine.msgpack", trained.lopt, trained.theta)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    assert cli.main([*RUN, "--init-theta", "mine.msgpack", "--steps", "1", "--out", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["init_theta"] == str(tmp_path / "mine.msgpack")


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--init-theta", "NoSuchEntry"], ["--init-theta", "no shipped entry", "Celo"]),
        (["--init-theta", "Celo", "--lopt", "LearnableAdam"], ["does not fit", "log_lr"]),
        (["--init-theta", ENTRY, "--freeze", "nokey"], ["--freeze", "nokey", "log_lr"]),
        (["--lopt", "Celo", "--freeze", "phase9"], ["phase9", "named groups", "phase1"]),
        (
            ["--init-theta", ENTRY]
            + [
                x
                for k in ("log_lr", "beta1_logit", "beta2_logit", "kind_offsets", "log_epsilon")
                for x in ("--freeze", k)
            ],
            ["freezes all of theta"],
        ),
    ],
    ids=["unknown-entry", "other-layout", "unknown-key", "unknown-group", "everything-frozen"],
)
def test_bad_starts_and_freezes_are_one_clear_error(extra, words, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(build.gradient_learner, "SingleMachineGradientLearner", None)  # no work
    err = _error([*RUN, *extra, "--out", str(tmp_path / "run")], capsys)
    assert err.startswith("learnopt meta-train: error:")
    for word in words:
        assert word in err
    assert not (tmp_path / "run" / "config.json").exists()


def test_a_file_without_metadata_needs_lopt(tmp_path, capsys):
    from learnopt import checkpoints

    checkpoints.save_theta(tmp_path / "bare.msgpack", pretrained.load(ENTRY).theta)
    err = _error([*RUN, "--init-theta", str(tmp_path / "bare.msgpack")], capsys)
    assert "has no metadata" in err and "--lopt" in err


def test_celo_names_its_two_phases():
    groups = lopt_base.get_learned_optimizer("Celo").freeze_groups()
    assert groups == {"phase1": ("lstm_init_state", "rnn_params"), "phase2": ("ff_mod_stack",)}
    lopt = lopt_base.get_learned_optimizer("Celo")
    assert build.frozen_keys(lopt, ["phase2"]) == ("ff_mod_stack",)
    assert build.frozen_keys(lopt, None) is None


def test_another_configuration_of_the_same_layout_is_warned_about():
    config = {**pretrained.metadata(ENTRY)["config"], "initial_lr": 0.5}
    lopt = theta_files.build("ScheduledAdam", config)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert build.initial_theta(lopt, ENTRY) == pretrained.path(ENTRY)
    assert any("initial_lr" in str(w.message) for w in caught)


def test_find_takes_a_file_before_a_name_and_refuses_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert pretrained.find(ENTRY) == pretrained.path(ENTRY)
    (tmp_path / ENTRY).write_bytes(b"x")
    assert pretrained.find(ENTRY) == Path(ENTRY)
    (tmp_path / "run").mkdir()
    with pytest.raises(IsADirectoryError, match="folder"):
        pretrained.find(tmp_path / "run")


def test_width_aware_wraps_the_entry_it_starts_from(tmp_path):
    """--lopt WidthAware with --init-theta: the wrapper takes the file's optimizer and
    configuration, the run starts from the file's theta, and no mismatch is reported."""
    out = tmp_path / "run"
    argv = [*RUN, "--lopt", "WidthAware", "--lopt-arg", "base_width=32", "--init-theta", ENTRY]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert cli.main([*argv, "--steps", "1", "--out", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["lopt"] == "WidthAware"
    assert config["lopt_config"] == {
        "lopt": "ScheduledAdam",
        "lopt_config": pretrained.metadata(ENTRY)["config"],
        "base_width": 32,
    }
    trained = theta_files.load(out / "theta.msgpack")
    assert trained.lopt.name == "WidthAware" and trained.lopt.base_width == 32.0
    start, end = _leaves(pretrained.load(ENTRY).theta), _leaves(trained.theta)
    assert set(start) == set(end)
    for key in start:  # one small outer step from the entry's values
        assert np.abs(end[key] - start[key]).max() < 0.1


_HEADS = {
    "regime": (["regime_head=true"], "regime_step_size", ("b", "w")),
    "schedule": (["schedule_head=true"], "schedule_step_size", ("b", "w")),
    "weight_decay": (
        ["weight_decay=0.1", "weight_decay_by_progress=true", "weight_decay_head=true"],
        "weight_decay_scale",
        ("b",),
    ),
}


@pytest.mark.parametrize("head", sorted(_HEADS))
def test_celoadam_head_starts_from_the_released_theta(tmp_path, head):
    """--init-theta CeloAdam --lopt-arg {head}_head=true: the released file has no such
    head; CeloAdam.extend_theta adds it at zero, every released value is the start, and
    with everything else frozen only the head may move."""
    lopt_args, key, leaves = _HEADS[head]
    out = tmp_path / "run"
    frozen = ["lstm_init_state", "rnn_params/linear", "rnn_params/linear_1"]
    frozen += ["rnn_params/linear_2", "rnn_params/rnn/linear", "rnn_params/step_size"]
    argv = [*RUN, "--init-theta", "CeloAdam"]
    argv += [x for arg in lopt_args for x in ("--lopt-arg", arg)]
    argv += [x for key in frozen for x in ("--freeze", key)]
    with pytest.warns(UserWarning, match=f"{head}_head=False"):
        assert cli.main([*argv, "--steps", "1", "--out", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["lopt"] == "CeloAdam" and config["lopt_config"][f"{head}_head"] is True
    trained = theta_files.load(out / "theta.msgpack")
    assert getattr(trained.lopt, f"{head}_head")
    start, end = _leaves(pretrained.load("CeloAdam").theta), _leaves(trained.theta)
    assert set(end) - set(start) == {f"['rnn_params']['{key}']['{leaf}']" for leaf in leaves}
    for key in start:
        np.testing.assert_array_equal(end[key], start[key])
