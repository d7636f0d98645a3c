#!/bin/sh
# The text report tells the whole story: every case (also the implicit one
# of --iteration) with its setup, growth and leaks, each figure equal to the
# JSON report's, and its top sites named by their user frame; --metric sorts
# and titles the sites; "setup" is the only word for setup, and a case
# without iterations has no setup figure; the leaks of every traced process
# (a fork child's) in the text, the JSON, the HTML page's data and the gate.
. "$(dirname "$0")/lib.sh"
need_memslope
need_python
need_fixture growth_cases iteration_body demo_leak fork_leak_child session_leak

report_text() {
    log "\$ memslope report $*"
    timeout -k 5 60 "$MEMSLOPE" report "$@" >"$WORK/out.txt" 2>"$WORK/out.err"
    RC=$?
    [ "$RC" -eq 0 ] || { sed 's/^/    | /' "$WORK/out.err"; fail "memslope report $* exited $RC"; }
}

# check_cases TXT JSON: every JSON case's figures on its lines of the text.
check_cases() {
    if "$PY" "$E2E_DIR/report_text_cases.py" "$1" "$2"; then expect_eq "$3: text cases = JSON cases" ok ok
    else _mismatch "$3: text and JSON disagree (above)"; fi
}

# Marked cases.
LEAK48=$(grep -n 'malloc(48); /\* the growing site' "$SRC_FIXTURES/growth_cases.c" | cut -d: -f1)
record "$WORK/g.trace" -- "$FIXTURES/growth_cases"
report_json "$WORK/g.trace" "$WORK/g.json"
report_text "$WORK/g.trace"
cp "$WORK/out.txt" "$WORK/g.txt"
check_cases "$WORK/g.txt" "$WORK/g.json" growth_cases
expect_match "leaky: its figures, known from the fixture" "^  setup:  1,048,576 bytes \(1.0 MiB\) in 1 block$" "$WORK/g.txt"
expect_match "leaky: growth" "^  growth: 48.0 B per iteration \(1.0 blocks\)$" "$WORK/g.txt"
expect_match "leaky: the growing site" "^    48.0 B/iteration +leak_48 \(growth_cases.c:$LEAK48\)$" "$WORK/g.txt"
expect_match "leaky: the leaking site" "^    4,800 B in 100 blocks +leak_48 \(growth_cases.c:$LEAK48\)$" "$WORK/g.txt"
expect_no_match "one word for setup" "retained" "$WORK/g.txt"

# The implicit case of --iteration.
BODY=$(fixture_line iteration_body.c LOST_LINE)
record "$WORK/i.trace" --iteration bench_body -- "$FIXTURES/iteration_body" 50
report_json "$WORK/i.trace" "$WORK/i.json"
report_text "$WORK/i.trace"
cp "$WORK/out.txt" "$WORK/i.txt"
check_cases "$WORK/i.txt" "$WORK/i.json" "--iteration"
expect_match "--iteration: the case is shown" "^iteration_body: 50 iterations; peak " "$WORK/i.txt"
expect_match "--iteration: 48 B per iteration" "^  growth: 48.0 B per iteration" "$WORK/i.txt"
expect_match "--iteration: the growing site" "^    48.0 B/iteration +bench_body \(iteration_body.c:$BODY\)$" "$WORK/i.txt"

# No markers: no setup figure.
DEMO=$(fixture_line demo_leak.c DEMO-LEAK)
TEMP=$(fixture_line demo_leak.c DEMO-TEMP)
record "$WORK/d.trace" -- "$FIXTURES/demo_leak"
report_json "$WORK/d.trace" "$WORK/d.json"
expect_eq "no iterations: JSON setup is null" null "$(jget "$WORK/d.json" 'd["cases"][0]["setup"]')"
report_text "$WORK/d.trace"
cp "$WORK/out.txt" "$WORK/d.txt"
check_cases "$WORK/d.txt" "$WORK/d.json" demo_leak
expect_match "no iterations: said so" "^demo_leak: no iterations; peak 6,208 bytes" "$WORK/d.txt"

# --metric sorts and titles the sites: five different lists.
for metric in growth leaked peak allocated temporary; do
    report_text "$WORK/d.trace" --metric "$metric"
    sed -n '/^demo_leak: /,/^$/p' "$WORK/out.txt" >"$WORK/metric.$metric"
done
expect_match "peak (and growth without iterations): by live bytes at the peak" \
    "^  Top sites by live bytes at the peak \(no growth figures for this case\)$" "$WORK/metric.growth"
expect_match "--metric leaked" "^  Top sites by bytes leaked \(definitely and indirectly lost\)$" "$WORK/metric.leaked"
expect_match "--metric leaked: leaky_site" "^    4,800 B in 100 blocks +leaky_site \(demo_leak.c:$DEMO\)$" "$WORK/metric.leaked"
expect_match "--metric peak: leaky_site first" "^  Top sites by live bytes at the peak$" "$WORK/metric.peak"
expect_match "--metric allocated: render_request first" \
    "^  Top sites by bytes allocated\$" "$WORK/metric.allocated"
expect_eq "--metric allocated: render_request's 25,600 bytes first" \
    "    25,600 B in 100 allocations  render_request (demo_leak.c:$TEMP)" \
    "$(grep -A1 '^  Top sites by bytes allocated' "$WORK/metric.allocated" | tail -n 1)"
