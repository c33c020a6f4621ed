#!/usr/bin/env python3
"""`tmaguard report` at fleet scale: JSON-lines logs of MIB mebibytes (256 ranks on 32 hosts, each a start record,
violations of five rules and a summary), made from the records of one real run (SEED: a log tmaguard wrote), then read
by the tool. Prints the size, the wall time and the tool's peak resident memory; asserts nothing.

    report_scale.py TOOL SEED.jsonl [MIB]

    REPORT_SCALE mib=1024 files=256 records=430180 wall_s=9.97 max_rss_kib=3840
"""
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

tool, seed = sys.argv[1], sys.argv[2]
mib = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
recs = {}
for line in open(seed):
    r = json.loads(line)
    recs.setdefault(r.get("event"), r)
if not {"start", "violation", "summary"} <= recs.keys():
    sys.exit(f"report_scale: {seed} lacks a start, violation or summary record")
rules = ["fa4-dk-not-k-major", "fa4-dv-not-k-major", "generic-misaligned", "map-tensor-mismatch", "map-store-spill"]
files = 256
with tempfile.TemporaryDirectory() as d:
    records = 0
    for f in range(files):
        who = {"rank": f, "host": f"node{f // 8:04d}", "pid": 1000 + f}
        dump = lambda r, **kw: json.dumps(dict(r, **who, **kw), separators=(",", ":"))
        viols = [dump(recs["violation"], rule=r) for r in rules]
        lines, size, i = [dump(recs["start"])], 0, 0
        while size < (mib << 20) // files:
            lines.append(viols[i % len(viols)])
            size += len(lines[-1]) + 1
            i += 1
        lines.append(dump(recs["summary"]))
        records += len(lines)
        with open(os.path.join(d, f"rank{f:04d}.jsonl"), "w") as out:
            out.write("\n".join(lines) + "\n")
    paths = sorted(os.path.join(d, n) for n in os.listdir(d))
    t0 = time.monotonic()
    rc = subprocess.run([tool, "report", *paths], stdout=subprocess.DEVNULL).returncode
    wall = time.monotonic() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(f"REPORT_SCALE mib={mib} files={files} records={records} wall_s={wall:.2f} max_rss_kib={rss} rc={rc}")
