#!/bin/sh
# memslope report --format collapsed: "root;...;leaf N" lines that
# flamegraph.pl and inferno read, per --metric, one frame per function (no
# lines: handle_request, which calls from two lines, is one frame);
# demo_leak's leaky_site leaks 4800 bytes; a metric without data (growth
# with no iterations) is an error that leaves no file behind.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture demo_leak growth_cases
need_python

# Every line: frames separated by ';', none empty, then a space and a count.
expect_collapsed_lines() {
    expect_eq "$1: lines end in a count" 0 "$(grep -cvE '^[^; ][^;]*(;[^;]+)* [0-9]+$' "$2")"
    expect_ne "$1: not empty" 0 "$(wc -l <"$2" | tr -d ' ')"
}

LEAK=$(fixture_line demo_leak.c DEMO-LEAK)
record "$WORK/demo.trace" -- "$FIXTURES/demo_leak"

report_format leaked.folded "$WORK/demo.trace" collapsed --metric leaked
expect_eq "--metric leaked exit" 0 "$RC"
expect_collapsed_lines "leaked" "$WORK/leaked.folded"
expect_match "leaky_site leaks 4800 bytes, root first" "^(.*;)?main;handle_request;leaky_site 4800\$" "$WORK/leaked.folded"
expect_eq "leaked total" 4800 "$(awk '{ s += $NF } END { print s }' "$WORK/leaked.folded")"

for metric in peak allocated temporary; do
    report_format "$metric.folded" "$WORK/demo.trace" collapsed --metric "$metric"
    expect_eq "--metric $metric exit" 0 "$RC"
    expect_collapsed_lines "$metric" "$WORK/$metric.folded"
done
expect_eq "allocated total" 31552 "$(awk '{ s += $NF } END { print s }' "$WORK/allocated.folded")"
expect_eq "peak total" 6208 "$(awk '{ s += $NF } END { print s }' "$WORK/peak.folded")"
expect_match "render_request allocated 25600 bytes" ";main;handle_request;render_request 25600\$" "$WORK/allocated.folded"
expect_match "render_request's 100 temporaries" ";handle_request;render_request 100\$" "$WORK/temporary.folded"
expect_eq "one frame per function: no line numbers" 0 "$(grep -c ':[0-9]' "$WORK/allocated.folded")"
expect_eq "handle_request's two calling lines are one frame: three stacks under it" 3 \
    "$(grep -c ';main;handle_request;' "$WORK/allocated.folded")"
expect_eq "... and one path to it" 1 "$(sed 's/;handle_request;.*//' "$WORK/allocated.folded" | sort -u | wc -l | tr -d ' ')"

# Growth without iterations: an error naming the problem, and no file.
report_format growth.folded "$WORK/demo.trace" collapsed --metric growth
expect_eq "--metric growth without iterations exits 1" 1 "$RC"
expect_match "the message says why" "growth" "$WORK/growth.folded.err"
expect_eq "no output file" absent "$([ -e "$WORK/growth.folded" ] && echo present || echo absent)"
expect_eq "no temporary file left" "" "$(ls -A "$WORK" | grep '\.tmp$')"

# Cases become root frames.
record "$WORK/growth.trace" -- "$FIXTURES/growth_cases"
report_format cases.folded "$WORK/growth.trace" collapsed --metric leaked
expect_eq "growth_cases --metric leaked exit" 0 "$RC"
expect_collapsed_lines "growth_cases leaked" "$WORK/cases.folded"
expect_match "case leaky leaks 4800 at leak_48" '^\[case leaky\];.*;main;leak_48 4800$' "$WORK/cases.folded"

# Growth per iteration, once the model estimates it (leaky: 48 B at leak_48).
report_json "$WORK/growth.trace" "$WORK/growth.json"
if [ "$(jget "$WORK/growth.json" '[c["growth"] is not None for c in d["cases"] if c["name"] == "leaky"][0]')" = true ]; then
    report_format growth_cases.folded "$WORK/growth.trace" collapsed --metric growth
    expect_eq "growth_cases --metric growth exit" 0 "$RC"
    expect_collapsed_lines "growth_cases growth" "$WORK/growth_cases.folded"
    expect_match "case leaky grows 48 B per iteration at leak_48" '^\[case leaky\];.*;leak_48 48$' "$WORK/growth_cases.folded"
    expect_no_match "lazy does not grow" '^\[case lazy\]' "$WORK/growth_cases.folded"
else
    log "(the report has no growth figures yet: --metric growth on growth_cases not checked)"
fi

# The consumers themselves, when installed.
for tool in flamegraph.pl inferno-flamegraph; do
    if command -v "$tool" >/dev/null 2>&1; then
        "$tool" <"$WORK/leaked.folded" >"$WORK/$tool.svg" 2>"$WORK/$tool.err"
        expect_eq "$tool reads it" 0 $?
        expect_match "$tool draws leaky_site" "leaky_site" "$WORK/$tool.svg"
    else
        log "($tool not installed: not tried)"
    fi
done
finish
