#!/bin/sh
# The HTML page's flame graph and speedscope draw a node per function on a
# path, so they hold one entry for the sites whose frames name the same
# functions (a Python test suite has a site for every distinct line on the
# way to an allocation: a million of them), their figures summed; and the
# page, of a case's sites, only those that grow or leak, the ones its tables
# and flame views show. fixtures/python/two_lines.py allocates 100
# bytearrays of 10,000 bytes on one line of build() and 100 of 20,000 on
# the next.
. "$(dirname "$0")/lib.sh"
need_memslope
need_python

SMALL_LINE=$(fixture_line python/two_lines.py SMALL_LINE)
LARGE_LINE=$(fixture_line python/two_lines.py LARGE_LINE)
record "$WORK/t.trace" -- "$PY" "$SRC_FIXTURES/python/two_lines.py"
expect_eq "record exit" 0 "$REC_RC"
report_json "$WORK/t.trace" "$WORK/t.json" --metric allocated
report_format t.html "$WORK/t.trace" html
expect_eq "report --format html exit" 0 "$RC"

# The two sites of the buffers, in the JSON report: one a line.
expect_eq "two sites, one a line" "$SMALL_LINE:1000000 $LARGE_LINE:2000000" \
    "$(jget "$WORK/t.json" "' '.join('%d:%d' % (l, b) for l, b in sorted(set((f['line'], s['allocated_bytes'] // 1000 * 1000) for s in d['cases'][0]['sites'] if s['allocations'] == 100 and s['allocated_bytes'] >= 1000000 for f in s['frames'] if f['function'] == 'build')))")"

# The page: one entry for both, 3,000,000 bytes and more.
"$PY" - "$WORK/t.html" >"$WORK/page.txt" <<'PYEOF'
import json, re, sys
page = open(sys.argv[1], encoding="utf-8").read()
data = json.loads(re.search(r'<script type="application/json"[^>]*>(.*?)</script>', page, re.S).group(1))
functions = [f[0] for f in data["functions"]]
def names(entry):
    return [functions[data["frames"][f][4]] for f in entry["stack"]]
buffers = [e for e in data["process_sites"] if "build (two_lines.py)" in names(e) and e["allocated"] >= 1000000]
print("entries", len(buffers))
print("allocations", sum(e["allocations"] for e in buffers))
print("bytes", sum(e["allocated"] for e in buffers) // 1000 * 1000)
print("case sites", sum(len(c["sites"]) for c in data["cases"]))
PYEOF
log "$(cat "$WORK/page.txt")"
expect_eq "the page: one entry for the two sites" "entries 1" "$(sed -n 1p "$WORK/page.txt")"
expect_eq "its figures summed" "allocations 200" "$(sed -n 2p "$WORK/page.txt")"
expect_eq "its bytes summed" "bytes 3000000" "$(sed -n 3p "$WORK/page.txt")"
expect_eq "no case site (nothing grows, nothing leaks)" "case sites 0" "$(sed -n 4p "$WORK/page.txt")"

# speedscope: one sample for both in the allocated-bytes profile.
report_format t.speedscope "$WORK/t.trace" speedscope
expect_eq "report --format speedscope exit" 0 "$RC"
"$PY" - "$WORK/t.speedscope" >"$WORK/speedscope.txt" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
frames = d["shared"]["frames"]
profile = [p for p in d["profiles"] if p["name"] == "allocated bytes"][0]
buffers = [w for s, w in zip(profile["samples"], profile["weights"])
           if any(frames[f]["name"] == "build (two_lines.py)" for f in s) and w >= 1000000]
print("samples", len(buffers), "bytes", int(sum(buffers)) // 1000 * 1000)
PYEOF
expect_eq "speedscope: one sample for the two sites, bytes summed" "samples 1 bytes 3000000" "$(cat "$WORK/speedscope.txt")"
finish
