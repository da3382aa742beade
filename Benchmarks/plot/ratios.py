#!/usr/bin/env python3
"""Prints the Markdown table of BENCHMARKS.md §6 from Benchmarks/plots/scaling-*.csv: per workload and N,
Sofa's figure and its ratios to LMDB and SQLite measured in the same invocation (or the same N's file).

    python3 Benchmarks/plot/ratios.py [PLOTS_DIR]
"""
import csv
import glob
import os
import sys

directory = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plots")
figures = {}
sizes = []
for path in glob.glob(os.path.join(directory, "scaling-*.csv")):
    with open(path) as f:
        for row in csv.reader(line for line in f if not line.startswith("#")):
            if row[0] == "workload" or row[3] == "answer":
                continue
            figures[(row[0], row[3], row[1], int(row[2]))] = float(row[4])
            sizes.append(int(row[2]))
ns = sorted(set(sizes))

rows = [
    ("W1 build", "W1", "build", "rows/s"),
    ("W1 size on disk", "W1", "size on disk (st_size)", "MiB"),
    ("W2 range query, 20 rows", "W2", "range query (20 rows)", "queries/s"),
    ("W2 p50", "W2", "p50", "µs"),
    ("W2 p99", "W2", "p99", "µs"),
    ("W3 scan", "W3", "scan", "rows/s"),
    ("W4 range reduce, ~1 %", "W4", "range reduce (~1% each)", "ranges/s"),
    ("W6 update 1 %", "W6", "update (1% of rows)", "rows/s"),
    ("W7 open (warm)", "W7", "open (warm)", "µs"),
    ("peak RSS", "RSS", "peak", "MiB"),
]


def number(v):
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}".rstrip("0").rstrip(".")
    return f"{v:.3g}"


def ratio(a, b):
    return "—" if a is None or b is None or b == 0 else f"{a / b:.2f}"


def label(n):
    return f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k"


header = ["workload", "unit"] + [f"{label(n)}: sofa · /lmdb · /sqlite" for n in ns]
print("| " + " | ".join(header) + " |")
print("| " + " | ".join(["---", "---"] + ["---:"] * len(ns)) + " |")
for title, workload, metric, unit in rows:
    cells = [title, unit]
    for n in ns:
        sofa = figures.get((workload, metric, "sofa", n))
        lmdb = figures.get((workload, metric, "lmdb", n))
        sqlite = figures.get((workload, metric, "sqlite", n))
        cells.append(("—" if sofa is None else number(sofa)) + f" · {ratio(sofa, lmdb)} · {ratio(sofa, sqlite)}")
    print("| " + " | ".join(cells) + " |")
