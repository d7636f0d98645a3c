#!/bin/sh
# demo_leak (the `make demo` fixture): exact totals, the leaking site with its
# function, file and line, the temporaries, the cache, the peak; totals equal
# memcheck's "total heap usage" line; the text report names the leak.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture demo_leak
need_python

LEAK=$(fixture_line demo_leak.c DEMO-LEAK)
TEMP=$(fixture_line demo_leak.c DEMO-TEMP)
TABLE=$(fixture_line demo_leak.c DEMO-CONFIG-TABLE)
ENTRY=$(fixture_line demo_leak.c DEMO-CONFIG-ENTRY)

record_and_report demo -- "$FIXTURES/demo_leak"
J=$WORK/demo.json
expect_eq "record exit status" 0 "$REC_RC"
expect_eq "stdout of the target (passes through, empty)" "" "$(cat "$WORK/rec.out")"
expect_eq "format" memslope-report "$(jget "$J" 'd["format"]')"
expect_eq "version" 1 "$(jget "$J" 'd["version"]')"
expect_eq "exit" '{"status": 0}' "$(jget "$J" 'd["exit"]')"
expect_eq "command[0] ends with demo_leak" true "$(jget "$J" 'd["command"][0].endswith("demo_leak")')"

# Known in advance (see fixtures/demo_leak.c).
expect_totals "$J" d 217 100 31552
expect_eq "totals.peak_bytes" 6208 "$(jget "$J" 'd["totals"]["peak_bytes"]')"

expect_site "$J" leaky_site "$LEAK" allocations=100 allocated_bytes=4800 live_bytes=4800
expect_eq "leaky_site frame file" demo_leak.c "$(jget "$J" '[f["file"].rsplit("/",1)[-1] for s in d["cases"][0]["sites"] for f in s["frames"][:1] if f["function"]=="leaky_site"][0]')"
expect_eq "leaky_site frame module ends with /demo_leak" true "$(jget "$J" '[f["module"].endswith("/demo_leak") for s in d["cases"][0]["sites"] for f in s["frames"][:1] if f["function"]=="leaky_site"][0]')"
expect_eq "leaky_site caller is handle_request" handle_request "$(jget "$J" '[s["frames"][1]["function"] for s in d["cases"][0]["sites"] if s["frames"][0]["function"]=="leaky_site"][0]')"
expect_site "$J" render_request "$TEMP" allocations=100 allocated_bytes=25600 live_bytes=0
expect_site "$J" load_config "$TABLE" allocations=1 allocated_bytes=128 live_bytes=128
expect_site "$J" load_config "$ENTRY" allocations=16 allocated_bytes=1024 live_bytes=1024
expect_eq "no site shows an allocator frame innermost" "[]" \
    "$(jget "$J" 'sorted({s["frames"][0]["function"] for s in d["cases"][0]["sites"] if s["frames"] and s["frames"][0]["function"] in ("malloc","calloc","realloc","free")})')"

# The same totals as memcheck's "total heap usage" line, computed now.
if command -v valgrind >/dev/null 2>&1; then
    vg_run demo -- "$FIXTURES/demo_leak"
    vg_totals "$(vg_log demo)"
    expect_vg_totals "$J"
else
    log "valgrind not installed: cross-check skipped"
fi

# The text report (what `make demo` prints) names the leak and its line.
log "\$ memslope report $WORK/demo.trace"
"$MEMSLOPE" report "$WORK/demo.trace" >"$WORK/demo.txt" 2>"$WORK/demo.txt.err"
expect_eq "text report exit status" 0 "$?"
expect_match "text report names leaky_site at demo_leak.c:$LEAK" "leaky_site.*demo_leak\.c:$LEAK" "$WORK/demo.txt"

# The flags before FILE work too (the order the lead's smoke command uses).
"$MEMSLOPE" report --format json "$WORK/demo.trace" >"$WORK/demo2.json" 2>/dev/null
expect_eq "report --format json FILE exit status" 0 "$?"
expect_eq "report --format json FILE: same totals" "$(jget "$J" 'd["totals"]')" "$(jget "$WORK/demo2.json" 'd["totals"]' 2>/dev/null)"

# -o OUT writes the same report to a file, nothing to stdout.
"$MEMSLOPE" report "$WORK/demo.trace" --format json -o "$WORK/demo3.json" >"$WORK/demo3.out" 2>/dev/null
expect_eq "report -o OUT: exit status" 0 "$?"
expect_eq "report -o OUT: nothing on stdout" 0 "$(wc -c <"$WORK/demo3.out")"
expect_eq "report -o OUT: same JSON as stdout" same "$(cmp -s "$J" "$WORK/demo3.json" && echo same || echo different)"
finish
