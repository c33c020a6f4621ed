#!/usr/bin/env python3
"""Builds the coverage census (markdown) from the inspect logs scripts/gpu-census wrote: per workload, how many
launches carried tensor maps tmaguard could read, where they sat (128-byte parameters or inside larger ones), how
many places inside large parameters were searched, and whether every map found inside a structure points into
memory the PyTorch allocator owns (a false decode would not). Also embeds `tmaguard report`'s own census."""
import argparse
import glob
import json
import os
import shutil
import subprocess


def demangle(names):
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    p = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    out = p.stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def short(name, width=140):
    return name if len(name) <= width else name[:width - 3] + "..."


def load(wdir):
    recs = []
    for f in sorted(glob.glob(os.path.join(wdir, "*.jsonl"))):
        with open(f) as fh:
            for line in fh:
                line = line.strip()
                if line:
                    try:
                        recs.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
    return recs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--header", default="")
    ap.add_argument("workloads", nargs="+")
    a = ap.parse_args()
    rows, details = [], []
    totals = dict(launches=0, readable=0, windows=0, struct_maps=0, in_memory=0, not_in_memory=0, device_maps=0,
                  device_in_memory=0, device_not_in_memory=0, findings=0)
    for w in a.workloads:
        wdir = os.path.join(a.dir, w)
        recs = load(wdir)
        try:
            with open(os.path.join(wdir, "segments.json")) as f:
                seg = json.load(f)
        except (OSError, json.JSONDecodeError):
            seg = {"status": "no result (crashed or timed out)", "segments": []}
        segs = [(s["address"], s["address"] + s["size"]) for s in seg.get("segments", [])]
        census = [r for r in recs if r.get("event") == "census"]
        launches = sum(r.get("launches", 0) for r in census)
        readable = sum(r.get("launches", 0) for r in census
                       if r.get("maps_in_params", 0) + r.get("maps_in_structs", 0) > r.get("template_maps", 0))
        k128 = sum(1 for r in census if r.get("maps_in_params", 0))
        kstruct = sum(1 for r in census if r.get("maps_in_structs", 0))
        windows = sum((p["size"] - 128) // 64 + 1 for r in census for p in r.get("large_params", []) if p["size"] >= 128)
        large_no_map = sum(1 for r in census for p in r.get("large_params", []) if not p.get("maps"))
        in_mem = not_in_mem = dev_in = dev_out = 0
        for r in recs:
            if r.get("event") != "inspect":
                continue
            for m in r.get("tensor_maps", []):
                t = m.get("tensor_map") or {}
                device = m.get("space") == "device"
                if not (m.get("embedded") or device) or m.get("template") or "address" not in t:
                    continue
                inside = any(lo <= int(t["address"], 16) < hi for lo, hi in segs)
                if device:
                    dev_in, dev_out = dev_in + inside, dev_out + (not inside)
                else:
                    in_mem, not_in_mem = in_mem + inside, not_in_mem + (not inside)
        kdev = sum(1 for r in census if r.get("maps_in_device_memory", 0))
        device_maps = sum(r.get("maps_in_device_memory", 0) for r in census)
        findings = sum(1 for r in recs if r.get("event") in ("violation", "warning"))
        struct_maps = sum(r.get("maps_in_structs", 0) for r in census)
        for k, v in (("launches", launches), ("readable", readable), ("windows", windows), ("struct_maps", struct_maps),
                     ("in_memory", in_mem), ("not_in_memory", not_in_mem), ("device_maps", device_maps),
                     ("device_in_memory", dev_in), ("device_not_in_memory", dev_out), ("findings", findings)):
            totals[k] += v
        rows.append(f"| {w} | {seg.get('status', '?')} | {launches} | {readable} | {len(census)} | {k128} | {kstruct} "
                    f"| {large_no_map} | {windows} | {struct_maps} | {in_mem} / {in_mem + not_in_mem} | {kdev} | "
                    f"{device_maps} | {dev_in} / {dev_in + dev_out} | {findings} |")
        names = demangle([r.get("kernel", "?") for r in census])
        census.sort(key=lambda r: -r.get("launches", 0))
        lines = [f"### {w}", "", "| launches | maps in 128-B params | maps in structs | templates | maps in device "
                 "memory | large params (bytes: maps) | kernel |", "| ---: | ---: | ---: | ---: | ---: | --- | --- |"]
        for r in census[:25]:
            lp = ", ".join(f"{p['size']}: {p.get('maps', 0)}" for p in r.get("large_params", [])) or "-"
            lines.append(f"| {r.get('launches', 0)} | {r.get('maps_in_params', 0)} | {r.get('maps_in_structs', 0)} | "
                         f"{r.get('template_maps', 0)} | {r.get('maps_in_device_memory', 0)} | {lp} | "
                         f"`{short(names.get(r.get('kernel', '?'), '?'))}` |")
        if len(census) > 25:
            lines.append(f"| | | | | | | ... {len(census) - 25} more kernels |")
        logs = sorted(glob.glob(os.path.join(wdir, "*.jsonl")))
        if logs:
            rep = subprocess.run([a.tool, "report"] + logs, capture_output=True, text=True)
            cov = rep.stdout.split("\nkernels (inspect records")[0].strip()
            lines += ["", "<details><summary>tmaguard report</summary>", "", "```", cov, "```", "</details>"]
        details.append("\n".join(lines) + "\n")
    out = [a.header, "",
           "| workload | status | launches | launches with readable maps | kernels | kernels with maps in 128-B "
           "params | kernels with maps in structs | large params without maps | windows searched | maps found in "
           "structs | of those, pointing into PyTorch memory | kernels with maps in device memory | device maps "
           "(distinct, per kernel) | of those recorded, pointing into PyTorch memory | findings |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"] + rows
    out.append(f"| **all** | | {totals['launches']} | {totals['readable']} | | | | | {totals['windows']} | "
               f"{totals['struct_maps']} | {totals['in_memory']} / {totals['in_memory'] + totals['not_in_memory']} | | "
               f"{totals['device_maps']} | {totals['device_in_memory']} / "
               f"{totals['device_in_memory'] + totals['device_not_in_memory']} | {totals['findings']} |")
    out += ["", "## Per workload", ""] + details
    print("\n".join(out))


if __name__ == "__main__":
    main()
