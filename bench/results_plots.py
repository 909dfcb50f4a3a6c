#!/usr/bin/env python3
"""The plots of docs/results.md, as PNG, from the files of bench/results.sh's run.

    $(bash bench/pytorch/venv.sh) bench/results_plots.py --data docs/results --dtr DTR

Reads run.json (each plot is dated and names the machine), speed.json, plan.md, limit.md,
cross_mesh.md, checkpoint.md and grad.md; runs `dtr plan --compare --json` for the bytes.
Writes into DATA:
  time_vs_size.png     redistribution time vs tensor size, dtr and PyTorch, per transition
  planning_time.png    planning time vs mesh dims (the rotations), dtr and PyTorch
  planning_ranks.png   dtr's planning time vs ranks, per change (plan_bench)
  plan_bytes.png       bytes the busiest rank receives: compat vs optimal vs the lower bound,
                       64 MiB tensors; and plan_bytes.json, the figures plotted
  limit.png            dtr, Open MPI and Intel MPI over the memory limit
  cross_mesh.png       between meshes: dtr's batch, one at a time, gather-then-slice, limit
  checkpoint.png       checkpoint loads over their limit
  grad.png             gradient reduction: dtr, the bare collectives, PyTorch, the limit
"""

import argparse
import json
import os
import subprocess

import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_page import num, plan_bench_rows, rows_of  # noqa: E402

# Changes whose compat and optimal plans differ, and some where they do not; 64 MiB f32.
BYTES_CASES = [
    ("S(0) -> S(1)", "8", "S(0)", "S(1)"),
    ("S(0),S(1) -> S(1),S(0)", "2x4", "S(0),S(1)", "S(1),S(0)"),
    ("S(0),S(0) -> R,S(1)", "2x4", "S(0),S(0)", "R,S(1)"),
    ("S(0),S(0) -> S(1),S(1)", "2x4", "S(0),S(0)", "S(1),S(1)"),
    ("S(0),S(0) -> R,S(0)", "2x4", "S(0),S(0)", "R,S(0)"),
    ("S(1),S(0),S(2) -> S(0),S(2),S(1)", "2x2x2", "S(1),S(0),S(2)", "S(0),S(2),S(1)",
     "256x256x256"),
    ("P,S(0) -> S(1),R", "2x4", "P,S(0)", "S(1),R"),
    ("S(0) -> R", "8", "S(0)", "R"),
    ("P -> S(0)", "8", "P", "S(0)"),
]


def plot_time_vs_size(speed, out):
    names = list(dict.fromkeys(r["transition"] for r in speed["speed"]))
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5), sharex=True)
    for ax, name in zip(axes.flat, names):
        rows = sorted((r for r in speed["speed"] if r["transition"] == name),
                      key=lambda r: r["mib"])
        mib = [r["mib"] for r in rows]
        ax.plot(mib, [r["dtr_us"] / 1e3 for r in rows], "o-", color="tab:blue",
                label="dtr (Open MPI)")
        ax.plot(mib, [r["dtr_baseline_us"] / 1e3 for r in rows], ":", color="tab:blue",
                alpha=0.7, label="dtr's collectives alone")
        ax.plot(mib, [r["torch_us"] / 1e3 for r in rows], "s-", color="tab:orange",
                label="PyTorch DTensor (gloo)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{name}  (mesh {rows[0]['mesh']})", fontsize=10)
        ax.set_xticks(mib)
        ax.set_xticklabels([str(m) for m in mib])
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("tensor size (MiB, f32)")
    for ax in axes[:, 0]:
        ax.set_ylabel("time per redistribution (ms)")
    axes[0, 0].legend(fontsize=9, loc="upper left")
    fig.suptitle(f"Redistribution time on 4 CPU ranks (median of the slowest rank; "
                 f"torch {speed['torch']}; {WHERE})", fontsize=11)
    save(fig, out, "time_vs_size.png")


