"""The baseline cache is verified and best effort (learnopt.evaluation.cache).

A file is used only if it holds the curves asked for (its stored key and shapes are
checked), an unreadable one is a miss with one warning, the key covers a user's task and
optimizer definitions, and a cache that cannot be written never costs an evaluation its
results. Every evaluation here is tiny: the quadratic, a few steps, SGD over two rates.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import shutil
import sys
import textwrap
import warnings

import numpy as np
import pytest

from learnopt import cli, evaluation
from learnopt.evaluation import cache, runner
from learnopt.optimizers import base as opt_base
from learnopt.tasks import base as tasks_base

STEPS, SEEDS, LRS = 6, 2, (0.01, 0.3)


def _candidate() -> evaluation.Sweep:
    return evaluation.optimizer_sweep(opt_base.OPTIMIZERS.get("SGD", learning_rate=0.05))


CAND = _candidate().name


def _baseline(name: str = "SGD", lrs: tuple[float, ...] = LRS) -> evaluation.Sweep:
    return evaluation.lr_sweep(name, lrs)


@pytest.fixture
def trained(monkeypatch):
    """Every sweep the evaluations train, by name, in order."""
    names = []

    class Recording(runner.TaskEvaluator):
        def __init__(self, task, sweeps, **kwargs):
            super().__init__(task, sweeps, **kwargs)
            names.extend(s.name for s in self.sweeps)

    monkeypatch.setattr(runner, "TaskEvaluator", Recording)
    return names


def _evaluate(folder, task="QuadraticTask", baseline=None, **settings):
    kwargs = {"num_steps": STEPS, "num_seeds": SEEDS, **settings}
    return evaluation.evaluate_suite(
        [task], _candidate(), [baseline or _baseline()], baseline_cache=folder, **kwargs
    )


def _cache_warnings(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, cache.BaselineCacheWarning)]


@contextlib.contextmanager
def _no_cache_warnings():
    """A block in which a :class:`BaselineCacheWarning` is an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", cache.BaselineCacheWarning)
        yield


def _files(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


# ------------------------------------------------------------- files are verified


@pytest.mark.parametrize(
    ("setting", "made", "asked"),
    [("num_steps", 2 * STEPS, STEPS), ("num_seeds", 2, 1)],
)
def test_a_file_of_other_settings_placed_under_the_name_is_not_used(
    tmp_path, trained, setting, made, asked
):
    folder = tmp_path / "cache"
    other = _evaluate(folder, **{setting: made})
    [made_file] = folder.glob("*.npz")
    settings = evaluation.TrainingSettings(
        **{"num_steps": STEPS, "num_seeds": SEEDS, setting: asked}
    )
    wanted = cache.BaselineCache(folder).path("QuadraticTask", settings, _baseline())
    assert wanted != made_file
    shutil.move(made_file, wanted)  # e.g. a 100-step file where a 50-step run looks
    trained.clear()
    with pytest.warns(cache.BaselineCacheWarning) as record:
        result = _evaluate(folder, **{setting: asked})
    [message] = _cache_warnings(record)
    assert str(wanted) in message and setting in message and "other settings" in message
    assert trained == [CAND, "SGD"]  # the baseline trained again
    sgd = result.tasks[0]["SGD"]
    assert sgd.train_loss.shape == (2, settings.num_seeds, settings.num_steps)
    assert sgd.train_loss.shape != other.tasks[0]["SGD"].train_loss.shape
    # The file was rewritten with the right curves: the next run reads it, silently.
    trained.clear()
    with _no_cache_warnings():
        again = _evaluate(folder, **{setting: asked})
    assert trained == [CAND]
    np.testing.assert_array_equal(again.tasks[0]["SGD"].train_loss, sgd.train_loss)


def _valid_file(folder) -> tuple[cache.BaselineCache, evaluation.TrainingSettings, bytes]:
    """A cache with one real file (of SGD on the quadratic): the cache, settings, bytes."""
    settings = evaluation.TrainingSettings(num_steps=STEPS, num_seeds=SEEDS)
    result = evaluation.evaluate_task("QuadraticTask", [_baseline()], settings=settings)
    store = cache.BaselineCache(folder)
    [path] = store.save("QuadraticTask", settings, [_baseline()], result)
    return store, settings, path.read_bytes()


def _wrong_arrays(path, good: bytes) -> bytes:
    """The good file with its ``train_loss`` one step short (metadata left as it was)."""
    path.write_bytes(good)
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    arrays["train_loss"] = arrays["train_loss"][..., :-1]
    np.savez(path, **arrays)
    return path.read_bytes()


def _no_metadata(path, good: bytes) -> bytes:
    path.write_bytes(good)
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files if k != "meta"}
    np.savez(path, **arrays)
    return path.read_bytes()


