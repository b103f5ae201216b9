"""learnopt's shipped ``Celo2`` entry against PyLO's own torch ``Celo2_naive``, step by step.

Runs PyLO's ``Celo2_naive`` (github.com/Belilovsky-Lab/pylo at faf6fcb, read from a
clone or the fetched mirror) with its own ``celo2_weights.pt``, in a separate virtualenv
with torch (CPU), and learnopt's ``Celo2`` loaded by ``learnopt.pretrained.load("Celo2")``
(the same weights, converted without torch by ``examples/convert_published.py``), on the
same fixed inputs: five tensors in this order, a 2-D input layer, a 4-D conv kernel
(torch layout ``[out, in, kh, kw]``), a 2-D hidden matrix, a 1-D bias and a 2-D output
layer, with gradients of very different scales (fixed seed). PyLO sends the bias and the
first and last matrices to its AdamW and the conv kernel and the hidden matrix to the
learned rule; learnopt's entry does the same. Two settings: PyLO's defaults (learning
rate 1e-3, no weight decay: the entry as shipped) and learning rate 1e-2 with weight
decay 0.1 (the entry's config with ``step_mult`` and ``weight_decay`` changed).

Prints, per setting and tensor kind, the largest relative difference of the parameters
over the steps (``max |a - b| / max |b|`` per tensor after each step) and of the
distance moved from the start (the same on ``p_t - p_0``), and exits 1 if a parameter
difference is above ``--tol`` (1e-5).

::

    python benchmarks/compare_celo2_torch.py --source /work/.mirror/Belilovsky-Lab+pylo/repo
    python benchmarks/compare_celo2_torch.py --record   # the numbers tests/test_celo2.py pins

The torch virtualenv is built on first use (``pip install torch numpy --index-url
https://download.pytorch.org/whl/cpu``, else plain PyPI) at ``--venv`` (default
``~/.cache/learnopt/celo2-torch-venv``, outside the repository) and reused afterwards;
torch is never a dependency of learnopt. Only PyLO's three files that ``Celo2_naive``
needs (``pylo/optim/Celo2_naive.py``, ``pylo/models/Celo2_MLP.py``,
``pylo/util/newton_schulz.py``) and the weights are extracted at the pinned commit into
a temporary folder, with empty package ``__init__`` files (PyLO's own import its CUDA
optimizers).

``--record`` prints PyLO's parameters after the 10 steps of the pinned case (this
script's case, default setting): the first three values of each tensor and the summed
absolute distance moved, the numbers ``tests/test_celo2.py`` holds.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

COMMIT = "faf6fcb3665a9e7a3096521db027c639bc284e82"
DEFAULT_SOURCE = Path("/work/.mirror/Belilovsky-Lab+pylo/repo")
ROOT = Path(__file__).resolve().parents[1]
#: PyLO's files that ``Celo2_naive`` imports, and its weights.
PYLO_FILES = (
    "pylo/optim/Celo2_naive.py",
    "pylo/models/Celo2_MLP.py",
    "pylo/util/newton_schulz.py",
    "pylo/models/celo2_weights.pt",
)
#: The tensors of the fixed case, in the optimizer's order: (kind, shape, gradient scale).
TENSORS = (
    ("first 2-D (AdamW)", (6, 5), 0.1),
    ("4-D conv (learned)", (4, 2, 3, 3), 1e-3),
    ("2-D (learned)", (5, 3), 1.0),
    ("1-D (AdamW)", (7,), 10.0),
    ("last 2-D (AdamW)", (3, 6), 0.01),
)
#: (learning rate, weight decay): PyLO's defaults (the shipped entry), then a decayed one.
SETTINGS = ((1e-3, 0.0), (1e-2, 0.1))


def case(steps: int, seed: int = 2602) -> tuple[list[np.ndarray], list[list[np.ndarray]]]:
    """The fixed inputs: the initial parameters and ``steps`` gradients, float32.

    Args:
      steps: the number of gradients.
      seed: the generator's seed.

    Returns:
      ``(params, grads)``: one array per tensor of :data:`TENSORS`; ``grads[t][i]`` is
      the gradient of tensor ``i`` at step ``t``.
    """
    rng = np.random.default_rng(seed)
    params = [(0.3 * rng.standard_normal(shape)).astype(np.float32) for _, shape, _ in TENSORS]
    grads = [
        [(scale * rng.standard_normal(shape)).astype(np.float32) for _, shape, scale in TENSORS]
        for _ in range(steps)
    ]
    return params, grads


# ------------------------------------------------------------------------- the torch side


def default_venv() -> Path:
    """``$XDG_CACHE_HOME/learnopt/celo2-torch-venv`` (``~/.cache`` when unset)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "learnopt" / "celo2-torch-venv"


