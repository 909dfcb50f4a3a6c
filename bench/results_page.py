#!/usr/bin/env python3
"""docs/results.md from the raw figures of one `bash bench/results.sh` run (docs/results/).

    python3 bench/results_page.py --data docs/results --out docs/results.md

The Python standard library alone: tests/tools/results_page_test.sh runs it on the committed
files and compares its page with the committed one, so every figure on the page is one the
run printed. Every sentence that states a figure computes it here from those files.
"""

import argparse
import json
import os
import re

STEPS = ["conformance", "speed", "dtensor", "plan", "limit", "cross_mesh", "checkpoint", "grad"]


# ---- reading the benchmarks' outputs ----------------------------------------------------

def md_tables(text):
    """The Markdown tables in text: a list of (header, rows), cells stripped."""
    out, cur = [], None
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cur is None:
                cur = (cells, [])
                out.append(cur)
            elif not all(re.fullmatch(r":?-+:?", c) for c in cells):
                cur[1].append(cells)
        else:
            cur = None
    return out


def table_lines(text):
    """The lines of text's tables, as they are (the page shows them unchanged)."""
    return "\n".join(l for l in text.splitlines() if l.startswith("|"))


def num(cell):
    """A table cell's number (1,234.5 / 1.2x / **3.4**), or None for '-' and text."""
    m = re.fullmatch(r"\**\s*([-+]?[0-9][0-9,]*\.?[0-9]*)\s*x?\s*\**", cell or "")
    return float(m.group(1).replace(",", "")) if m else None


def rows_of(text, table=0):
    """Table number `table` of text as dicts keyed by its header."""
    tabs = md_tables(text)
    if len(tabs) <= table:
        return []
    head, rows = tabs[table]
    return [dict(zip(head, r)) for r in rows]


def plan_bench_rows(text):
    """plan_bench's columns (change dims ranks optimal compat cached candidate steps)."""
    rows = []
    for line in text.splitlines():
        f = line.split()
        if len(f) == 8 and f[1].isdigit() and f[2].isdigit():
            rows.append({"change": f[0], "dims": int(f[1]), "ranks": int(f[2]),
                         "optimal": float(f[3]), "compat": float(f[4]), "cached": float(f[5]),
                         "candidate": f[6], "steps": int(f[7])})
    return rows


def span(values, fmt="{:.2f}", unit="x"):
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return "-"
    lo, hi = fmt.format(vals[0]), fmt.format(vals[-1])
    return f"{lo}{unit}" if lo == hi else f"{lo}-{hi}{unit}"


