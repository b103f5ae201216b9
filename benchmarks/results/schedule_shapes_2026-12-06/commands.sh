#!/bin/bash
# What a schedule head can express on heldout's two over-fitting Mnist MLPs (8 seeds).
cd "$(dirname "$0")/../../.."
.venv/bin/python benchmarks/schedule_shapes.py --seeds 8 --out benchmarks/results/schedule_shapes_2026-12-06
