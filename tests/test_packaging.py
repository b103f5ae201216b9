"""Packaging metadata: one version, the licence as an SPDX expression, ``py.typed``.

The installed wheel itself is checked by ``.ci/wheel_smoke.sh`` (built, installed into a
fresh venv and smoke-tested from outside the checkout); these are the cheap checks of the
sources it is built from.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import learnopt
from learnopt import cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_version_is_written_once(pyproject):
    assert "version" not in pyproject["project"]
    assert "version" in pyproject["project"]["dynamic"]
    dynamic = pyproject["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "learnopt.__version__"}
    assert learnopt.__version__.count(".") >= 2


def test_version_flag_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"learnopt {learnopt.__version__}"


def test_licence_is_an_spdx_expression(pyproject):
    assert pyproject["project"]["license"] == "Apache-2.0"
    for name in pyproject["project"]["license-files"]:
        assert (ROOT / name).is_file()


def test_py_typed_ships(pyproject):
    assert (ROOT / "learnopt" / "py.typed").is_file()
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["learnopt"]


def test_the_wheel_smoke_test_runs_in_ci():
    assert ".ci/wheel_smoke.sh" in (ROOT / ".ci" / "run").read_text()
    assert (ROOT / ".ci" / "wheel_smoke.sh").stat().st_mode & 0o111  # executable
