#!/bin/sh
# memslope report --format pprof: gzipped profile.proto, read back by
# `go tool pprof`: demo_leak's leaky_site leaks 4800 bytes, render_request
# allocates 25600; sample types; growth_cases' leaks labelled by case.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture demo_leak growth_cases
command -v go >/dev/null 2>&1 || skip "go is not installed (apt-get install golang-go; make deps installs it)"
export HOME="${HOME:-$WORK}" GOCACHE="$WORK/gocache" PPROF_TMPDIR="$WORK"

# pprof OUT [OPTION...] PROFILE: go tool pprof, output in $WORK/OUT.
pprof() {
    _out=$WORK/$1
    shift
    log "\$ go tool pprof $*"
    timeout -k 5 120 go tool pprof "$@" >"$_out" 2>"$_out.err"
    _rc=$?
    sed 's/^/    > /' "$_out" | head -n 14
    [ "$_rc" -eq 0 ] || { sed 's/^/    | /' "$_out.err"; fail "go tool pprof $* exited $_rc"; }
}

LEAK=$(fixture_line demo_leak.c DEMO-LEAK)
record "$WORK/demo.trace" -- "$FIXTURES/demo_leak"
report_format demo.pb.gz "$WORK/demo.trace" pprof
expect_eq "report --format pprof exit" 0 "$RC"
expect_eq "gzip magic" 1f8b "$(od -An -tx1 -N2 "$WORK/demo.pb.gz" | tr -d ' \n')"

pprof top.txt -top -unit=B "$WORK/demo.pb.gz"
expect_match "default sample type: leaked_space" '^Type: leaked_space' "$WORK/top.txt"
expect_match "leaky_site leaked 4800 B" '^ *4800B .* leaky_site$' "$WORK/top.txt"
expect_match "the mapping's file is demo_leak" '^File: demo_leak$' "$WORK/top.txt"
expect_match "the mapping has a build id" '^Build ID: [0-9a-f]+$' "$WORK/top.txt"

pprof alloc.txt -top -unit=B -sample_index=alloc_space "$WORK/demo.pb.gz"
expect_match "render_request allocated 25600 B" '^ *25600B .* render_request$' "$WORK/alloc.txt"
pprof objects.txt -top -sample_index=alloc_objects "$WORK/demo.pb.gz"
expect_match "217 allocations in total" 'Total samples = 217$|of 217 total' "$WORK/objects.txt"

pprof raw.txt -raw "$WORK/demo.pb.gz"
expect_match "sample types" '^alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes leaked_objects/count leaked_space/bytes\[dflt\]' "$WORK/raw.txt"
expect_match "leaky_site's location has file and line" "leaky_site [^ ]*demo_leak\.c:$LEAK" "$WORK/raw.txt"

pprof lines.txt -top -lines -unit=B "$WORK/demo.pb.gz"
expect_match "-lines names demo_leak.c:$LEAK" "leaky_site [^ ]*demo_leak\.c:$LEAK" "$WORK/lines.txt"

record "$WORK/growth.trace" -- "$FIXTURES/growth_cases"
report_format growth.pb.gz "$WORK/growth.trace" pprof
expect_eq "growth_cases pprof exit" 0 "$RC"
pprof growth_raw.txt -raw "$WORK/growth.pb.gz"
expect_match "growth/bytes sample type (the cases have iterations)" '^alloc_objects/count .* growth/bytes' "$WORK/growth_raw.txt"
pprof leaky.txt -top -unit=B -sample_index=leaked_space -tagfocus=case=leaky "$WORK/growth.pb.gz"
expect_match "case leaky: leak_48 leaked 4800 B" '^ *4800B .* leak_48$' "$WORK/leaky.txt"
need_python
report_json "$WORK/growth.trace" "$WORK/growth.json"
if [ "$(jget "$WORK/growth.json" '[c["growth"] is not None for c in d["cases"] if c["name"] == "leaky"][0]')" = true ]; then
    pprof growth_top.txt -top -unit=B -tagfocus=case=leaky "$WORK/growth.pb.gz"
    expect_match "default sample type: growth" '^Type: growth$' "$WORK/growth_top.txt"
    expect_match "case leaky: leak_48 grows 48 B per iteration" '^ *48B .* leak_48$' "$WORK/growth_top.txt"
else
    log "(the report has no growth figures yet: the growth sample type not checked)"
fi
finish
