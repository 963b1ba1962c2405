#!/usr/bin/env python3
"""ab.py (colmid, issue 13): the bench.py rows whose label matches a regex, timed with an old
fusc and with build/fusc in one process (bench.py's timer, inputs and checks; torch.compile
skipped: --no-compile), then old / new GB/s side by side.
Usage: python3 bench/otry/cm/ab.py OLD_FUSC REGEX [SUITES]"""
import io
import os
import re
import sys
from contextlib import redirect_stdout

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import bench  # noqa: E402
import cases as C  # noqa: E402

old, pat = sys.argv[1], re.compile(sys.argv[2])
suites = (sys.argv[3] if len(sys.argv) > 3 else "auto,users,outer").split(",")
picked, seen = [], set()
for c in (c for s in suites for c in C.SUITES[s]() if pat.search(c.label)):
    if c.label not in seen:  # the outer suite repeats the auto rows
        seen.add(c.label)
        picked.append(c)
C.SUITES["ab"] = lambda: picked
rows = {}
for tag, fusc in (("old", old), ("new", "build/fusc")):
    bench.FUSC = fusc
    buf = io.StringIO()
    with redirect_stdout(buf):
        bench.main(["--suite", "ab", "--no-compile", "--build", f"/tmp/ab_{tag}",
                    "--deadline", os.environ.get("AB_DEADLINE", "1e9")])
    for line in buf.getvalue().splitlines():
        m = re.match(r"ROW suite=(\S+) name=(\S+) fusc_ms=(\S+) fusc_gbs=(\S+) eager_gbs=(\S+)", line)
        if m:
            rows.setdefault(m.group(2), {})[tag] = (m.group(4), m.group(5))
            print(tag, m.group(2), m.group(4), flush=True)
        elif "FAIL" in line or "Error" in line:
            print(tag, line[:300])
print("case | old GB/s | new GB/s | new/old | eager GB/s")
for name, r in rows.items():
    o, n = r.get("old", ("-", "-")), r.get("new", ("-", "-"))
    try:
        q = f"{float(n[0]) / float(o[0]):.3f}"
    except ValueError:
        q = "-"
    print(f"{name} | {o[0]} | {n[0]} | {q} | {n[1]}")