expect_eq "--metric temporary: only render_request frees" \
    "    100 of 100 allocations freed render_request (demo_leak.c:$TEMP)" \
    "$(grep -A1 '^  Top sites by temporary allocations' "$WORK/metric.temporary" | tail -n 1)"
expect_eq "the five lists differ" 5 "$(cat "$WORK"/metric.* | grep '^  Top sites by' | sort -u | wc -l | tr -d ' ')"

# Sites that share a user frame read apart by their first differing caller.
MAKE=$(fixture_line session_leak.c SL-MAKE)
USER1=$(fixture_line session_leak.c SL-USER-1)
ADMIN=$(fixture_line session_leak.c SL-ADMIN)
record "$WORK/s.trace" -- "$FIXTURES/session_leak" 1
report_text "$WORK/s.trace"
expect_match "two callers of make_session: open_user" \
    "^    48.0 B/iteration +make_session \(session_leak.c:$MAKE\) <- open_user \(session_leak.c:$USER1\)$" "$WORK/out.txt"
expect_match "two callers of make_session: open_admin" \
    "^    48.0 B/iteration +make_session \(session_leak.c:$MAKE\) <- open_admin \(session_leak.c:$ADMIN\)$" "$WORK/out.txt"

# A fork child's leaks: 1,391 bytes in 3 blocks, in every output and the gate.
CHILD=$(fixture_line fork_leak_child.c FLC-CHILD)
record "$WORK/f.trace" -- "$FIXTURES/fork_leak_child"
expect_eq "fork_leak_child: record exit" 0 "$REC_RC"
report_json "$WORK/f.trace" "$WORK/f.json"
child_pid=$(jget "$WORK/f.json" '[p["pid"] for p in d["processes"] if not p["primary"]][0]')
expect_eq "JSON: the parent lost nothing" '{"blocks": 0, "bytes": 0}' "$(jget "$WORK/f.json" 'd["leaks_at_exit"]["definitely_lost"]')"
expect_eq "JSON: processes[].leaks_at_exit of the child" '{"blocks": 3, "bytes": 1391}' \
    "$(jget "$WORK/f.json" '[p for p in d["processes"] if not p["primary"]][0]["leaks_at_exit"]["definitely_lost"]')"
expect_eq "JSON: the child's loss records" "[1000, 300, 91]" \
    "$(jget "$WORK/f.json" '[r["bytes"] for r in [p for p in d["processes"] if not p["primary"]][0]["loss_records"]]')"
report_text "$WORK/f.trace"
cp "$WORK/out.txt" "$WORK/f.txt"
expect_match "text: the child under other processes" "^pid $child_pid .*fork_leak_child: exited 0; 3 allocations" "$WORK/f.txt"
expect_match "text: the child's leak summary" "^  leaks at exit: definitely lost: 1,391 bytes in 3 blocks," "$WORK/f.txt"
expect_match "text: the child's loss record" "^  1,000 bytes in 1 blocks are definitely lost in loss record 1 of 3$" "$WORK/f.txt"
expect_match "text: ... at child_loses" "^      at child_loses \(fixtures/fork_leak_child.c:$CHILD\)$" "$WORK/f.txt"
"$MEMSLOPE" report "$WORK/f.trace" --format html -o "$WORK/f.html" 2>/dev/null
expect_eq "HTML: the child's leaks in the page's data" "1391 3" "$("$PY" - "$WORK/f.html" <<'PY'
import json, re, sys
page = open(sys.argv[1]).read()
d = json.loads(re.search(r'<script type="application/json" id="memslope-data">(.*?)</script>', page, re.S).group(1))
p = [p for p in d["processes"] if p["leaks_at_exit"]][0]
print(*p["leaks_at_exit"]["definitely_lost"])
PY
)"
"$MEMSLOPE" gate "$WORK/f.trace" --max-leaked 0 >"$WORK/gate.out" 2>&1
expect_eq "gate --max-leaked 0 fails on the child's leak" 1 $?
expect_match "gate names the child process" \
    "^memslope gate: FAIL case 'fork_leak_child': leaked 1.4 KiB > limit 0 B; top site child_loses \(fork_leak_child.c:$CHILD\) .*; process fork_leak_child \(pid $child_pid, forked by pid [0-9]+\)$" \
    "$WORK/gate.out"
expect_match "gate: both processes checked" "^memslope gate: FAIL: 2 cases checked in 2 processes, 1 limit exceeded$" "$WORK/gate.out"

# The command's arguments that a shell would split are shown quoted (sh -c
# 'ls | sort' read as a pipeline), one cut short left open before "...".
record "$WORK/quoted.trace" -- sh -c 'true; true'
"$MEMSLOPE" report "$WORK/quoted.trace" >"$WORK/quoted.txt"
expect_match "an argument with spaces: quoted" "^sh -c 'true; true': exited 0" "$WORK/quoted.txt"
record "$WORK/long.trace" -- sh -c 'true; true; true; true; true'
"$MEMSLOPE" report "$WORK/long.trace" >"$WORK/long.txt"
expect_match "... cut short: left open" "^sh -c 'true; true; true\\.\\.\\.: exited 0" "$WORK/long.txt"
finish
