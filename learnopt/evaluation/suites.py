"""Task suites of an evaluation: the tasks ``learnopt evaluate`` trains, by suite name.

A suite is a list of registered task names (built fresh for each evaluation, so their
data is reproducible) or of tasks. :func:`get_suite` reads the suites of
:mod:`learnopt.tasks.suites` and the small :data:`LOCAL_SUITES` defined here;
:func:`default_suite` is the one an evaluation runs when it is given none.
"""

from __future__ import annotations

from typing import Any

from learnopt.evaluation.config import DEFAULT_SUITE_PREFERENCE
from learnopt.registry import UnknownNameError, unknown_name_message
from learnopt.tasks import base as tasks_base

__all__ = ["LOCAL_SUITES", "get_suite", "suite_names", "default_suite", "task_and_name"]


#: Small suites defined here, used until (and besides) ``learnopt.tasks.suites``.
LOCAL_SUITES: dict[str, tuple[str, ...]] = {
    "smoke": ("BatchQuadraticTask", "ImageMLP_Digits8_Relu32"),
}


def _suites_module() -> Any:
    try:
        from learnopt.tasks import suites
    except ImportError:
        return None
    return suites


def suite_names() -> list[str]:
    """Names accepted by :func:`get_suite`.

    Returns:
      The sorted names of :data:`LOCAL_SUITES` and of ``learnopt.tasks.suites``.
    """
    names = set(LOCAL_SUITES)
    suites = _suites_module()
    if suites is not None:
        registry = getattr(suites, "SUITES", None)
        if registry is not None:
            names.update(registry.names() if hasattr(registry, "names") else registry)
        elif hasattr(suites, "suite_names"):
            names.update(suites.suite_names())
    return sorted(names)


def get_suite(name: str) -> list[str | tasks_base.Task]:
    """The tasks of the suite ``name``: task names (built fresh per evaluation) or tasks.

    Reads ``learnopt.tasks.suites`` (its ``get_suite`` or ``SUITES`` registry) when that
    module exists, then :data:`LOCAL_SUITES`.

    Args:
      name: a suite name (:func:`suite_names`).

    Returns:
      The suite's entries, task names or :class:`~learnopt.tasks.base.Task` objects.

    Raises:
      KeyError: an unknown name (the message names the closest suites).
    """
    if not isinstance(name, str):
        raise TypeError(f"suite name must be a string, got {type(name).__name__}")
    suites = _suites_module()
    if suites is not None and name not in LOCAL_SUITES:
        getter = getattr(suites, "get_suite", None)
        registry = getattr(suites, "SUITES", None)
        try:
            if getter is not None:
                return list(getter(name))
            if registry is not None:
                entry = registry.get(name) if hasattr(registry, "get") else registry[name]
                return list(entry() if callable(entry) else entry)
        except KeyError:
            pass
    if name in LOCAL_SUITES:
        return list(LOCAL_SUITES[name])
    raise UnknownNameError(unknown_name_message("suite", name, suite_names(), listing="suites"))


def default_suite() -> str:
    """The suite to evaluate on when none is given.

    Returns:
      The first of :data:`~learnopt.evaluation.config.DEFAULT_SUITE_PREFERENCE` that is
      defined (the held-out suite), else ``"smoke"``.
    """
    names = suite_names()
    for preferred in DEFAULT_SUITE_PREFERENCE:
        if preferred in names:
            return preferred
    return "smoke"


def task_and_name(task: str | tasks_base.Task) -> tuple[tasks_base.Task, str]:
    """A suite entry as a task and its name; a name is built fresh (reproducible data).

    Args:
      task: a registered task name or a task.

    Returns:
      ``(task, name)``.
    """
    if isinstance(task, str):
        return tasks_base.get_task(task), task
    if isinstance(task, tasks_base.Task):
        return task, task.name
    raise TypeError(f"expected a task or a registered task name, got {type(task).__name__}")
