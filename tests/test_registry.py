"""The one registry mechanism behind tasks, optimizers, learned optimizers and estimators."""

import pytest

from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.outer_trainers import gradient_estimator
from learnopt.registry import Registry, UnknownNameError
from learnopt.tasks import base as tasks_base


def test_register_as_decorator_and_by_name_then_build_with_kwargs():
    reg = Registry("widget")

    @reg.register
    class Foo:
        def __init__(self, size=1):
            self.size = size

    reg.register(lambda: "bar", name="bar")
    assert reg.names() == ["Foo", "bar"]
    assert reg.get("Foo", size=3).size == 3
    assert reg.get("bar") == "bar"
    assert "Foo" in reg and "baz" not in reg and len(reg) == 2


def test_unknown_name_lists_close_matches_and_all_names():
    reg = Registry("widget")
    reg.register(lambda: 1, name="alpha")
    reg.register(lambda: 2, name="beta")
    with pytest.raises(UnknownNameError, match=r"Unknown widget 'alpah'. Did you mean alpha\?"):
        reg.get("alpah")
    with pytest.raises(KeyError, match="Known: alpha, beta"):
        reg.get("gamma")
    with pytest.raises(TypeError, match="must be a string"):
        reg.get(3)


def test_loader_runs_once_before_first_lookup():
    calls = []
    reg = Registry("widget", loader=lambda: calls.append(reg.register(lambda: 0, name="late")))
    assert calls == []
    assert reg.names() == ["late"] and reg.names() == ["late"]
    assert len(calls) == 1


@pytest.mark.parametrize(
    "reg, name",
    [
        (tasks_base.TASKS, "QuadraticTask"),
        (opt_base.OPTIMIZERS, "Adam"),
        (lopt_base.LOPTS, "MLPLOpt"),
        (gradient_estimator.ESTIMATORS, "TruncatedPES"),
    ],
)
def test_every_kind_uses_the_shared_registry(reg, name):
    assert isinstance(reg, Registry)
    assert name in reg.names()
    with pytest.raises(UnknownNameError, match="Known:"):
        reg.constructor(name + "_nope")
