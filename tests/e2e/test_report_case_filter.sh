#!/bin/sh
# --case NAME filters every section of every format, and the gate: on
# growth_cases, case leaky (1 MiB setup, 100 x 48 B lost at leak_48, 100
# temporaries of 200 B: 201 allocations, 1,073,376 bytes) and nothing of the
# other cases (drop_cycle, append_reachable, fill_cache_once).
. "$(dirname "$0")/lib.sh"
need_memslope
need_python
need_fixture growth_cases

record "$WORK/g.trace" -- "$FIXTURES/growth_cases"
LEAK48=$(grep -n 'malloc(48); /\* the growing site' "$SRC_FIXTURES/growth_cases.c" | cut -d: -f1)
OTHERS='drop_cycle|append_reachable|fill_cache_once'

report_to() {
    _out=$WORK/$1
    shift
    log "\$ memslope report $WORK/g.trace --case leaky $* -o $_out"
    timeout -k 5 60 "$MEMSLOPE" report "$WORK/g.trace" --case leaky "$@" -o "$_out" 2>"$_out.err"
    RC=$?
    [ "$RC" -eq 0 ] || { sed 's/^/    | /' "$_out.err"; _mismatch "report --case leaky $* exited $RC"; }
}

# text: the leaks are the case's own, the only case is leaky, no other process section.
report_to leaky.txt
expect_match "text: the leaks are the case's" "^Leaks of case leaky: the blocks it allocated" "$WORK/leaky.txt"
expect_match "text: its one loss record" "^4,800 bytes in 100 blocks are definitely lost in loss record 1 of 1$" "$WORK/leaky.txt"
expect_match "text: its summary" "^   still reachable: 1,048,576 bytes in 1 blocks$" "$WORK/leaky.txt"
expect_eq "text: one case section" "leaky" "$(sed -n 's/^\([a-z]*\): [0-9]* iterations; peak.*/\1/p' "$WORK/leaky.txt")"
expect_no_match "text: nothing of the other cases" "$OTHERS|^lazy:|^cycle:" "$WORK/leaky.txt"

# JSON: cases, leaks_at_exit and the filter named.
report_to leaky.json --format json
expect_eq "JSON: case_filter" leaky "$(jget "$WORK/leaky.json" 'd["case_filter"]')"
expect_eq "JSON: cases" '["leaky"]' "$(jget "$WORK/leaky.json" '[c["name"] for c in d["cases"]]')"
expect_eq "JSON: leaks_at_exit is the case's" "4800 100 0 1048576" \
    "$(jget "$WORK/leaky.json" '"%d %d %d %d" % (d["leaks_at_exit"]["definitely_lost"]["bytes"], d["leaks_at_exit"]["definitely_lost"]["blocks"], d["leaks_at_exit"]["indirectly_lost"]["bytes"], d["leaks_at_exit"]["still_reachable"]["bytes"])')"
report_json "$WORK/g.trace" "$WORK/all.json"
expect_eq "JSON without --case: leaks_at_exit is the whole process's" 6720 \
    "$(jget "$WORK/all.json" 'd["leaks_at_exit"]["definitely_lost"]["bytes"]')"
expect_eq "JSON without --case: no case_filter" MISSING "$(jget "$WORK/all.json" 'd.get("case_filter", "MISSING")')"

# collapsed: only the case's stacks, weighed by its own figures.
report_to leaked.folded --format collapsed --metric leaked
expect_eq "collapsed leaked: leak_48's 4,800 bytes alone" "_start;__libc_start_main_impl;__libc_start_call_main;main;leak_48 4800" \
    "$(cat "$WORK/leaked.folded")"
report_to allocated.folded --format collapsed --metric allocated
expect_eq "collapsed allocated: the case's 1,073,376 bytes" 1073376 "$(awk '{ s += $NF } END { print s }' "$WORK/allocated.folded")"
expect_no_match "collapsed: nothing of the other cases" "$OTHERS" "$WORK/allocated.folded"
report_to temporary.folded --format collapsed --metric temporary
expect_eq "collapsed temporary: the case's 100 frees" "_start;__libc_start_main_impl;__libc_start_call_main;main;temporary_work 100" \
    "$(cat "$WORK/temporary.folded")"

# speedscope: the same figures, per profile.
report_to leaky.speedscope.json --format speedscope
expect_eq "speedscope: totals of the case (leaked, allocated bytes, allocations)" "4800 1073376 201" "$("$PY" - "$WORK/leaky.speedscope.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p = {x["name"]: sum(x["weights"]) for x in d["profiles"]}
print("%d %d %d" % (p["leaked"], p["allocated bytes"], p["allocations"]))
PY
)"
expect_no_match "speedscope: nothing of the other cases" "$OTHERS" "$WORK/leaky.speedscope.json"

# pprof: the functions of the case only.
report_to leaky.pb.gz --format pprof
expect_eq "pprof: leak_48, not the other cases' functions" "True False" "$("$PY" - "$WORK/leaky.pb.gz" <<'PY'
import gzip, sys
data = gzip.open(sys.argv[1]).read()
print(b"leak_48" in data, any(name in data for name in (b"drop_cycle", b"append_reachable", b"fill_cache_once")))
PY
)"

# HTML: the page's data holds the case alone.
report_to leaky.html --format html
expect_eq "HTML: one case, its leaks, its allocations" "leaky 4800 1073376 False" "$("$PY" - "$WORK/leaky.html" <<'PY'
import json, re, sys
page = open(sys.argv[1]).read()
d = json.loads(re.search(r'<script type="application/json" id="memslope-data">(.*?)</script>', page, re.S).group(1))
names = [f[0] for f in d["frames"]]
print(" ".join(c["name"] for c in d["cases"]), d["leaks_at_exit"]["definitely_lost"][0],
      sum(s["allocated"] for s in d["process_sites"]), any(n in names for n in ("drop_cycle", "append_reachable", "fill_cache_once")))
PY
)"

# gate: the one case.
"$MEMSLOPE" gate "$WORK/g.trace" --case leaky --max-leaked 0 >"$WORK/gate.out" 2>&1
expect_eq "gate --case leaky: exit" 1 $?
expect_eq "gate --case leaky: one failure, leaky's" "1 leaky" \
    "$(grep -c '^memslope gate: FAIL case' "$WORK/gate.out") $(sed -n "s/^memslope gate: FAIL case '\\([a-z]*\\)'.*/\\1/p" "$WORK/gate.out")"
expect_match "gate --case leaky: the site" "top site leak_48 \\(growth_cases.c:$LEAK48\\)" "$WORK/gate.out"
finish