def plot_planning(speed, out):
    rows = [r for r in speed["planning"] if r["change"].startswith("rotate")]
    dims = [int(r["change"].split()[1].split("-")[0]) for r in rows]
    fig, ax = plt.subplots(figsize=(7.5, 5))
    series = [("dtr_optimal_us", "dtr optimal", "o-", "tab:blue"),
              ("dtr_compat_us", "dtr compat", "o--", "tab:cyan"),
              ("dtr_cached_us", "dtr cache hit", "o:", "tab:gray"),
              ("torch_greedy_us", "PyTorch greedy (default)", "s-", "tab:orange"),
              ("torch_graph_us", "PyTorch graph (min-cost)", "s--", "tab:red"),
              ("torch_cached_us", "PyTorch cache hit", "s:", "tab:brown")]
    for key, label, style, color in series:
        ax.plot(dims, [r[key] for r in rows], style, color=color, label=label)
    ax.set_yscale("log")
    ax.set_xticks(dims)
    ax.set_xticklabels([f"{d}-d\n({2 ** d} ranks)" for d in dims])
    ax.set_xlabel("mesh dims (each of size 2); change S(i%3) -> S((i+1)%3) on every dim")
    ax.set_ylabel("planning time (microseconds, median)")
    ax.set_title(f"Planning time: dtr vs PyTorch DTensor's planner\n{WHERE}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=9)
    save(fig, out, "planning_time.png")


def plan_bytes(dtr):
    rows = []
    for name, mesh, a, b, *shape in BYTES_CASES:
        cmd = [dtr, "plan", "--mesh", mesh, "--shape", (shape or ["16384x1024"])[0], "--from",
               a, "--to", b,
               "--compare", "--json"]
        j = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        rows.append({"change": name, "mesh": mesh,
                     "compat": j["compat"]["recv_bytes_per_rank_max"],
                     "optimal": j["optimal"]["recv_bytes_per_rank_max"],
                     "lower_bound": j["optimal"]["lower_bound_recv_bytes_per_rank"],
                     "compat_peak": j["compat"]["peak_extra_bytes_per_rank"],
                     "optimal_peak": j["optimal"]["peak_extra_bytes_per_rank"]})
    return rows


def plot_bytes(rows, out):
    fig, ax = plt.subplots(figsize=(11, 5.5))
    x = range(len(rows))
    w = 0.27
    mib = 1 << 20
    ax.bar([i - w for i in x], [r["compat"] / mib for r in rows], w, color="tab:orange",
           label="compat (the seed algorithm)")
    ax.bar(list(x), [r["optimal"] / mib for r in rows], w, color="tab:blue",
           label="optimal (dtr's default)")
    ax.bar([i + w for i in x], [r["lower_bound"] / mib for r in rows], w, color="tab:green",
           label="lower bound")
    ax.set_xticks(list(x))
    ax.set_xticklabels([f"{r['change']}\n(mesh {r['mesh']})" for r in rows], rotation=30,
                       ha="right", fontsize=8)
    ax.set_ylabel("MiB received by the busiest rank")
    ax.set_title("Bytes moved: compat vs optimal plans, 64 MiB f32 tensors "
                 f"(16384x1024; 3-d: 256x256x256); dtr plan, {WHERE}", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=9)
    save(fig, out, "plan_bytes.png")


def save(fig, out, name):
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=110, metadata={"Software": None})
    plt.close(fig)


def plot_planning_ranks(text, out):
    rows = plan_bench_rows(text)
    fig, ax = plt.subplots(figsize=(7.5, 5))
    for change, color in zip(dict.fromkeys(r["change"] for r in rows),
                             ["tab:blue", "tab:orange", "tab:green", "tab:red"]):
        rs = [r for r in rows if r["change"] == change]
        ax.plot([r["ranks"] for r in rs], [r["optimal"] for r in rs], "o-", color=color,
                label=f"{change}, optimal")
        ax.plot([r["ranks"] for r in rs], [r["cached"] for r in rs], ":", color=color, alpha=0.6)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("ranks (mesh dims of size 2)")
    ax.set_ylabel("planning time (microseconds, median; dotted: cache hit)")
    ax.set_title(f"dtr's planning time vs ranks\n{WHERE}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, out, "planning_ranks.png")


def bars(ax, labels, series, ylabel):
    """Grouped bars: series is [(label, values, color)], None values left out."""
    w = 0.8 / len(series)
    for k, (name, vals, color) in enumerate(series):
        xs = [i + (k - (len(series) - 1) / 2) * w for i, v in enumerate(vals) if v is not None]
        ax.bar(xs, [v for v in vals if v is not None], w, color=color, label=name)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)


def plot_limit(text, out):
    rows = rows_of(text)
    fig, ax = plt.subplots(figsize=(11, 5.5))
    labels = [f"{r['transition']}\n{r['dtype']} {r['MiB']} MiB" for r in rows]
    bars(ax, labels, [("dtr", [num(r["dtr / limit"]) for r in rows], "tab:blue"),
                      ("dtr, --buffers shared", [num(r["shared / limit"]) for r in rows], "tab:cyan"),
                      ("Open MPI's collectives", [num(r["Open MPI / limit"]) for r in rows], "tab:orange"),
                      ("Intel MPI's collectives", [num(r["Intel MPI / limit"]) for r in rows], "tab:red")],
         "time / memory limit (1 = the memory's speed)")
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_title(f"Distance to the memory, {rows[0]['ranks']} ranks a core each\n{WHERE}",
                 fontsize=10)
    save(fig, out, "limit.png")


