#!/bin/sh
# Two races of the held sets (--sample-rate, MEMSLOPE_HOLD=always), from
# the review of the sets without stamps; each failed in most runs before
# its fix, and is recorded twice here:
#
#   held_case_window: frees made between a case's opening and the tracer's
#     take of the sets at its breakpoint looked in no set; their blocks
#     stayed there and the take counted them live (64 blocks lost at exit,
#     most cases' leak checks refused: "heap blocks overlap").
#   held_realloc_end: a realloc read its free's stamp before looking in the
#     sets, after the real call; a block its ending owner took out between
#     the two crossed stamped after that free, which did not cancel it (a
#     4 MiB block live at exit).
#
# Nothing is live at exit in either; totals equal the fixture's own counts.
. "$(dirname "$0")/lib.sh"
need_memslope
need_python
need_fixture held_case_window
need_fixture held_realloc_end
export MEMSLOPE_HOLD=always
P='[p for p in d["processes"] if p["primary"]][0]'

# figures JSON: "allocations frees live_blocks live_bytes warnings"
figures() {
    jget "$1" "' '.join(str(x) for x in [${P}['totals']['allocations'], ${P}['totals']['frees'], ${P}['live_at_exit']['blocks'], ${P}['live_at_exit']['bytes'], len(d['warnings'])])"
}

for run in 1 2; do
    record "$WORK/w$run.trace" --sample-rate 512K -- "$FIXTURES/held_case_window" 200
    expect_eq "case_window $run: record exit" 0 "$REC_RC"
    churned=$(awk '/^churned /{print $2}' "$WORK/rec.out")
    case "$churned" in
        ''|*[!0-9]*) fail "held_case_window printed no count: '$churned'" ;;
    esac
    expect_no_match "case_window $run: no refused leak check" "overlap" "$WORK/rec.err"
    report_json "$WORK/w$run.trace" "$WORK/w$run.json"
    # the worker's blocks, its TLS vector and stdout's buffer (freeres frees both)
    expect_eq "case_window $run: allocations frees live(blocks bytes) warnings" \
        "$((churned + 2)) $((churned + 2)) 0 0 0" "$(figures "$WORK/w$run.json")"
    expect_eq "case_window $run: 200 cases, none leaking, every leak check run" "200 0 0" \
        "$(jget "$WORK/w$run.json" "' '.join(str(x) for x in [len(d['cases']), sum(c['leaks']['definitely_lost']['blocks'] + c['leaks']['possibly_lost']['blocks'] for c in d['cases'] if c['leaks']), sum(1 for c in d['cases'] if not c['leaks'])])")"

    record "$WORK/r$run.trace" --sample-rate 512K -- "$FIXTURES/held_realloc_end" 20000
    expect_eq "realloc_end $run: record exit" 0 "$REC_RC"
    expect_match "realloc_end $run: the fixture ran" "^rounds 20000\$" "$WORK/rec.out"
    report_json "$WORK/r$run.trace" "$WORK/r$run.json"
    # 20,000 x (malloc, realloc's free and allocation, free); 3 TLS vectors
    # (the reallocating and spinning threads', the ending threads' one) and
    # stdout's buffer
    expect_eq "realloc_end $run: allocations frees live(blocks bytes) warnings" "40004 40004 0 0 0" \
        "$(figures "$WORK/r$run.json")"
done
finish
