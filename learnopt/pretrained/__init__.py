"""Meta-trained thetas that ship with learnopt: ``learnopt.pretrained.load(name)``.

::

    from learnopt import pretrained

    trained = pretrained.load()                      # the default entry, a TrainedLOpt
    tx = trained.as_optax(weight_decay=1e-4)
    # updates, state = tx.update(grads, state, params, value=loss)

Each entry is a theta file with metadata (:mod:`learnopt.learned_optimizers.theta_files`)
in this package: the architecture and its configuration, the command that meta-trained
it, the learnopt version and the licence (Apache-2.0, as learnopt). Its evaluation
(``learnopt evaluate`` on the held-out suite against tuned Adam) is in
``<name>.md`` beside it (:func:`describe`).

Entries:

``MLPLOpt_mlp8k``
    ``MLPLOpt`` (626 values, 3.9 kB), meta-trained with PES for 8,000 outer steps (35
    minutes on a 2-core CPU) on two MLP families (digits and mnist5k at 8x8). On the
    held-out suite, after 1,000 steps over 3 seeds, it beats Adam tuned over 9 learning
    rates on none of the 9 tasks (loss ratios 1.15-1.4 on the conv nets and language
    models, far behind on the MLPs; it fails to train the 3-layer GELU MLP): a starting
    point and a demonstration of the deployment path, not a replacement for tuned Adam.
    ``describe("MLPLOpt_mlp8k")`` has the table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["DEFAULT", "names", "path", "load", "metadata", "describe"]

#: The entry :func:`load` returns when no name is given.
DEFAULT = "MLPLOpt_mlp8k"


def _folder() -> Path:
    import importlib.resources

    return Path(str(importlib.resources.files(__name__)))


def names() -> list[str]:
    """The names of the shipped thetas.

    Returns:
      The entry names, sorted.
    """
    return sorted(p.stem for p in _folder().glob("*.msgpack"))


def path(name: str = DEFAULT) -> Path:
    """The theta file of entry ``name`` (raises ``KeyError`` listing the entries).

    Args:
      name: the entry (see :func:`names`; default :data:`DEFAULT`).

    Returns:
      The path of its ``.msgpack`` file inside the installed package.

    Raises:
      TypeError: ``name`` is not a string.
      KeyError: no such entry (:class:`~learnopt.registry.UnknownNameError`).
    """
    from learnopt.registry import UnknownNameError, unknown_name_message

    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    file = _folder() / f"{name}.msgpack"
    if not file.is_file():
        raise UnknownNameError(
            unknown_name_message("pretrained theta", name, names(), listing="pretrained")
        )
    return file


def load(name: str = DEFAULT) -> Any:
    """Entry ``name`` as a :class:`~learnopt.learned_optimizers.theta_files.TrainedLOpt`.

    ``lopt, theta = pretrained.load(name)`` unpacks it; ``.as_optax()`` is the optax
    transformation.

    Args:
      name: the entry (see :func:`names`; default :data:`DEFAULT`).

    Returns:
      The learned optimizer, rebuilt from the file's metadata, with its theta.
    """
    from learnopt.learned_optimizers import theta_files

    return theta_files.load(path(name))


def metadata(name: str = DEFAULT) -> dict[str, Any]:
    """The metadata of entry ``name`` (architecture, config, how it was meta-trained).

    Args:
      name: the entry (see :func:`names`; default :data:`DEFAULT`).

    Returns:
      The metadata dict (see :mod:`~learnopt.learned_optimizers.theta_files`).
    """
    from learnopt.learned_optimizers import theta_files

    return theta_files.read_metadata(path(name)) or {}


def describe(name: str = DEFAULT) -> str:
    """The provenance and evaluation of entry ``name`` (its ``<name>.md``).

    Args:
      name: the entry (see :func:`names`; default :data:`DEFAULT`).

    Returns:
      The text of ``<name>.md``, or "" if the entry has none.
    """
    doc = path(name).with_suffix(".md")
    return doc.read_text() if doc.is_file() else ""
