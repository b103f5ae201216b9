"""The lazy package faces (learnopt.evaluation, learnopt.run) offer exactly the names their
modules define in ``__all__``, read from the source, and import a module only on use."""

from __future__ import annotations

import subprocess
import sys

import pytest

from learnopt import _lazy


@pytest.mark.parametrize("package", ["learnopt.evaluation", "learnopt.run"])
def test_a_face_offers_what_its_modules_define_and_nothing_else(package):
    import importlib

    face = importlib.import_module(package)
    expected = {n for m in face.MODULES for n in _lazy.defined_names(m)}
    assert set(face.__all__) == expected
    for name in face.__all__:
        owner = next(m for m in face.MODULES if name in _lazy.defined_names(m))
        assert getattr(face, name) is getattr(importlib.import_module(owner), name)
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        face.nope  # noqa: B018


def test_defined_names_leave_out_imports_and_aliases(tmp_path, monkeypatch):
    (tmp_path / "lazy_probe.py").write_text(
        "from os import path\n"
        "import json as j\n"
        "__all__ = ['path', 'j', 'f', 'C', 'X', 'Y', 'Alias']\n"
        "def f(): pass\n"
        "class C: pass\n"
        "X = 1\n"
        "Y: int = 2\n"
        "Alias = C\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _lazy.defined_names("lazy_probe") == ["f", "C", "X", "Y"]


def test_two_modules_defining_one_name_is_an_error(tmp_path, monkeypatch):
    for mod in ("probe_a", "probe_b"):
        (tmp_path / f"{mod}.py").write_text("__all__ = ['f']\ndef f(): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ImportError, match="f is defined by probe_a and probe_b"):
        _lazy.lazy_face("learnopt", ["probe_a", "probe_b"])


def test_the_faces_import_no_jax():
    code = "import sys, learnopt.evaluation, learnopt.run; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
