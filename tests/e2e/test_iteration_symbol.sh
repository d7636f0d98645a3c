#!/bin/sh
# --iteration SYMBOL on unmodified programs: a C function, a C++ method by
# its demangled name, an ambiguous name (error listing the candidates), a
# name never found (a warning in the report).
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture iteration_body iteration_cxx

record "$WORK/c.trace" --iteration bench_body -- "$FIXTURES/iteration_body" 200
expect_eq "C: record exit" 0 "$REC_RC"
report_json "$WORK/c.trace" "$WORK/c.json"
line=$(fixture_line iteration_body.c LOST_LINE)
expect_eq "C: iterations" 200 "$(jget "$WORK/c.json" 'd["cases"][0]["iterations"]')"
expect_eq "C: growth" 48 "$(jget "$WORK/c.json" 'd["cases"][0]["growth"]["bytes_per_iteration"]')"
expect_eq "C: growth blocks" 1 "$(jget "$WORK/c.json" 'd["cases"][0]["growth"]["blocks_per_iteration"]')"
expect_eq "C: top site" "bench_body:$line" "$(jget "$WORK/c.json" '"%s:%s" % (d["cases"][0]["sites"][0]["frames"][0]["function"], d["cases"][0]["sites"][0]["frames"][0]["line"])')"
expect_eq "C: cache is setup" 4096 "$(jget "$WORK/c.json" 'd["cases"][0]["sites"][0]["setup_bytes"] if False else [s for s in d["cases"][0]["sites"] if s["frames"][0]["function"]=="bench_body" and s["frames"][0]["line"]!='"$line"'][0]["setup_bytes"]')"

record "$WORK/x.trace" --iteration 'bench::Body::run' -- "$FIXTURES/iteration_cxx"
expect_eq "C++: record exit" 0 "$REC_RC"
report_json "$WORK/x.trace" "$WORK/x.json"
line=$(fixture_line iteration_cxx.cpp LOST_LINE)
expect_eq "C++: iterations" 50 "$(jget "$WORK/x.json" 'd["cases"][0]["iterations"]')"
expect_eq "C++: growth" 32 "$(jget "$WORK/x.json" 'd["cases"][0]["growth"]["bytes_per_iteration"]')"
expect_eq "C++: top site" "bench::Body::run(int):$line" "$(jget "$WORK/x.json" '"%s:%s" % (d["cases"][0]["sites"][0]["frames"][0]["function"], d["cases"][0]["sites"][0]["frames"][0]["line"])')"

record "$WORK/a.trace" --iteration 'bench::step' -- "$FIXTURES/iteration_cxx"
expect_eq "ambiguous: exit 2" 2 "$REC_RC"
expect_match "ambiguous: lists both" "ambiguous; it names 2 functions" "$WORK/rec.err"
expect_match "ambiguous: int overload" "bench::step\\(int\\)|_ZN5bench4stepEi" "$WORK/rec.err"

record "$WORK/n.trace" --iteration no_such_function -- "$FIXTURES/iteration_body" 10
expect_eq "never found: the program's own exit status" 0 "$REC_RC"
report_json "$WORK/n.trace" "$WORK/n.json"
jget "$WORK/n.json" 'd["warnings"]' >"$WORK/n.warnings"
expect_match "never found: warning in the report" "no_such_function" "$WORK/n.warnings"
finish
