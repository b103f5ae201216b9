"""The GPU check's report: ``REPORT.md`` and ``REPORT.csv`` from its steps' logs and CSVs.

    python benchmarks/gpu_report.py --report benchmarks/results/gpu_check_DATE
        --logs WORK --steps WORK/steps.csv [--rehearsal 1]
        [--cpu benchmarks/results/cpu_throughput.csv]

Run by ``benchmarks/gpu_check.sh`` at its end. Reads ``WORK/machine.log`` and
``WORK/<step>.log``, ``REPORT_guarantees.csv`` (gpu_guarantees.py),
``REPORT_roofline.csv`` (bench_lopt_cost.py), ``REPORT_throughput.csv``
(gpu_figures.py --recipe) and ``REPORT_metatrain.csv`` (gpu_metatrain.py); whatever a
failed or skipped step did not write is reported as missing. The throughput table puts
the same recipe's figures on the 2-core CPU (``--cpu``, measured with the same script
and committed) beside the GPU's. ``REPORT.csv`` holds every figure in long form
(``section, name, setting, value, unit``). Exit status 1 if a guarantee failed.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

CPU_THROUGHPUT = "benchmarks/results/cpu_throughput.csv"
CSV_FIELDS = ("section", "name", "setting", "value", "unit")


def _read_csv(path: str | Path) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _mib(value: str | None) -> str:
    try:
        return f"{float(value) / 2**20:.0f}"
    except (TypeError, ValueError):
        return "n/a"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--report", required=True, help="the report's path without extension")
    ap.add_argument("--logs", required=True, help="the folder of the steps' logs")
    ap.add_argument("--steps", required=True, help="CSV of step, status, seconds")
    ap.add_argument("--rehearsal", type=int, default=0)
    ap.add_argument("--cpu", default=CPU_THROUGHPUT, help="the CPU's throughput CSV")
    args = ap.parse_args(argv)
    report, logs = args.report, Path(args.logs)
    date = datetime.now(UTC).strftime("%Y-%m-%d")
    md: list[str] = []
    figures: list[dict] = []

    def figure(section, name, setting, value, unit):
        figures.append(dict(section=section, name=name, setting=setting, value=value, unit=unit))

    if args.rehearsal:
        md += [f"# GPU check rehearsal on the CPU backend, {date}", ""]
        md += ["A rehearsal (`benchmarks/gpu_check.sh --rehearse`): the check's steps, shortened,"]
        md += ["on `JAX_PLATFORMS=cpu`. Not GPU figures.", ""]
    else:
        md += [f"# GPU check, {date}", ""]
    md += ['Written by `benchmarks/gpu_check.sh` (docs/benchmarks.md, "On a GPU"). Machine:']
    md += ["", "```", _read(logs / "machine.log").strip()]
    md += _read(logs / "jax-devices.log").strip().splitlines()[:1]
    md += ["```", "", "| step | status | seconds |", "| --- | ---: | ---: |"]
    for row in _read_csv(args.steps):
        md.append(f"| {row['step']} | {row['status']} | {row['seconds']} |")
        figure("steps", row["step"], "", row["status"], "status")

    # Guarantees.
    rows = _read_csv(f"{report}_guarantees.csv")
    md += ["", "## Guarantees: compile once, dtypes, the fused kernel (gpu_guarantees.py)", ""]
    failed = [r for r in rows if r["ok"] != "True"]
    if rows:
        kinds: dict[str, list[int]] = {}
        for r in rows:
            k = kinds.setdefault(r["kind"], [0, 0])
            k[0] += r["ok"] == "True"
            k[1] += 1
        md.append(
            f"{len(rows) - len(failed)} of {len(rows)} passed on `{rows[0]['backend']}`: "
            + ", ".join(f"{kind} {ok}/{n}" for kind, (ok, n) in kinds.items())
            + "."
        )
        for kind, (ok, n) in kinds.items():
            figure("guarantees", kind, "passed", ok, f"of {n}")
        md += [
            "",
            "| kind | name | case | ok | detail | s |",
            "| --- | --- | --- | --- | --- | ---: |",
        ]
        for r in rows:
            if r["kind"] != "conformance" or r["ok"] != "True":
                md.append(
                    f"| {r['kind']} | {r['name']} | {r['case']} | {r['ok']} "
                    f"| {r['detail']} | {r['seconds']} |"
                )
    else:
        md.append("(missing: the step wrote no rows)")

    # Roofline.
    md += ["", "## Learned-optimizer updates vs optax.adam, and their roofline", ""]
    md += ["(bench_lopt_cost.py; `x limit`: measured time over max(FLOPs / matmul rate,"]
    md += ["bytes / copy bandwidth); `form ms`: each per-element form timed alone)", ""]
    log = _read(logs / "lopt-roofline.log")
    kept = [
        line
        for line in log.splitlines()
        if line.startswith(("MLP ", "measured peaks", "optax.adam", "|"))
    ]
    md += kept if kept else ["(missing: the step printed no table)"]
    for r in _read_csv(f"{report}_roofline.csv"):
        name = r["learned optimizer"]
        figure("roofline", name, "update", r["ms/step"], "ms")
        figure("roofline", name, "ratio to optax.adam", r["ratio"], "x")
        figure("roofline", name, "over the roofline limit", r["x limit"], "x")

    # Throughput, beside the CPU's.
    rows = _read_csv(f"{report}_throughput.csv")
    cpu = {(r["estimator"], r["num_tasks"]): r for r in _read_csv(args.cpu)}
    md += ["", "## Meta-training throughput of the recipe (gpu_figures.py --recipe)", ""]
    if rows:
        md.append(
            f"Recipe `{rows[0]['recipe']}`; PES truncations of the recipe's length; FullES "
            "whole runs of the check's `--total-length`. CPU: the same script on the "
            f"2-core development machine (`{args.cpu}`)."
        )
        md += [
            "",
            "| estimator | tasks | compile s | ms/step | outer steps/s | runs x steps/s "
            "| XLA MiB | peak MiB | CPU steps/s (same tasks) |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in rows:
            c = cpu.get((r["estimator"], r["num_tasks"]))
            md.append(
                f"| {r['estimator']} | {r['num_tasks']} | {r['compile_s']} | {r['ms_per_step']} "
                f"| {r['steps_per_s']} | {r['runs_per_s']} | {_mib(r['xla_bytes'])} "
                f"| {_mib(r['peak_bytes'])} | {c['steps_per_s'] if c else '-'} |"
            )
            setting = f"{r['num_tasks']} tasks"
            figure("throughput", r["estimator"], setting, r["steps_per_s"], "outer steps/s")
            figure("throughput", r["estimator"], setting, r["runs_per_s"], "runs x steps/s")
        for est in dict.fromkeys(r["estimator"] for r in rows):
            mine = [r for r in rows if r["estimator"] == est]
            top = max(mine, key=lambda r: int(r["num_tasks"]))
            md.append(
                f"\n{est}: the largest population measured that fits, {top['num_tasks']} tasks, "
                f"runs {top['runs_per_s']} inner runs x outer steps per second."
            )
    else:
        md.append("(missing: the step wrote no rows)")

    # Meta-training.
    rows = _read_csv(f"{report}_metatrain.csv")
    md += ["", "## A short meta-training with a population the CPU cannot afford", ""]
    if rows:
        r = rows[0]
        md += [
            "| | device | CPU (docs/meta-training-results.md) |",
            "| --- | ---: | ---: |",
            f"| PES inner runs per outer step | {r['num_tasks']} | {r.get('cpu_num_tasks', '')} |",
            f"| outer steps | {r['steps']} | {r.get('cpu_steps', '')} |",
            f"| wall (run + 2 meta-valid evaluations) | {r['seconds']} s "
            f"| {r.get('cpu_minutes', '')} min |",
            f"| meta-valid score at the start (1 seed) | {r['score_start']} "
            f"| {r.get('cpu_score_start', '')} |",
            f"| meta-valid score at the end | {r['score_end']} | {r.get('cpu_score', '')} |",
            "",
            "Score: the geometric mean over the meta-valid tasks of final train loss / tuned "
            "Adam's (lower is better).",
        ]
        for key in ("num_tasks", "steps", "seconds", "score_start", "score_end"):
            figure("meta-train", r["recipe"], key, r[key], "")
    else:
        md.append("(missing: the step wrote no row)")

    Path(f"{report}.md").write_text("\n".join(md) + "\n")
    with open(f"{report}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(figures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
