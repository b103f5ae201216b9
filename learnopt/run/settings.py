"""A run's settings resolved: what was asked, the recipe's, the resumed run's, the defaults.

Each setting of :class:`learnopt.run.config.RunConfig` is, in this order: the value the
caller gave, the resumed run's (a resumed run keeps its settings; a given value that
differs is refused), the recipe's (:mod:`learnopt.run.recipes`, for an architecture
given by name), the default. Settings given as objects (a ``Task``, a learner, an outer
optimizer) are recorded as "custom": resuming such a run needs the same objects again.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from learnopt import _validate
from learnopt.run import config as run_config
from learnopt.run import recipes

__all__ = ["check_setting", "check_option", "resolve", "CUSTOM", "name_of"]

#: How config.json records a setting given as an object.
CUSTOM = "<object>"


def name_of(obj: Any) -> str:
    """A readable name of a task, learned optimizer or optimizer object.

    Args:
      obj: anything; its ``name`` (attribute or method) is used when it is a string.

    Returns:
      The name, else the type's name.
    """
    name = getattr(obj, "name", None)
    if callable(name):
        try:
            name = name()
        except TypeError:
            name = None
    return str(name) if isinstance(name, str) else type(obj).__name__


def _float32(name: str, value: float) -> float:
    """``value`` must stay finite in float32, the dtype it takes on the device."""
    if not math.isfinite(float(np.float32(value))):
        raise ValueError(
            f"{name} must be a finite number in float32 (at most 3.4e38), got {value!r}"
        )
    return value


def check_setting(name: str, value: Any) -> Any:
    """Validates one run setting (names are checked later, against the registries).

    Args:
      name: a name of :data:`learnopt.run.config.RUN_SETTINGS`.
      value: its value, or None (unset).

    Returns:
      The value normalized (a list for ``families``, a dict for ``lopt_config``).
    """
    if value is None:
        return None
    if name in ("trunc_length", "total_length", "num_tasks"):
        return _validate.positive_int(name, value)
    if name in ("std", "outer_lr", "meta_loss_power"):
        return _float32(name, _validate.positive_float(name, value))
    if name == "max_grad_norm":
        return _float32(name, _validate.optional_positive_float(name, value))
    if name == "seed":
        return _validate.seed(name, value)
    if name == "family_balance" and value not in run_config.FAMILY_BALANCES:
        raise ValueError(
            f"family_balance must be one of {list(run_config.FAMILY_BALANCES)}, got {value!r}"
        )
    if name == "trainer":
        trainers = sorted(run_config.TRAINERS)
        if not isinstance(value, str):
            raise TypeError(f"trainer must be a name in {trainers}, got {value!r}")
        if value not in run_config.TRAINERS:
            raise ValueError(f"trainer must be one of {trainers}, got {value!r}")
    if name == "families":
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list | tuple) or not value:
            raise TypeError(f"families must be a non-empty list of family names, got {value!r}")
        if not all(isinstance(v, str) for v in value):
            raise TypeError(f"families must be family names (strings), got {value!r}")
        return list(value)
    if name == "init_theta":
        if not isinstance(value, str | os.PathLike) or not str(value):
            raise TypeError(
                f"init_theta must be a theta file or a shipped entry's name, got {value!r}"
            )
        path = Path(value)  # a file is recorded by its absolute path (resume from anywhere)
        return str(path.absolute()) if path.is_file() else str(value)
    if name == "freeze":
        if isinstance(value, str):
            value = [value]
        if (
            not isinstance(value, list | tuple)
            or not value
            or not all(isinstance(v, str) and v.strip("/") for v in value)
        ):
            raise TypeError(f"freeze must be a non-empty list of theta keys, got {value!r}")
        return list(value)
    if name == "lopt_config":
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise TypeError(f"lopt_config must be a dict of constructor arguments, got {value!r}")
        return dict(value)
    return value


def check_option(name: str, value: Any) -> Any:
    """Validates one option a resumed run may change.

    Args:
      name: a name of :data:`learnopt.run.config.RUN_OPTIONS`.
      value: its value (not None).

    Returns:
      The value normalized (``data_dir`` as an absolute path string).
    """
    if name in ("steps", "log_every", "keep_checkpoints"):
        return _validate.positive_int(name, value)
    if name in ("checkpoint_every", "health_window"):
        return _validate.non_negative_int(name, value)
    if name == "data_dir" and value is not None:
        return str(_validate.readable_dir(name, value).absolute())
    return value


def _first(value: Any, fallback: Any) -> Any:
    return fallback if value is None else value


def resolve(
    given: dict[str, Any],
    options: dict[str, Any],
    saved: Mapping[str, Any],
    learner: Any,
    theta_opt: Any,
) -> tuple[dict[str, Any], dict[str, Any], set[str]]:
    """Each setting: explicit, else the resumed run's, else the recipe's, else the default.

    Long (over 80 lines): one rule (explicit, resumed, recipe, default) applied to
    every setting in turn, with the checks between settings where they are decided.

    Args:
      given: the settings the caller gave (None where not given), checked.
      options: the options the caller gave (None where not given), checked.
      saved: the resumed run's config.json, or ``{}`` for a new run.
      learner: a learner object given instead of the settings that build one, or None.
      theta_opt: an outer optimizer object given instead of ``outer_lr``, or None.

    Returns:
      ``(settings, options, custom)``: every setting and option resolved, and the names
      of the settings given as objects.

    Raises:
      ValueError: a resumed run asked to change a setting, or an object where the run
        had a name (or the reverse).
    """
    settings: dict[str, Any] = {}
    custom = set(saved.get("custom", ()))
    if learner is not None and (given["init_theta"] is not None or given["freeze"] is not None):
        raise ValueError(
            "init_theta and freeze apply to a learner built from the settings; with "
            "learner=, give it init_theta_from_path= and frozen_keys= instead"
        )
    origin = None if saved or learner is not None else _init_theta_origin(given)
    if origin is not None and given["lopt"] is None:
        given = {**given, "lopt": origin[0]}  # the file says what it is a theta of
    recipe = _recipe_settings(given, saved) if learner is None else {}
    for name in run_config.RUN_SETTINGS:
        if name == "lopt_config":
            continue
        default = recipe.get(name, run_config.default_of(name))
        value = given[name]
        is_object = name in ("task", "lopt") and value is not None and not isinstance(value, str)
        if (learner is not None and name != "seed") or (
            theta_opt is not None and name == "outer_lr"
        ):
            value, is_object = CUSTOM, True
        if saved:
            old = saved.get(name, default)
            if name in custom:
                if not is_object:
                    raise ValueError(
                        f"resume: this run was started with a custom {name} object; pass the "
                        f"same {name}= (or learner=) again to resume it"
                    )
            elif is_object:
                raise ValueError(
                    f"resume: this run was started with {name}={old!r}; pass that, not an object"
                )
            elif value is not None and value != old:
                raise ValueError(
                    f"resume: {name}={value!r} differs from the run's {name}={old!r}; a resumed "
                    "run keeps its settings (start a new run to change them)"
                )
            value = old if value is None else value
        settings[name] = default if value is None else value
        if is_object:
            custom.add(name)
    settings["lopt_config"] = _resolve_lopt_config(given, saved, settings, learner, custom, origin)
    if settings["families"]:
        settings["task"] = None
    options = {
        name: options[name]
        if options[name] is not None
        else saved.get(name, run_config.default_of(name))
        for name in run_config.RUN_OPTIONS
    }
    if learner is None:
        trunc, total, num_tasks = run_config.lengths(
            settings["trainer"],
            settings["trunc_length"],
            settings["total_length"],
            settings["num_tasks"],
        )
        settings.update(trunc_length=trunc, total_length=total, num_tasks=num_tasks)
    return settings, options, custom


def _recipe_settings(given: Mapping[str, Any], saved: Mapping[str, Any]) -> dict[str, Any]:
    """The training settings that go with the run's architecture (learnopt.run.recipes)."""
    lopt = _first(given["lopt"], saved.get("lopt", run_config.DEFAULT_LOPT))
    if not isinstance(lopt, str):
        return {}
    trainer = _first(given["trainer"], saved.get("trainer", run_config.DEFAULT_TRAINER))
    return recipes.training_defaults(lopt, trainer)