def torch_python(venv: Path) -> Path:
    """The python of a virtualenv with torch (CPU) and numpy, built on first use.

    Args:
      venv: the virtualenv's folder (refused inside the ``learnopt`` package).

    Returns:
      Its ``bin/python``.
    """
    venv = venv.resolve()
    if venv.is_relative_to(ROOT / "learnopt"):
        raise SystemExit(f"--venv {venv} is inside the learnopt package")
    python = venv / "bin" / "python"
    check = [str(python), "-c", "import torch, numpy"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return python
    print(f"building {venv} (torch CPU, numpy)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    install = [str(python), "-m", "pip", "install", "--quiet", "torch", "numpy"]
    cpu_index = ["--index-url", "https://download.pytorch.org/whl/cpu"]
    if subprocess.run(install + cpu_index).returncode != 0:
        print("the torch CPU index failed; installing torch from PyPI", flush=True)
        subprocess.run(install, check=True)
    subprocess.run(check, check=True)
    return python


def extract_pylo(source: Path, dest: Path) -> Path:
    """PyLO's files of :data:`PYLO_FILES` at COMMIT under ``dest``, with empty ``__init__``s."""
    git_dir = source / ".git" if (source / ".git").exists() else source
    for path in PYLO_FILES:
        data = subprocess.run(
            ["git", f"--git-dir={git_dir}", "show", f"{COMMIT}:{path}"],
            capture_output=True,
            check=True,
        ).stdout
        (dest / path).parent.mkdir(parents=True, exist_ok=True)
        (dest / path).write_bytes(data)
    for package in ("pylo", "pylo/optim", "pylo/models", "pylo/util"):
        (dest / package / "__init__.py").write_text("")
    return dest


def torch_side(pylo: Path, inputs: Path, outputs: Path) -> None:
    """Runs in the torch virtualenv: PyLO's ``Celo2_naive`` on the saved case, every setting.

    Args:
      pylo: the folder holding the extracted ``pylo`` package.
      inputs: the ``.npz`` of the case (``p{i}``, ``g{t}_{i}``, ``steps``).
      outputs: the ``.npz`` to write, ``s{k}_t{t}_{i}``: tensor ``i`` after step ``t``
        in setting ``k``.
    """
    sys.path.insert(0, str(pylo))
    import torch
    from pylo.optim.Celo2_naive import Celo2_naive

    torch.set_num_threads(1)
    data = np.load(inputs)
    steps, n = int(data["steps"]), len(TENSORS)
    out = {}
    for k, (lr, weight_decay) in enumerate(SETTINGS):
        params = [torch.nn.Parameter(torch.from_numpy(data[f"p{i}"].copy())) for i in range(n)]
        opt = Celo2_naive(params, lr=lr, weight_decay=weight_decay)  # its own weights
        for t in range(steps):
            for i, p in enumerate(params):
                p.grad = torch.from_numpy(data[f"g{t}_{i}"].copy())
            opt.step()
            for i, p in enumerate(params):
                out[f"s{k}_t{t}_{i}"] = p.detach().numpy().copy()
    np.savez(outputs, **out)


def run_pylo(source: Path, venv: Path, steps: int) -> list[list[list[np.ndarray]]]:
    """PyLO's parameters: ``[setting][step][tensor]``."""
    python = torch_python(venv)
    params, grads = case(steps)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        extract_pylo(source, tmp / "src")
        arrays = {f"p{i}": p for i, p in enumerate(params)}
        arrays.update({f"g{t}_{i}": g for t, gs in enumerate(grads) for i, g in enumerate(gs)})
        np.savez(tmp / "in.npz", steps=steps, **arrays)
        script = str(Path(__file__).resolve())
        subprocess.run(
            [str(python), script, "--torch-side", str(tmp / "src"), str(tmp / "in.npz"),
             str(tmp / "out.npz")],
            check=True,
        )  # fmt: skip
        out = np.load(tmp / "out.npz")
        return [
            [[out[f"s{k}_t{t}_{i}"] for i in range(len(TENSORS))] for t in range(steps)]
            for k in range(len(SETTINGS))
        ]


# ----------------------------------------------------------------------- the learnopt side


def run_learnopt(steps: int) -> list[list[list[np.ndarray]]]:
    """learnopt's parameters with the shipped entry: ``[setting][step][tensor]``."""
    import jax
    import jax.numpy as jnp

    from learnopt import pretrained
    from learnopt.learned_optimizers import celo2, theta_files

    trained = pretrained.load("Celo2")
    config = theta_files.lopt_config(trained.lopt)
    params, grads = case(steps)
    result = []
    for lr, weight_decay in SETTINGS:
        lopt = trained.lopt
        if (lr, weight_decay) != (lopt.step_mult, lopt.weight_decay):
            lopt = celo2.Celo2(**{**config, "step_mult": lr, "weight_decay": weight_decay})
        opt = lopt.opt_fn(trained.theta)
        update = jax.jit(opt.update)
        state = opt.init([jnp.asarray(p) for p in params])
        per_step = []
        for g in grads:
            state = update(state, [jnp.asarray(x) for x in g])
            per_step.append([np.asarray(x) for x in opt.get_params(state)])
        result.append(per_step)
    return result


# ---------------------------------------------------------------------------------- main


def compare(ours, theirs, p0) -> tuple[float, float]:
    """``(max params rel. difference, max move rel. difference)`` over the steps."""
    worst_p = worst_move = 0.0
    for a, b in zip(ours, theirs, strict=True):
        diff = float(np.max(np.abs(a.astype(np.float64) - b)))
        worst_p = max(worst_p, diff / float(np.max(np.abs(b))))
        worst_move = max(worst_move, diff / max(float(np.max(np.abs(b - p0))), 1e-30))
    return worst_p, worst_move


def record(source: Path, venv: Path) -> None:
    """Prints PyLO's params after the pinned case's 10 steps (default setting)."""
    params, _ = case(10)
    last = run_pylo(source, venv, 10)[0][-1]
    print(f"PINNED_PYLO = [  # PyLO's Celo2_naive at {COMMIT[:7]}, lr 1e-3, 10 steps")
    for (kind, _, _), p0, new in zip(TENSORS, params, last, strict=True):
        new = np.asarray(new, np.float64)
        moved = float(np.abs(new - p0).sum())
        print(f"    ({new.ravel()[:3].tolist()!r}, {moved!r}),  # {kind}")
    print("]")


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) == 5 and sys.argv[1] == "--torch-side":
        torch_side(*(Path(a) for a in sys.argv[2:]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="PyLO's clone")
    parser.add_argument("--venv", type=Path, default=default_venv(), help="the torch venv")
    parser.add_argument("--steps", type=int, default=12, help="steps compared (>= 10)")
    parser.add_argument("--tol", type=float, default=1e-5)
    parser.add_argument("--record", action="store_true", help="print the pinned test's numbers")
    args = parser.parse_args(argv)
    if args.record:
        record(args.source, args.venv)
        return 0
    start = time.perf_counter()
    theirs = run_pylo(args.source, args.venv, args.steps)
    ours = run_learnopt(args.steps)
    params, _ = case(args.steps)
    worst = 0.0
    print(f"{'setting':16s} {'tensor':19s} {'params rel. diff':>17s} {'move rel. diff':>15s}")
    for k, (lr, weight_decay) in enumerate(SETTINGS):
        setting = f"lr {lr:g}, wd {weight_decay:g}"
        for i, (kind, _, _) in enumerate(TENSORS):
            dp, dm = compare(
                [s[i] for s in ours[k]], [s[i] for s in theirs[k]], params[i].astype(np.float64)
            )
            print(f"{setting:16s} {kind:19s} {dp:17.2e} {dm:15.2e}")
            worst = max(worst, dp)
    verdict = "within" if worst <= args.tol else "ABOVE"
    print(
        f"{args.steps} steps, {time.perf_counter() - start:.0f} s; largest parameter "
        f"difference {worst:.2e}: {verdict} the tolerance {args.tol:g}"
    )
    return 0 if worst <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())