@pytest.mark.parametrize(
    ("case", "make", "reason"),
    [
        ("random bytes", lambda path, good: b"\x00" + os.urandom(300), "not an .npz"),
        ("truncated", lambda path, good: good[: len(good) // 2], "cannot be read"),
        ("zip of nothing", lambda path, good: good[:4] + b"\x00" * 100, "cannot be read"),
        ("empty", lambda path, good: b"", "is empty"),
        ("wrong arrays", _wrong_arrays, "train_loss has shape"),
        ("no metadata", _no_metadata, "lacks meta"),
    ],
)
def test_an_unusable_file_is_a_miss_with_one_warning_naming_it(tmp_path, case, make, reason):
    store, settings, good = _valid_file(tmp_path / "cache")
    path = store.path("QuadraticTask", settings, _baseline())
    with _no_cache_warnings():
        assert set(store.load("QuadraticTask", settings, [_baseline()])) == {"SGD"}
    path.write_bytes(make(path, good))
    with pytest.warns(cache.BaselineCacheWarning) as record:
        assert store.load("QuadraticTask", settings, [_baseline()]) == {}
    [message] = _cache_warnings(record)
    assert str(path) in message and reason in message, (case, message)


def test_a_corrupt_file_is_trained_again_and_rewritten(tmp_path, trained):
    folder = tmp_path / "cache"
    first = _evaluate(folder)
    [path] = folder.glob("*.npz")
    path.write_bytes(path.read_bytes()[:100])
    trained.clear()
    with pytest.warns(cache.BaselineCacheWarning, match="cannot be read"):
        second = _evaluate(folder)
    assert trained == [CAND, "SGD"]
    np.testing.assert_array_equal(
        first.tasks[0]["SGD"].train_loss, second.tasks[0]["SGD"].train_loss
    )
    trained.clear()
    with _no_cache_warnings():
        _evaluate(folder)
    assert trained == [CAND] and _files(folder) == [path.name]


# ------------------------------------------- the key covers a user's definitions


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """``define(source)`` imports (or reimports) ``user_defs`` from ``source``: a user's module."""
    folder = tmp_path / "user"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # a rewrite is never a stale .pyc

    def define(source: str):
        (folder / "user_defs.py").write_text(textwrap.dedent(source))
        if "user_defs" in sys.modules:
            return importlib.reload(sys.modules["user_defs"])
        return importlib.import_module("user_defs")

    yield define
    sys.modules.pop("user_defs", None)


USER_TASK = """
    import jax.numpy as jnp

    from learnopt.tasks import base


    class UserQuadratic(base.Task):
        def init(self, key):
            return {"w": jnp.ones((3,))}

        def loss(self, params, key, batch):
            return SCALE * jnp.sum(jnp.square(params["w"]))
"""


def test_a_redefined_user_task_does_not_reuse_the_first_definitions_curves(
    tmp_path, monkeypatch, trained, user_module
):
    folder = tmp_path / "cache"
    module = user_module("SCALE = 1.0\n" + textwrap.dedent(USER_TASK))
    monkeypatch.setitem(tasks_base.TASKS._entries, "UserQuadratic", module.UserQuadratic)
    first = _evaluate(folder, task="UserQuadratic")
    # Same name, another definition (as after editing the file between two runs).
    module = user_module("SCALE = 400.0\n" + textwrap.dedent(USER_TASK))
    monkeypatch.setitem(tasks_base.TASKS._entries, "UserQuadratic", module.UserQuadratic)
    trained.clear()
    second = _evaluate(folder, task="UserQuadratic")
    assert trained == [CAND, "SGD"]  # not taken from the first's file
    truth = _evaluate(None, task="UserQuadratic")
    np.testing.assert_allclose(second.tasks[0]["SGD"].train_loss, truth.tasks[0]["SGD"].train_loss)
    assert (
        first.tasks[0]["SGD"].train_loss[0, 0, 0] * 100 < truth.tasks[0]["SGD"].train_loss[0, 0, 0]
    )
    assert len(list(folder.glob("UserQuadratic__SGD__*.npz"))) == 2


def test_a_user_task_key_covers_its_source_its_constructor_and_its_attributes(
    monkeypatch, user_module
):
    module = user_module("SCALE = 1.0\n" + textwrap.dedent(USER_TASK))

    def register(ctor):
        monkeypatch.setitem(tasks_base.TASKS._entries, "UserQuadratic", ctor)
        return cache.task_key("UserQuadratic")

    plain = register(module.UserQuadratic)
    assert plain == cache.task_key("UserQuadratic")  # the same in every process and build
    assert plain.definition["classes"][0].startswith("user_defs.UserQuadratic ")  # its hash
    # Its class's source, and the module-level values that source reads, are in the key.
    body = user_module(
        "SCALE = 1.0\n" + textwrap.dedent(USER_TASK).replace("SCALE *", "SCALE * 3 *")
    )
    assert register(body.UserQuadratic) != plain
    scale = user_module("SCALE = 2.0\n" + textwrap.dedent(USER_TASK))
    assert register(scale.UserQuadratic) != plain
    module = user_module("SCALE = 1.0\n" + textwrap.dedent(USER_TASK))
    assert register(module.UserQuadratic) == plain

    def configured(width):
        task = module.UserQuadratic()
        task.width = width  # configuration the class's source does not show
        return task

    assert register(lambda: configured(3)) != register(lambda: configured(4))
    # learnopt's own tasks are covered by source_hash(): named, never hashed.
    own = cache.task_key("QuadraticTask")
    assert own.definition == {
        "constructor": "learnopt.tasks.quadratics.QuadraticTask",
        "classes": [
            "learnopt.tasks.quadratics.QuadraticTask",
            "learnopt.tasks.base.Task",
            "learnopt.tasks.base._Named",
        ],
    }
    digits = cache.task_key("ImageMLP_Digits8_Relu32").data
    assert "['name', 'digits8']" in str(digits["extra_info"]).replace('"', "'")
    assert digits["train"]["attributes"] == {"split": "train", "batch_size": 128, "seed": 0}


USER_OPTIMIZER = """
    from learnopt.optimizers import sgd


    class UserSGD(sgd.SGD):
        def __init__(self, learning_rate=0.01):
            super().__init__(learning_rate * SCALE)
"""


def test_a_redefined_user_optimizer_does_not_reuse_the_first_definitions_curves(
    tmp_path, monkeypatch, trained, user_module
):
    folder = tmp_path / "cache"
    module = user_module("SCALE = 1.0\n" + textwrap.dedent(USER_OPTIMIZER))
    monkeypatch.setitem(opt_base.OPTIMIZERS._entries, "UserSGD", module.UserSGD)
    first = _evaluate(folder, baseline=_baseline("UserSGD"))
    module = user_module("SCALE = 0.01\n" + textwrap.dedent(USER_OPTIMIZER))
    monkeypatch.setitem(opt_base.OPTIMIZERS._entries, "UserSGD", module.UserSGD)
    trained.clear()
    second = _evaluate(folder, baseline=_baseline("UserSGD"))
    assert trained == [CAND, "UserSGD"]
    first_loss, second_loss = (r.tasks[0]["UserSGD"].train_loss[:, :, -1] for r in (first, second))
    assert np.all(second_loss > first_loss)  # 100x smaller steps: a higher final loss


# ------------------------------------------------- an unusable cache never fails


def test_a_cache_path_that_is_a_file_warns_before_training_and_caches_nothing(
    tmp_path, monkeypatch
):
    path = tmp_path / "cache"
    path.write_text("not a folder")
    warned_before = []
    run = runner.TaskEvaluator.run

    def recording_run(self, *args, **kwargs):
        warned_before.append(len(_cache_warnings(record)))
        return run(self, *args, **kwargs)

    monkeypatch.setattr(runner.TaskEvaluator, "run", recording_run)
    with pytest.warns(cache.BaselineCacheWarning) as record:
        result = _evaluate(path)
    [message] = _cache_warnings(record)
    assert str(path) in message and "not cached" in message
    assert warned_before == [1]  # the warning came before anything trained
    assert set(result.tasks[0].curves) == {CAND, "SGD"}
    assert path.read_text() == "not a folder" and _files(tmp_path) == ["cache"]


def test_a_read_only_cache_is_read_but_not_written(tmp_path, monkeypatch, trained):
    folder = tmp_path / "cache"
    _evaluate(folder)
    before = _files(folder)
    folder.chmod(0o555)
    if os.geteuid() == 0:  # root writes anywhere: make the folder refuse as it would

        def refused(where, prefix):
            raise PermissionError(errno.EACCES, "Permission denied", str(where))

        monkeypatch.setattr(cache, "_make_temp", refused)
    try:
        trained.clear()
        with pytest.warns(cache.BaselineCacheWarning) as record:
            _evaluate(folder)  # the same settings: read from the cache
            _evaluate(folder, baseline=_baseline(lrs=(0.1,)))  # new: trained, not kept
        assert trained == [CAND, CAND, "SGD"]
        assert len(_cache_warnings(record)) == 2  # one per evaluation, at its start
        assert all("Permission denied" in m for m in _cache_warnings(record))
        assert _files(folder) == before
    finally:
        folder.chmod(0o755)


def _disk_full(f, arrays):
    f.write(b"PK\x03\x04 half a zip")
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_is_a_warning_naming_the_file_and_leaves_no_temp_file(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setattr(cache, "_write_npz", _disk_full)
    with pytest.warns(cache.BaselineCacheWarning) as record:
        result = _evaluate(folder, baseline=None)
    [message] = _cache_warnings(record)
    wanted = cache.BaselineCache(folder).path(
        "QuadraticTask", evaluation.TrainingSettings(num_steps=STEPS, num_seeds=SEEDS), _baseline()
    )
    assert f"could not write {wanted}" in message and "No space left" in message
    assert result.tasks[0]["SGD"].train_loss.shape == (2, SEEDS, STEPS)
    assert _files(folder) == []  # no temp file, no partial file


@pytest.mark.parametrize("case", ["a file", "a full disk"])
def test_evaluate_writes_its_results_whatever_the_cache_does(tmp_path, monkeypatch, case):
    # The default cache folder (no --baseline-cache): best effort. A --baseline-cache DIR
    # that cannot be written is a usage error (tests/test_cli_edges.py).
    monkeypatch.setenv(cache.ENV_CACHE_DIR, str(tmp_path / "root"))
    folder = cache.default_cache_dir()
    if case == "a file":
        folder.parent.mkdir()
        folder.write_text("")
    else:
        monkeypatch.setattr(cache, "_write_npz", _disk_full)
    out = tmp_path / "out"
    argv = ["evaluate", "--optimizer", "SGD", "--lr", "0.05", "--out", str(out)]
    argv += ["--tasks", "QuadraticTask", "--baselines", "SGD", "--lrs", "0.01,0.3"]
    argv += ["--steps", str(STEPS), "--seeds", str(SEEDS), "--quiet", "--no-plots"]
    with pytest.warns(cache.BaselineCacheWarning, match=str(folder)):
        assert cli.main(argv) == 0
    assert (out / "summary.md").is_file() and (out / "config.json").is_file()
    assert not folder.is_dir() or _files(folder) == []