def _init_theta_origin(given: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The architecture and configuration that a new run's ``init_theta`` file records.

    ``None`` without ``init_theta``, or for a file without a usable description when
    ``lopt`` is given (the theta must then fit that learned optimizer, checked when it is
    built); without ``lopt``, such a file is an error.
    """
    if given["init_theta"] is None:
        return None
    from learnopt import pretrained
    from learnopt.learned_optimizers import theta_files

    try:
        path = pretrained.find(given["init_theta"])
        metadata = theta_files.read_metadata(path)
    except (OSError, ValueError) as e:  # ThetaFileError is a ValueError
        raise ValueError(f"init_theta: {e}") from None
    name = (metadata or {}).get("architecture")
    config = (metadata or {}).get("config")
    if isinstance(name, str) and metadata.get("registered", True) and isinstance(config, dict):
        return name, config
    if given["lopt"] is None:
        what = "has no metadata" if metadata is None else "does not say its learned optimizer"
        raise ValueError(
            f"init_theta: {path} {what} (a checkpoints.save_theta file or an older run): "
            "name the learned optimizer it holds a theta of with lopt (--lopt)"
        )
    return None


def _wrapper_config(name: str) -> Any:
    """The ``wrapper_config(architecture, config)`` of a registered learned optimizer
    that wraps another's theta (:class:`~learnopt.learned_optimizers.width_aware.WidthAware`),
    or None."""
    from learnopt.learned_optimizers import base as lopt_base

    if name not in lopt_base.registered_learned_optimizers():
        return None
    return getattr(lopt_base.LOPTS.constructor(name), "wrapper_config", None)


def _resolve_lopt_config(
    given: Mapping[str, Any],
    saved: Mapping[str, Any],
    settings: Mapping[str, Any],
    learner: Any,
    custom: set[str],
    origin: tuple[str, dict[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """The constructor arguments of a learned optimizer given by name.

    A new run: the architecture's defaults (``learnopt.run.recipes.LOPT_DEFAULTS``), or
    the configuration recorded in the ``init_theta`` file (``origin``) when the run
    trains that file's architecture, updated by ``lopt_config``. A resumed run keeps its
    own (``{}``, the constructor's defaults, for runs written before lopt_config was
    recorded); a ``lopt_config`` that would change it is refused.
    """
    if learner is not None or "lopt" in custom or not isinstance(settings["lopt"], str):
        if given["lopt_config"]:
            raise ValueError(
                "lopt_config applies to a learned optimizer given by name, not an object"
            )
        return None
    if saved:
        old = saved.get("lopt_config") or {}
        if given["lopt_config"] is not None and {**old, **given["lopt_config"]} != old:
            raise ValueError(
                f"resume: lopt_config={given['lopt_config']!r} differs from the run's "
                f"lopt_config={old!r}; a resumed run keeps its settings"
            )
        return dict(old)
    wrapper = None if origin is None else _wrapper_config(settings["lopt"])
    if origin is not None and origin[0] == settings["lopt"]:
        base = origin[1]  # the theta means what it means under the file's configuration
    elif wrapper is not None:
        base = wrapper(*origin)  # a wrapper of the file's optimizer (WidthAware)
    else:
        base = recipes.lopt_defaults(settings["lopt"])
    return {**base, **(given["lopt_config"] or {})}
