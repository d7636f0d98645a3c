#!/bin/sh
# Cases and iterations through the C marker API (fixtures/growth_cases.c):
# setup versus per-iteration growth per case, the growing site's function
# and line, and leaks attributed to the case that allocated them.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture growth_cases

record "$WORK/g.trace" -- "$FIXTURES/growth_cases"
expect_eq "record exit" 0 "$REC_RC"
report_json "$WORK/g.trace" "$WORK/g.json"

leak_line=$(grep -n 'malloc(48); /\* the growing site' "$SRC_FIXTURES/growth_cases.c" | cut -d: -f1)
case_get() { jget "$WORK/g.json" "[c for c in d['cases'] if c['name']=='$1'][0]$2"; }

expect_eq "case names" '["leaky", "lazy", "reachable", "cycle"]' "$(jget "$WORK/g.json" '[c["name"] for c in d["cases"]]')"

# leaky: 1 MiB set up before the first iteration, then 48 B lost per iteration.
expect_eq "leaky iterations" 100 "$(case_get leaky '["iterations"]')"
expect_eq "leaky growth bytes" 48 "$(case_get leaky '["growth"]["bytes_per_iteration"]')"
expect_eq "leaky growth blocks" 1 "$(case_get leaky '["growth"]["blocks_per_iteration"]')"
expect_eq "leaky setup bytes" 1048576 "$(case_get leaky '["setup"]["bytes"]')"
expect_eq "leaky setup blocks" 1 "$(case_get leaky '["setup"]["blocks"]')"
expect_eq "leaky top site function" leak_48 "$(case_get leaky '["sites"][0]["frames"][0]["function"]')"
expect_eq "leaky top site line" "$leak_line" "$(case_get leaky '["sites"][0]["frames"][0]["line"]')"
expect_eq "leaky top site growth" 48 "$(case_get leaky '["sites"][0]["growth_bytes_per_iteration"]')"
expect_eq "leaky definitely lost" '{"blocks": 100, "bytes": 4800}' "$(case_get leaky '["leaks"]["definitely_lost"]')"

# lazy: a cache filled in the first iteration is setup, not growth.
expect_eq "lazy growth" 0 "$(case_get lazy '["growth"]["bytes_per_iteration"]')"
expect_eq "lazy setup bytes" 4096 "$(case_get lazy '["setup"]["bytes"]')"
expect_eq "lazy leaks" '{"blocks": 0, "bytes": 0}' "$(case_get lazy '["leaks"]["definitely_lost"]')"

# reachable: growth of a global list (node 16 B + payload 64 B), no leak.
expect_eq "reachable growth bytes" 80 "$(case_get reachable '["growth"]["bytes_per_iteration"]')"
expect_eq "reachable growth blocks" 2 "$(case_get reachable '["growth"]["blocks_per_iteration"]')"
expect_eq "reachable definitely lost" '{"blocks": 0, "bytes": 0}' "$(case_get reachable '["leaks"]["definitely_lost"]')"
expect_eq "reachable still reachable" '{"blocks": 100, "bytes": 4000}' "$(case_get reachable '["leaks"]["still_reachable"]')"

# cycle: a dropped two-block cycle per iteration, as memcheck counts it.
expect_eq "cycle growth bytes" 64 "$(case_get cycle '["growth"]["bytes_per_iteration"]')"
expect_eq "cycle definitely lost" '{"blocks": 60, "bytes": 1920}' "$(case_get cycle '["leaks"]["definitely_lost"]')"
expect_eq "cycle indirectly lost" '{"blocks": 60, "bytes": 1920}' "$(case_get cycle '["leaks"]["indirectly_lost"]')"