def duration(secs):
    m, s = divmod(int(secs), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s"


def thousands(x, digits=1):
    return f"{x:,.{digits}f}"


# ---- the sections -----------------------------------------------------------------------

def header(run):
    m, sw = run["machine"], run["software"]
    impi = f"Intel MPI {sw['intel_mpi']}" if sw.get("intel_mpi") else "no Intel MPI"
    out = [
        "# Results: dtr beside what users pick instead",
        "",
        "<!-- Written by bench/results_page.py from docs/results/ (bash bench/results.sh);",
        "     edit the script, not this page: tests/tools/results_page_test.sh compares them. -->",
        "",
        f"Measured on {run['date']} by `bash bench/results.sh`, which ran every benchmark below "
        f"in {duration(run['total_seconds'])} on this machine and wrote this page, its plots and "
        f"the raw figures (docs/results/). Machine: {m['cpu']}, {m['cores']} cores, "
        f"{m['memory_gib']} GiB, {m['os']} (Linux {m['kernel']}); Open MPI {sw['open_mpi']} "
        f"over shared memory, {impi}, PyTorch {sw['torch']} from PyPI on CPU (gloo).",
    ]
    if run.get("quick"):
        out += ["", "**A `--quick` run: every step at its smallest size; not figures to quote.**"]
    out += [
        "",
        "With 2 cores, the 2-rank figures have a core per rank; 4 and 8 ranks share the cores, "
        "so their times measure the scheduler as well. Every comparison is side by side in one "
        "run, and every dtr result in it is checked (`--verify`, or byte for byte against the "
        "other side).",
        "",
        "| step | command | seconds | date |",
        "|---|---|---:|---|",
    ]
    for name in STEPS:
        s = run["steps"].get(name)
        if s:
            out.append(f"| {name} | `{s['command']}` | {s['seconds']} | {s['date']} |")
    return out


def conformance(c, cmd):
    counts = c["counts"]
    st = c["stats"]
    unexplained = len(c["disagreements"])
    out = ["## Conformance with PyTorch DTensor", "",
           f"`{cmd}`: {c['cases']:,} random cases, {c['directions']:,} directions (each case "
           f"A -> B and B -> A), torch {c['torch']}. Each direction compares dtr's layouts, "
           f"results and gradients with DTensor's on every rank; how the cases are drawn and "
           f"what each known difference is: [conformance.md](conformance.md).", "",
           "| outcome | directions |", "|---|---:|"]
    for key in sorted(counts, key=lambda k: (k != "compared", k != "both-refused", k)):
        label = {"compared": "both ran; layouts, results and gradients agree",
                 "both-refused": "both refused"}.get(key, f"known difference `{key[6:]}`"
                                                    if key.startswith("known:") else key)
        out.append(f"| {label} | {counts[key]:,} |")
    out += [f"| **unexplained disagreements** | **{unexplained}** |",
            f"| total | {c['directions']:,} |", "",
            f"Compared: layouts of {st['layouts']:,} rank-specs, {st['fwd_elems']:,} result "
            f"elements, {st['grad_elems']:,} gradient elements ({st['grads_compared']:,} "
            f"directions with a gradient)."]
    return out


def speed(s, cmd, dtensor_md, dtensor_cmd, date):
    out = ["## Speed beside PyTorch DTensor", "",
           f"`{cmd}` ({date}): `dtr run` (Open MPI) against `DTensor.redistribute` (gloo) on 4 ranks, f32 "
           f"tensors of (256 x MiB) x 1024; 1-d changes on a mesh of 4, 2-d ones on 2x2. Per "
           f"round, each library's figure is the median over its iterations of the slowest "
           f"rank's time; rounds alternate the two, and the table gives the median of the "
           f"rounds. ratio = PyTorch / dtr (above 1 dtr is faster). \"collectives alone\": "
           f"the same plan's collectives on contiguous buffers (`dtr run`'s baseline).", "",
           "| transition | mesh | MiB | dtr us | dtr's collectives alone us | PyTorch us | "
           "PyTorch / dtr | dtr collectives | PyTorch collectives |",
           "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for r in sorted(s["speed"], key=lambda r: r["mib"]):
        out.append(f"| {r['transition']} | {r['mesh']} | {r['mib']} | {thousands(r['dtr_us'])} | "
                   f"{thousands(r['dtr_baseline_us'])} | {thousands(r['torch_us'])} | "
                   f"**{r['ratio']:.2f}** | {r['dtr_collectives']} | {r['torch_collectives']} |")
    out += ["", "![time vs size](results/time_vs_size.png)", "",
            f"From Python, `dtr.torch.redistribute` against `DTensor.redistribute` under torchrun "
            f"(`{dtensor_cmd}`, {date}; DTensors in and out, docs/python.md):", "",
            table_lines(dtensor_md)]
    return out


def planning(s, plan_md, plan_cmd):
    out = ["## Planning time", "",
           "dtr's planners (`dtr_plan_create`, optimal and compat; `dtr_plan_cache_get` on a "
           "warm cache) against PyTorch's (`_gen_transform_infos_non_cached` with the greedy "
           "planner, its default, and the graph-based min-cost search it uses for shard orders; "
           "the `functools.cache` hit), for the same specs, in one process each, medians "
           "(microseconds):", "",
           "| change | mesh | dtr optimal | dtr compat | dtr cache hit | PyTorch greedy | "
           "PyTorch graph | PyTorch cache hit | greedy / dtr optimal | graph / dtr optimal |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in s["planning"]:
        g, gr, o = r["torch_greedy_us"], r["torch_graph_us"], r["dtr_optimal_us"]
        out.append(f"| {r['change']} | {r['mesh']} | {o:.2f} | {r['dtr_compat_us']:.2f} | "
                   f"{r['dtr_cached_us']:.2f} | {thousands(g)} | {thousands(gr)} | "
                   f"{r['torch_cached_us']:.2f} | {g / o:.1f} | {gr / o:,.0f} |")
    rows = plan_bench_rows(plan_md)
    out += ["", "![planning time](results/planning_time.png)", "",
            f"dtr's planning time against the number of ranks (`{plan_cmd}`: meshes of 1 to 8 "
            f"dims of size 2, 2 to 256 ranks, a 4096x4096x1024 f32 tensor; medians, "
            f"microseconds; \"candidate\" is the plan the optimal planner kept):", "",
            "| change | mesh dims | ranks | optimal | compat | cache hit | candidate | steps |",
            "|---|---:|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        out.append(f"| {r['change']} | {r['dims']} | {r['ranks']} | {r['optimal']:.2f} | "
                   f"{r['compat']:.2f} | {r['cached']:.2f} | {r['candidate']} | {r['steps']} |")
    out += ["", "![planning time vs ranks](results/planning_ranks.png)"]
    return out


def plan_bytes(rows):
    mib = 1 << 20
    out = ["## Bytes moved: the seed algorithm against the optimal plan", "",
           "The busiest rank's received bytes for 64 MiB tensors, from `dtr plan --compare "
           "--json` (docs/results/plan_bytes.json): the seed algorithm (`compat`, what "
           "DTensor's greedy planner derives from) against dtr's default and the lower bound.",
           "", "| change | mesh | compat MiB | optimal MiB | lower bound MiB | compat peak extra "
           "MiB | optimal peak extra MiB |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['change']} | {r['mesh']} | {r['compat'] / mib:.1f} | "
                   f"{r['optimal'] / mib:.1f} | {r['lower_bound'] / mib:.1f} | "
                   f"{r['compat_peak'] / mib:.1f} | {r['optimal_peak'] / mib:.1f} |")
    out += ["", "![bytes moved](results/plan_bytes.png)"]
    return out


def section(title, text, step, intro, png, alt):
    out = [f"## {title}", "", f"`{step['command']}` ({step['date']}). {intro}", "",
           table_lines(text)]
    if png:
        out += ["", f"![{alt}](results/{png})"]
    return out


# ---- headlines and the rows where dtr is not ahead ---------------------------------------

def headlines(d):
    out, behind = ["## Headlines", ""], []
    c = d["conformance"]
    out.append(f"- **Conformance:** {c['cases']:,} random cases, {c['directions']:,} directions "
               f"against DTensor: {c['counts'].get('compared', 0):,} compared and agreed, "
               f"**{len(c['disagreements'])} unexplained disagreements**.")
    sp = d["speed"]["speed"]
    faster = sum(r["ratio"] > 1 for r in sp)
    out.append(f"- **Speed beside DTensor, 4 CPU ranks:** dtr faster in {faster} of {len(sp)} "
               f"measurements; DTensor takes {span(r['ratio'] for r in sp)} dtr's time.")
    behind += [f"DTensor on {r['transition']} at {r['mib']} MiB: PyTorch / dtr {r['ratio']:.2f}"
               for r in sp if r["ratio"] < 1]
    dt = rows_of(d["dtensor"])
    if dt:
        ratios = [num(r.get("dtr faster", "")) for r in dt]
        out.append(f"- **From Python, 2 ranks:** `DTensor.redistribute` takes {span(ratios, '{:.1f}')} "
                   f"the time of `dtr.torch.redistribute` (dtr's Gloo).")
        behind += [f"DTensor from Python on {r['change']}: its time / dtr's {r['dtr faster'].rstrip('x')}"
                   for r, x in zip(dt, ratios) if x is not None and x < 1]
    pl = d["speed"]["planning"]
    out.append(f"- **Planning:** DTensor's greedy planner takes {span((r['torch_greedy_us'] / r['dtr_optimal_us'] for r in pl), '{:.1f}')} "
               f"the time of dtr's optimal planner, its graph search {span((r['torch_graph_us'] / r['dtr_optimal_us'] for r in pl), '{:,.0f}')}; "
               f"on 256 ranks (8 mesh dims) dtr plans in "
               f"{span((r['optimal'] for r in plan_bench_rows(d['plan']) if r['ranks'] == 256), '{:.0f}', ' us')}.")
    lim = rows_of(d["limit"])
    if lim:
        vs_ompi = [num(r["Open MPI us"]) / num(r["dtr us"]) for r in lim]
        vs_impi = [num(r["Intel MPI us"]) / num(r["dtr us"]) for r in lim if num(r["Intel MPI us"])]
        line = (f"- **Distance to the memory, 2 ranks:** dtr at {span(num(r['dtr / limit']) for r in lim)} "
                f"the limit; Open MPI's own collectives of the same plan take "
                f"{span(vs_ompi)} dtr's time")
        line += f", Intel MPI's {span(vs_impi)}." if vs_impi else "."
        out.append(line)
        for r, a in zip(lim, vs_ompi):
            if a < 1:
                behind.append(f"Open MPI on {r['transition']} {r['dtype']} {r['MiB']} MiB: "
                              f"{r['Open MPI us']} us against dtr's {r['dtr us']} us")
            im = num(r["Intel MPI us"])
            if im and im < num(r["dtr us"]):
                behind.append(f"Intel MPI on {r['transition']} {r['dtype']} {r['MiB']} MiB: "
                              f"{r['Intel MPI us']} us against dtr's {r['dtr us']} us")
    cm = [r for r in rows_of(d["cross_mesh"]) if r["ranks"] == "2"]
    if cm:
        out.append(f"- **Between meshes, 2 ranks:** dtr's batch at {span(num(r['batch / limit']) for r in cm)} "
                   f"the limit; gathering then slicing takes {span(num(r['gather / batch']) for r in cm)} "
                   f"its time.")
        behind += [f"gather-then-slice on {r['change']} {r['list']}: gather / batch {r['gather / batch']}"
                   for r in rows_of(d["cross_mesh"]) if (num(r["gather / batch"]) or 2) < 1]
    ck = rows_of(d["checkpoint"])
    if ck:
        dtr_rows = [r for r in ck if r["way"] == "dtr"]
        peers = [r for r in ck if not r["way"].startswith(("dtr", "limit"))]
        out.append(f"- **Checkpoint loads (GPT-2 medium, 1.42 GB):** dtr at "
                   f"{span(num(r['of its limit']) for r in dtr_rows)} of its limit; the safetensors "
                   f"package and PyTorch DCP take {span(num(r['dtr faster by']) for r in peers)} "
                   f"dtr's time.")
        behind += [f"{r['way']} ({r['ranks']} ranks, {r['page cache']} cache): its time / dtr's {r['dtr faster by'].rstrip('x')}"
                   for r in peers if (num(r["dtr faster by"]) or 2) < 1]
    gr = rows_of(d["grad"])
    if gr:
        torch = [num(r["PyTorch / grouped"]) for r in gr]
        out.append(f"- **A model's gradients, 2 ranks:** dtr's grouped reduction at "
                   f"{span(num(r['grouped / bare']) for r in gr)} the time of its bare collectives; "
                   f"PyTorch's DDP / FSDP2 over gloo take {span(torch)} its time.")
        behind += [f"PyTorch {r['mode']} {r['dtype']} on {r['model']}: PyTorch / grouped "
                   f"{r['PyTorch / grouped']}" for r, t in zip(gr, torch) if t is not None and t < 1]
    out += ["", "Where what a user could pick instead was as fast or faster in this run: "
            + ("; ".join(behind) + "." if behind else "nowhere.")]
    return out


# ---- the page ---------------------------------------------------------------------------

def read(data, name):
    path = os.path.join(data, name)
    try:
        with open(path) as f:
            return json.load(f) if name.endswith(".json") else f.read()
    except OSError as e:
        raise SystemExit(f"results_page.py: {path}: {e.strerror}: run `bash bench/results.sh` "
                         f"(or its --only STEP) first")


def page(data):
    run = read(data, "run.json")
    d = {"conformance": read(data, "conformance.json"), "speed": read(data, "speed.json"),
         "bytes": read(data, "plan_bytes.json")}
    for name in ("dtensor", "plan", "limit", "cross_mesh", "checkpoint", "grad"):
        d[name] = read(data, name + ".md")
    cmd = {k: v["command"] for k, v in run["steps"].items()}
    step = run["steps"]
    out = header(run) + [""] + headlines(d) + [""]
    out += conformance(d["conformance"], cmd["conformance"]) + [""]
    out += speed(d["speed"], cmd["speed"], d["dtensor"], cmd["dtensor"], step["speed"]["date"]) + [""]
    out += planning(d["speed"], d["plan"], cmd["plan"]) + [""]
    out += plan_bytes(d["bytes"]) + [""]
    out += section("Distance to the memory: dtr, Open MPI, Intel MPI", d["limit"], step["limit"],
                   "For each transition, the least bytes each rank must read and write, over "
                   "the copy bandwidth of as many processes as ranks measured in the same run, "
                   "is the limit; each implementation's time over it (1.00 is the memory's "
                   "speed). Open MPI: the same plan's collectives called alone with dtr's "
                   "shared-memory paths off; Intel MPI: bench/coll_bench.c built with its "
                   "compiler wrapper. Method: docs/executor-bench.md.",
                   "limit.png", "time over the memory limit") + [""]
    out += section("Between meshes", d["cross_mesh"], step["cross_mesh"],
                   "dtr's batch, the same tensors one plan at a time, and gather-then-slice "
                   "(Open MPI's all-reduce / all-gather on the source ranks, the whole tensor "
                   "sent to each destination rank, sliced there), beside the limit (the busiest "
                   "destination rank's bytes written once at the copy bandwidth). Method: "
                   "docs/cross-mesh.md.", "cross_mesh.png", "between meshes") + [""]
    out += section("Checkpoint loads", d["checkpoint"], step["checkpoint"],
                   "A generated GPT-2 medium (one safetensors file) loaded into 2x2 on 4 ranks "
                   "and into 2 on 2 ranks, by dtr, the safetensors package and PyTorch DCP, "
                   "beside reading the same bytes sequentially (the limit). Method: "
                   "docs/checkpoint.md.", "checkpoint.png", "checkpoint loads") + [""]
    out += section("A model's gradients", d["grad"], step["grad"],
                   "Gradient reduction of whole models, dtr grouped and per tensor, the bare "
                   "collectives of every element, the memory limit, and PyTorch's DDP (25 MiB "
                   "buckets) and FSDP2 reduce-scatter over gloo. Method: grad/README.md.",
                   "grad.png", "gradient reduction")
    out += ["", "## Executor overhead", "",
            "The executor against its own collectives called bare, on 2, 4 and 8 ranks, is "
            "measured by `bash bench/exec_bench.sh` ([executor-bench.md](executor-bench.md))."]
    return "\n".join(out) + "\n"


README_BEGIN = "<!-- results: written by bench/results_page.py from docs/results/ -->"
README_END = "<!-- results: end -->"


def readme_block(data):
    """README.md's paragraph of figures, from the same files as the page."""
    run = read(data, "run.json")
    c, s = read(data, "conformance.json"), read(data, "speed.json")
    sp, pl = s["speed"], s["planning"]
    dt = [num(r.get("dtr faster", "")) for r in rows_of(read(data, "dtensor.md"))]
    big = max(r["mib"] for r in sp)
    at_big = ", ".join(f"{r['transition']} {r['ratio']:.1f}x" for r in sp if r["mib"] == big)
    text = (f"Measured on {run['date']} by `bash bench/results.sh` "
            f"([docs/results.md](docs/results.md), {run['machine']['cores']} cores, "
            f"{duration(run['total_seconds'])}), against PyTorch DTensor {c['torch'].split('+')[0]} "
            f"on CPU: the same layouts, values and gradients in {c['cases']:,} random cases "
            f"({len(c['disagreements'])} unexplained disagreements); on 4 ranks dtr is faster in "
            f"{sum(r['ratio'] > 1 for r in sp)} of {len(sp)} redistributions (DTensor's time "
            f"over dtr's at {big} MiB: {at_big}); DTensor's greedy planner takes "
            f"{span((r['torch_greedy_us'] / r['dtr_optimal_us'] for r in pl), '{:.1f}')} dtr's "
            f"planning time and its graph search up to "
            f"{max(r['torch_graph_us'] / r['dtr_optimal_us'] for r in pl):,.0f}x. From Python "
            f"(`dtr.torch.redistribute` beside `DTensor.redistribute` in the same processes, 2 "
            f"ranks, [docs/python.md](docs/python.md)): DTensor takes {span(dt, '{:.1f}')} "
            f"dtr's time.")
    return wrap(text)


def wrap(text, width=94):
    lines, cur = [], ""
    for word in text.split(" "):
        if cur and len(cur) + 1 + len(word) > width:
            lines.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    return "\n".join(lines + [cur])


def with_readme_block(readme, block):
    """readme with the text between its two markers replaced by block."""
    i, j = readme.find(README_BEGIN), readme.find(README_END)
    if i < 0 or j < i:
        raise SystemExit(f"results_page.py: README.md lacks the markers {README_BEGIN!r} "
                         f"... {README_END!r}")
    return readme[:i + len(README_BEGIN)] + "\n" + block + "\n" + readme[j:]


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="the run's files (docs/results)")
    ap.add_argument("--out", required=True, help="the page to write (docs/results.md)")
    ap.add_argument("--readme", help="also rewrite this README.md's paragraph of figures")
    args = ap.parse_args()
    text = page(args.data)
    readme = None
    if args.readme:
        with open(args.readme) as f:
            readme = with_readme_block(f.read(), readme_block(args.data))
    write(args.out, text)
    if readme is not None:
        write(args.readme, readme)


if __name__ == "__main__":
    main()
