#!/bin/sh
# A case's check is classified from a copy taken at its end, while the
# program runs on (docs/leakscan.md): fixtures/case_then_drop.c stores the
# only pointer to a block right after the case ends; the case's check
# still finds the block lost, as it was at the end, and the exit check
# finds it reachable. The same with MEMSLOPE_CHECK_COPY_MAX=0, where the
# stopped program is scanned in place.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture case_then_drop

for mode in copy in-place; do
    if [ "$mode" = in-place ]; then export MEMSLOPE_CHECK_COPY_MAX=0; fi
    record "$WORK/$mode.trace" --verbose -- "$FIXTURES/case_then_drop"
    unset MEMSLOPE_CHECK_COPY_MAX
    expect_eq "$mode: record exit" 0 "$REC_RC"
    if [ "$mode" = copy ]; then
        expect_eq "copy: the case's check classified a copy" 1 \
            "$(grep -c 'case leak checks: 1 classified from a copy' "$WORK/rec.err")"
    fi
    report_json "$WORK/$mode.trace" "$WORK/$mode.json"
    expect_eq "$mode: case hidden, definitely lost at its end" '{"blocks": 1, "bytes": 100}' \
        "$(jget "$WORK/$mode.json" '[c for c in d["cases"] if c["name"]=="hidden"][0]["leaks"]["definitely_lost"]')"
    expect_eq "$mode: at exit, nothing lost" '{"blocks": 0, "bytes": 0}' \
        "$(jget "$WORK/$mode.json" 'd["leaks_at_exit"]["definitely_lost"]')"
    expect_eq "$mode: at exit, the block and the list reachable" '{"blocks": 200001, "bytes": 3200100}' \
        "$(jget "$WORK/$mode.json" 'd["leaks_at_exit"]["still_reachable"]')"
done
finish