# Each case counts its own allocations: the 200 B temporary of every
# iteration, 100 / 100 / 50 / 60 times.
for pair in leaky:100 lazy:100 reachable:50 cycle:60; do
    name=${pair%%:*} count=${pair#*:}
    expect_eq "$name: its own temporary allocations" "$count" \
        "$(jget "$WORK/g.json" "sum(s['allocations'] for s in [c for c in d['cases'] if c['name']=='$name'][0]['sites'] if s['frames'][0]['function']=='temporary_work')")"
    expect_eq "$name: its own temporary bytes" "$((count * 200))" \
        "$(jget "$WORK/g.json" "sum(s['allocated_bytes'] for s in [c for c in d['cases'] if c['name']=='$name'][0]['sites'] if s['frames'][0]['function']=='temporary_work')")"
done

# The case checks above classified a copy while the process ran on; with
# MEMSLOPE_CHECK_COPY_MAX=0 they scan the stopped process in place, and
# find the same.
record "$WORK/v.trace" --verbose -- "$FIXTURES/growth_cases"
expect_eq "--verbose: the case checks classified copies" 1 \
    "$(grep -c 'case leak checks: 4 classified from a copy while the program ran on .*, 0 scanned in place' "$WORK/rec.err")"
export MEMSLOPE_CHECK_COPY_MAX=0
record "$WORK/p.trace" --verbose -- "$FIXTURES/growth_cases"
unset MEMSLOPE_CHECK_COPY_MAX
expect_eq "in place: record exit" 0 "$REC_RC"
expect_eq "in place: --verbose says so" 1 \
    "$(grep -c 'case leak checks: 0 classified from a copy .*, 4 scanned in place' "$WORK/rec.err")"
report_json "$WORK/p.trace" "$WORK/p.json"
for name in leaky lazy reachable cycle; do
    expect_eq "in place: $name leaks as with the copy" "$(case_get "$name" '["leaks"]')" \
        "$(jget "$WORK/p.json" "[c for c in d['cases'] if c['name']=='$name'][0]['leaks']")"
done

# A copy over the limit (1K here) is not taken: the checks scan in place.
export MEMSLOPE_CHECK_COPY_MAX=1K
record "$WORK/k.trace" --verbose -- "$FIXTURES/growth_cases"
expect_eq "over the copy limit: in place" 1 \
    "$(grep -c 'case leak checks: 0 classified from a copy .*, 4 scanned in place' "$WORK/rec.err")"
report_json "$WORK/k.trace" "$WORK/k.json"
expect_eq "over the copy limit: leaky leaks as with the copy" "$(case_get leaky '["leaks"]')" \
    "$(jget "$WORK/k.json" "[c for c in d['cases'] if c['name']=='leaky'][0]['leaks']")"
# A value that is no size: said, and the default applies.
export MEMSLOPE_CHECK_COPY_MAX=lots
record "$WORK/b.trace" -- "$FIXTURES/growth_cases"
unset MEMSLOPE_CHECK_COPY_MAX
expect_eq "MEMSLOPE_CHECK_COPY_MAX=lots: record exit" 0 "$REC_RC"
expect_eq "MEMSLOPE_CHECK_COPY_MAX=lots: a warning naming it" 1 \
    "$(grep -c 'MEMSLOPE_CHECK_COPY_MAX=lots is not a size' "$WORK/rec.err")"

# --leak-check iterations: a check at every kept iteration too, same figures
# at the case ends; --leak-check off: no leak figures at all.
record "$WORK/i.trace" --leak-check iterations -- "$FIXTURES/growth_cases"
expect_eq "--leak-check iterations: exit" 0 "$REC_RC"
report_json "$WORK/i.trace" "$WORK/i.json"
expect_eq "--leak-check iterations: leaky definitely lost" '{"blocks": 100, "bytes": 4800}' \
    "$(jget "$WORK/i.json" '[c for c in d["cases"] if c["name"]=="leaky"][0]["leaks"]["definitely_lost"]')"
expect_eq "--leak-check iterations: growth unchanged" 48 \
    "$(jget "$WORK/i.json" '[c for c in d["cases"] if c["name"]=="leaky"][0]["growth"]["bytes_per_iteration"]')"
record "$WORK/o.trace" --leak-check off -- "$FIXTURES/growth_cases"
report_json "$WORK/o.trace" "$WORK/o.json"
expect_eq "--leak-check off: no leak figures" null "$(jget "$WORK/o.json" 'd["leaks_at_exit"]')"
expect_eq "--leak-check off: growth still there" 48 \
    "$(jget "$WORK/o.json" '[c for c in d["cases"] if c["name"]=="leaky"][0]["growth"]["bytes_per_iteration"]')"

# --snapshots 10: thinned to 10 iteration snapshots per case, same figures.
record "$WORK/s.trace" --snapshots 10 -- "$FIXTURES/growth_cases"
report_json "$WORK/s.trace" "$WORK/s.json"
expect_eq "--snapshots 10: leaky growth" 48 \
    "$(jget "$WORK/s.json" '[c for c in d["cases"] if c["name"]=="leaky"][0]["growth"]["bytes_per_iteration"]')"
expect_eq "--snapshots 10: leaky setup" 1048576 \
    "$(jget "$WORK/s.json" '[c for c in d["cases"] if c["name"]=="leaky"][0]["setup"]["bytes"]')"
expect_eq "--snapshots 10: lazy growth" 0 \
    "$(jget "$WORK/s.json" '[c for c in d["cases"] if c["name"]=="lazy"][0]["growth"]["bytes_per_iteration"]')"
"$MEMSLOPE" record --snapshots 2 -o "$WORK/bad.trace" -- true >/dev/null 2>&1
expect_eq "--snapshots below 3 is a usage error" 2 $?

# The text report shows every case with its growth.
"$MEMSLOPE" report "$WORK/g.trace" >"$WORK/g.txt" 2>&1
expect_eq "text report names leaky's growth" "  growth: 48.0 B per iteration (1.0 blocks)" \
    "$(sed -n '/^leaky: /,/^$/p' "$WORK/g.txt" | grep '^  growth: ')"
finish
