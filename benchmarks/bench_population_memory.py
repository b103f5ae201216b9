"""Per-device memory of one PES outer step: the whole population on one device vs sharded.

    python benchmarks/bench_population_memory.py [--task ImageMLP_Mnist5k_28_Relu128]
        [--num-tasks 256] [--devices 4] [--budget-gib 1.0] [--no-step]

Builds the learner that ``learnopt meta-train --trainer pes`` builds
(``train.build_learner``) twice in one process with ``--devices`` forced host CPU
devices: once with no mesh (the whole population on one device), once with the
population split over a mesh of all the devices (``mesh="all"``, as ``--all-devices``
does on a multi-GPU host). For each, the outer step is compiled ahead of time and XLA's
own accounting of the compiled program is read (``Compiled.memory_analysis()``; for a
sharded program these are the figures of *one* device): arguments (the meta-training
state and one step's batches), outputs, the part of the outputs aliased to donated
arguments, and temporaries. A device needs about arguments + outputs - aliased +
temporaries at once while the step runs.

The figures are compared with a per-device budget (``--budget-gib``; a CPU cannot reach
an accelerator's 80-141 GiB, so the demonstration is scaled down: the population is
chosen so that one device needs more than the budget while each of the sharded devices
needs less). Then one step of the sharded learner is executed, to show the program runs
(``--no-step``: compile only). Prints a table and writes
``benchmarks/results/population_memory.csv``.
"""

from __future__ import annotations

import argparse
import csv
import os
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
FIELDS = (
    "layout",
    "devices",
    "task",
    "num_tasks",
    "tasks_per_device",
    "argument_bytes",
    "output_bytes",
    "alias_bytes",
    "temp_bytes",
    "per_device_bytes",
    "budget_bytes",
    "fits_budget",
    "compile_s",
    "step_s",
)


def _analysis(compiled) -> dict:
    m = compiled.memory_analysis()
    per_device = (
        m.argument_size_in_bytes
        + m.output_size_in_bytes
        - m.alias_size_in_bytes
        + m.temp_size_in_bytes
    )
    return {
        "argument_bytes": m.argument_size_in_bytes,
        "output_bytes": m.output_size_in_bytes,
        "alias_bytes": m.alias_size_in_bytes,
        "temp_bytes": m.temp_size_in_bytes,
        "per_device_bytes": per_device,
    }


def _gib(n: float) -> str:
    return f"{n / 2**30:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", default="ImageMLP_Mnist5k_28_Relu128")
    ap.add_argument("--num-tasks", type=int, default=256)
    ap.add_argument("--trunc-length", type=int, default=4)
    ap.add_argument("--devices", type=int, default=4, help="forced host CPU devices")
    ap.add_argument("--budget-gib", type=float, default=1.0, help="per-device memory budget")
    ap.add_argument("--no-step", action="store_true", help="compile only, run no step")
    ap.add_argument("--out", default=str(RESULTS / "population_memory.csv"))
    args = ap.parse_args()
    if args.num_tasks % args.devices:
        raise SystemExit(f"--num-tasks must be a multiple of --devices ({args.devices})")

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    jax.config.update("jax_num_cpu_devices", args.devices)
    from learnopt import train

    if jax.device_count() != args.devices:
        raise SystemExit(f"expected {args.devices} devices, JAX has {jax.devices()}")
    budget = int(args.budget_gib * 2**30)
    key = jax.random.PRNGKey(0)
    rows = []
    for layout, mesh in (("one device", None), (f"sharded over {args.devices}", "all")):
        t0 = time.perf_counter()
        learner = train.build_learner(
            task=args.task,
            trainer="pes",
            trunc_length=args.trunc_length,
            total_length=200,
            num_tasks=args.num_tasks,
            mesh=mesh,
        )
        state = learner.init(key)
        datas = jax.tree_util.tree_map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), learner.get_datas()
        )
        print(
            f"[memory] {layout}: learner built and initialized in {time.perf_counter() - t0:.1f} s"
        )
        t0 = time.perf_counter()
        # The learner's own jitted step (with its shardings when it has a mesh).
        compiled = learner._update_jit.lower(state, key, datas).compile()
        compile_s = time.perf_counter() - t0
        row = {
            "layout": layout,
            "devices": 1 if mesh is None else args.devices,
            "task": args.task,
            "num_tasks": args.num_tasks,
            "tasks_per_device": args.num_tasks // (1 if mesh is None else args.devices),
            **_analysis(compiled),
            "budget_bytes": budget,
            "compile_s": round(compile_s, 2),
            "step_s": None,
        }
        row["fits_budget"] = row["per_device_bytes"] <= budget
        print(
            f"[memory] {layout}: compiled in {compile_s:.1f} s, per device "
            f"{_gib(row['per_device_bytes'])} GiB"
        )
        if mesh is not None and not args.no_step:
            t0 = time.perf_counter()
            state, loss, _ = learner.update(state, key)
            jax.block_until_ready((state, loss))
            row["step_s"] = round(time.perf_counter() - t0, 2)
            print(
                f"[memory] {layout}: one step ran in {row['step_s']} s, meta-loss {float(loss):.4f}"
            )
        rows.append(row)
        del state, learner, compiled

    one, split = rows
    print(
        f"\nPES on {args.task}, {args.num_tasks} tasks, unroll {args.trunc_length}; "
        f"per-device budget {args.budget_gib:g} GiB"
    )
    print(
        f"{'layout':>14s} {'tasks/dev':>9s} {'args GiB':>9s} {'out GiB':>8s} {'alias GiB':>9s} "
        f"{'temp GiB':>9s} {'per dev GiB':>11s}  fits"
    )
    for r in rows:
        print(
            f"{r['layout']:>14s} {r['tasks_per_device']:9d} {_gib(r['argument_bytes']):>9s} "
            f"{_gib(r['output_bytes']):>8s} {_gib(r['alias_bytes']):>9s} "
            f"{_gib(r['temp_bytes']):>9s} {_gib(r['per_device_bytes']):>11s}  "
            f"{'yes' if r['fits_budget'] else 'NO'}"
        )
    print(
        f"one device / each sharded device: "
        f"{one['per_device_bytes'] / split['per_device_bytes']:.2f}x"
    )
    if one["fits_budget"] or not split["fits_budget"]:
        print(
            "note: this population does not show the point at this budget (one device must "
            "exceed it, each sharded device stay under it); change --num-tasks or --budget-gib"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
