"""The one registry mechanism behind tasks, optimizers, learned optimizers and estimators."""

import pytest

from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.outer_trainers import gradient_estimator
from learnopt.registry import Registry, UnknownNameError, close_matches
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


def test_unknown_name_names_close_matches_and_a_few_known_ones():
    reg = Registry("widget")
    reg.register(lambda: 1, name="alpha")
    reg.register(lambda: 2, name="beta")
    with pytest.raises(UnknownNameError, match=r"Unknown widget 'alpah'; did you mean 'alpha'\?"):
        reg.get("alpah")
    with pytest.raises(KeyError, match=r"Unknown widget 'gamma' \(known: alpha, beta\)$"):
        reg.get("gamma")
    with pytest.raises(TypeError, match="must be a string"):
        reg.get(3)


def _many(listing=None):
    reg = Registry("widget", listing=listing)
    for i in range(40):
        reg.register(lambda: 0, name=f"Widget_{i:02d}_{'x' * 20}")
    reg.register(lambda: 0, name="ImageMLP_Digits8_Relu32")
    return reg


def test_many_names_point_to_their_listing_in_one_short_line():
    reg = _many(listing="widgets")
    with pytest.raises(UnknownNameError) as e:
        reg.get("ImageMLP_Digits8_Relu3")
    text = str(e.value)
    assert text.startswith("Unknown widget 'ImageMLP_Digits8_Relu3'; did you mean ")
    assert "'ImageMLP_Digits8_Relu32'" in text
    assert text.endswith("('learnopt list widgets' shows all 41)")
    assert "\n" not in text and len(text) < 300
    assert "Widget_39" not in text  # not every name
    # Without a listing the names are counted.
    assert str(_registry_error(_many(), "nothing like it")).endswith("(41 known)")


def _registry_error(reg, name):
    with pytest.raises(UnknownNameError) as e:
        reg.constructor(name)
    return e.value


@pytest.mark.parametrize(
    "name, first",
    [
        ("imagemlp_digits8_relu32", "ImageMLP_Digits8_Relu32"),  # case only
        ("IMAGEMLP_DIGITS8_RELU3", "ImageMLP_Digits8_Relu32"),  # case and a typo
        ("digits8", "ImageMLP_Digits8_Relu32"),  # a part of the name
    ],
)
def test_close_matches_fall_back_to_ignoring_case_and_to_parts(name, first):
    assert close_matches(name, _many().names())[0] == first


def test_long_unknown_names_are_shortened():
    text = str(_registry_error(_many(), "y" * 500))
    assert "y" * 57 + "..." in text and len(text) < 150


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
    text = str(_registry_error(reg, name + "_nope"))
    assert f"did you mean '{name}'" in text and len(text) < 300
    # Where the rest are: the listing command, or (few names) the names themselves.
    assert text.endswith(
        (f"('learnopt list {reg.listing}' shows all {len(reg)})", f"(known: {', '.join(reg)})")
    )
