#!/bin/sh
# Many cases (issue 19): every part of reading and reporting is linear in
# the number of cases. 100,000 cases took 150 s to report (each case looked
# through every case's snapshots, leak checks and counters; the reader
# looked for each CASE among all the others); with the timeouts below a
# quadratic step fails. A case end whose blocks were all freed gets an
# empty leak check without a scan, and the case that leaks still has its
# own.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture many_cases
cd "$WORK" || fail "cannot enter $WORK"

record many.trace --leak-check off -- "$FIXTURES/many_cases" 100000
expect_eq "record 100,000 cases: exit" 0 "$REC_RC"

# timed WHAT COMMAND...: runs under a 60 s timeout (linear: about a second here).
timed() {
    _what=$1
    shift
    timeout -k 5 60 "$@" >timed.out 2>timed.err
    _rc=$?
    [ $_rc -eq 124 ] && _rc="timed out"
    expect_eq "$_what" 0 "$_rc"
}
timed "report, 100,000 cases" "$MEMSLOPE" report many.trace
expect_eq "... every case listed" 100001 "$(grep -c ': no iterations; peak' timed.out)"
timed "report --format json" "$MEMSLOPE" report many.trace --format json
timed "report --format html" "$MEMSLOPE" report many.trace --format html
timed "diff of the trace with itself" "$MEMSLOPE" diff many.trace many.trace
timed "gate --baseline itself" "$MEMSLOPE" gate many.trace --baseline many.trace

# With the leak check at each case end: the freeing cases are checked
# (empty), the leaking one finds its block.
record checked.trace -- "$FIXTURES/many_cases" 300
expect_eq "record 300 checked cases: exit" 0 "$REC_RC"
report_json checked.trace checked.json
expect_eq "every case has a leak check" 301 \
    "$(jget checked.json 'sum(1 for c in d["cases"] if c["leaks"] is not None)')"
expect_eq "the freeing cases lost nothing" 0 \
    "$(jget checked.json 'sum(c["leaks"]["definitely_lost"]["blocks"] + c["leaks"]["still_reachable"]["blocks"] for c in d["cases"][:-1])')"
expect_eq "case 'leak' lost its 48 bytes" "48/1" \
    "$(jget checked.json '"%d/%d" % (d["cases"][-1]["leaks"]["definitely_lost"]["bytes"], d["cases"][-1]["leaks"]["definitely_lost"]["blocks"])')"
finish
