"""The ``pystdlib`` text corpus: the running interpreter's standard-library sources.

:data:`PYSTDLIB_MODULES` are the documents (one file each), :func:`pystdlib_split_of`
puts each whole document in one of :data:`TEXT_SPLITS`, :func:`pystdlib_config_name`
names the TFDS config of the running Python (the text differs between versions) and
:func:`read_pystdlib_documents` reads them. Plain standard library; the TFDS builder is
:class:`learnopt.tasks.datasets._builders.LearnoptPyStdlib`, the batches come from
:mod:`learnopt.tasks.datasets.language`.
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

#: Pure-Python standard-library modules that make up the ``pystdlib`` text corpus: single
#: files present in every CPython from 3.11 on, sorted. Each file is one document.
PYSTDLIB_MODULES: tuple[str, ...] = (
    "_collections_abc", "_pydecimal", "_pyio", "_strptime", "_threading_local",
    "_weakrefset", "abc", "argparse", "ast", "base64", "bdb", "bisect", "calendar", "cmd",
    "code", "codecs", "codeop", "colorsys", "compileall", "configparser", "contextlib",
    "copy", "copyreg", "csv", "dataclasses", "datetime", "difflib", "dis", "doctest",
    "enum", "filecmp", "fileinput", "fnmatch", "fractions", "ftplib", "functools", "getopt",
    "getpass", "gettext", "glob", "gzip", "hashlib", "heapq", "hmac", "imaplib", "inspect",
    "ipaddress", "keyword", "linecache", "locale", "lzma", "mailbox", "mimetypes", "netrc",
    "numbers", "opcode", "operator", "optparse", "os", "pdb", "pickle", "pickletools",
    "pkgutil", "platform", "plistlib", "poplib", "posixpath", "pprint", "profile", "pstats",
    "py_compile", "pyclbr", "pydoc", "queue", "quopri", "random", "reprlib", "rlcompleter",
    "runpy", "sched", "secrets", "selectors", "shelve", "shlex", "shutil", "signal", "site",
    "smtplib", "socket", "socketserver", "ssl", "stat", "statistics", "string",
    "stringprep", "struct", "subprocess", "symtable", "tabnanny", "tarfile", "tempfile",
    "textwrap", "threading", "timeit", "token", "tokenize", "trace", "traceback",
    "tracemalloc", "types", "typing", "uuid", "warnings", "wave", "weakref", "webbrowser",
    "zipapp", "zipimport",
)  # fmt: skip

TEXT_SPLITS = ("train", "inner_valid", "outer_valid", "test")


def pystdlib_split_of(index: int) -> str:
    """Split of the ``index``-th module of :data:`PYSTDLIB_MODULES` (whole documents).

    Every 10th module (from the 4th) is ``test``, every 20th (from the 8th) is
    ``inner_valid``, every 20th (from the 18th) ``outer_valid``, the rest ``train``:
    about 80 / 5 / 5 / 10 % of the modules, no document in two splits.

    Args:
      index: the module's position in :data:`PYSTDLIB_MODULES`.

    Returns:
      one of :data:`TEXT_SPLITS`.
    """
    if index % 10 == 3:
        return "test"
    if index % 20 == 7:
        return "inner_valid"
    if index % 20 == 17:
        return "outer_valid"
    return "train"


def pystdlib_dir() -> Path:
    """The running interpreter's standard-library folder.

    Returns:
      ``sysconfig``'s ``stdlib`` path.
    """
    return Path(sysconfig.get_paths()["stdlib"])


def pystdlib_config_name() -> str:
    """TFDS config of the corpus for the running Python (``py311`` for 3.11): the text of
    the standard library differs between Python versions, so each prepares its own.

    Returns:
      ``py<major><minor>``.
    """
    return f"py{sys.version_info.major}{sys.version_info.minor}"


def read_pystdlib_documents(
    stdlib_dir: Path | None = None,
) -> dict[str, list[tuple[str, bytes]]]:
    """``{split: [(module name, file bytes), ...]}`` for the ``pystdlib`` corpus.

    Args:
      stdlib_dir: the standard-library folder to read; ``None``: :func:`pystdlib_dir`.

    Returns:
      every module of :data:`PYSTDLIB_MODULES` in its split, in that order.

    Raises:
      FileNotFoundError: some of the modules' sources are not in the folder.
    """
    root = Path(stdlib_dir) if stdlib_dir is not None else pystdlib_dir()
    out: dict[str, list[tuple[str, bytes]]] = {split: [] for split in TEXT_SPLITS}
    missing = [m for m in PYSTDLIB_MODULES if not (root / f"{m}.py").is_file()]
    if missing:
        raise FileNotFoundError(
            f"The pystdlib corpus needs the standard-library sources {', '.join(missing)}.py "
            f"in {root}, which this Python installation lacks (a stripped install?). "
            "Use a full CPython installation."
        )
    for i, module in enumerate(PYSTDLIB_MODULES):
        out[pystdlib_split_of(i)].append((module, (root / f"{module}.py").read_bytes()))
    return out