def plot_cross_mesh(text, out):
    rows = rows_of(text)
    fig, ax = plt.subplots(figsize=(11, 5.5))
    labels = [f"{r['change']}\n{r['list']}, {r['ranks']} ranks" for r in rows]
    lim = [num(r["limit ms"]) for r in rows]

    def over(key):
        return [num(r[key]) / l if num(r[key]) and l else None for r, l in zip(rows, lim)]
    bars(ax, labels, [("dtr batch", over("dtr batch ms"), "tab:blue"),
                      ("one plan at a time", over("one at a time ms"), "tab:cyan"),
                      ("gather-then-slice", over("gather-then-slice ms"), "tab:orange")],
         "time / limit")
    ax.set_yscale("log")
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_title(f"Between meshes (8 ranks share 2 cores)\n{WHERE}", fontsize=10)
    save(fig, out, "cross_mesh.png")


def plot_checkpoint(text, out):
    rows = [r for r in rows_of(text) if not r["way"].startswith("limit")]
    fig, ax = plt.subplots(figsize=(11, 5.5))
    configs = list(dict.fromkeys((r["ranks"], r["page cache"]) for r in rows))
    ways = list(dict.fromkeys(r["way"] for r in rows))
    colors = ["tab:blue", "tab:cyan", "tab:orange", "tab:red", "tab:brown", "tab:green",
              "tab:olive", "tab:purple"]
    series = []
    for way, color in zip(ways, colors):
        by = {(r["ranks"], r["page cache"]): num(r["of its limit"]) for r in rows if r["way"] == way}
        series.append((way, [by.get(c) for c in configs], color))
    bars(ax, [f"{n} ranks, {c} cache" for n, c in configs], series,
         "fraction of its limit (1 = reading the bytes at the file's speed)")
    ax.set_title(f"Checkpoint loads: GPT-2 medium from one safetensors file\n{WHERE}",
                 fontsize=10)
    save(fig, out, "checkpoint.png")


def plot_grad(text, out):
    rows = rows_of(text)
    fig, ax = plt.subplots(figsize=(11, 5.5))
    labels = [f"{r['model']} {r['mode']}\n{r['dtype']}, {r['ranks']} ranks" for r in rows]
    bars(ax, labels, [("dtr grouped", [num(r["dtr grouped ms"]) for r in rows], "tab:blue"),
                      ("dtr per tensor", [num(r["dtr per tensor ms"]) for r in rows], "tab:cyan"),
                      ("bare collectives", [num(r["bare collectives ms"]) for r in rows], "tab:gray"),
                      ("PyTorch (gloo)", [num(r["PyTorch gloo ms"]) for r in rows], "tab:orange"),
                      ("memory limit", [num(r["memory limit ms"]) for r in rows], "tab:green")],
         "milliseconds per reduction")
    ax.set_yscale("log")
    ax.set_title(f"A model's gradient reduction\n{WHERE}", fontsize=10)
    save(fig, out, "grad.png")


def main():
    global WHERE
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="docs/results", help="bench/results.sh's files")
    ap.add_argument("--dtr", required=True, help="the dtr binary (for `dtr plan`)")
    args = ap.parse_args()
    d = args.data

    def text(name):
        with open(os.path.join(d, name)) as f:
            return f.read()
    run = json.loads(text("run.json"))
    m = run["machine"]
    WHERE = f"{run['date']}, {m['cpu']}, {m['cores']} cores"
    speed = json.loads(text("speed.json"))
    if speed["speed"]:
        plot_time_vs_size(speed, d)
    plot_planning(speed, d)
    plot_planning_ranks(text("plan.md"), d)
    rows = plan_bytes(args.dtr)
    plot_bytes(rows, d)
    with open(os.path.join(d, "plan_bytes.json"), "w") as f:
        json.dump(rows, f, indent=1)
        f.write("\n")
    plot_limit(text("limit.md"), d)
    plot_cross_mesh(text("cross_mesh.md"), d)
    plot_checkpoint(text("checkpoint.md"), d)
    plot_grad(text("grad.md"), d)


WHERE = ""

if __name__ == "__main__":
    main()
