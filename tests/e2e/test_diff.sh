#!/bin/sh
# memslope diff OLD NEW on two versions of fixtures/session_leak, whose leak
# at make_session <- open_user doubles (one session per iteration in version
# 1, two in version 2, called from two other lines): that site alone is
# listed, matched by its function stack (version 2's two stacks are one
# site), with exact figures; the unchanged sites are left out; a run against
# itself lists nothing; text and JSON agree; usage errors exit 2.
. "$(dirname "$0")/lib.sh"
need_memslope
need_python
need_fixture session_leak fork_leak_child

MAKE=$(fixture_line session_leak.c SL-MAKE)
record "$WORK/v1.trace" -- "$FIXTURES/session_leak" 1
record "$WORK/v1b.trace" -- "$FIXTURES/session_leak" 1
record "$WORK/v2.trace" -- "$FIXTURES/session_leak" 2

run_diff() {
    log "\$ memslope diff $*"
    timeout -k 5 60 "$MEMSLOPE" diff "$@" >"$WORK/out" 2>"$WORK/err"
    RC=$?
    log "  -> exit $RC"
    sed 's/^/    | /' "$WORK/err" | head -n 5
}

run_diff "$WORK/v1.trace" "$WORK/v2.trace"
expect_eq "diff exit" 0 "$RC"
cp "$WORK/out" "$WORK/diff.txt"
expect_match "the case's growth" "^  growth: 96.0 -> 144.0 B per iteration \(\+48.0\)$" "$WORK/diff.txt"
expect_match "the case's leaks" "^  leaked: 9,600 -> 14,400 \(\+4,800\) bytes in 200 -> 300 \(\+100\) blocks$" "$WORK/diff.txt"
expect_match "one site changed, the others left out" "^  1 site changed, largest change first \(2 unchanged left out\):$" "$WORK/diff.txt"
expect_match "the site, by its function stack" "^  make_session \(session_leak.c:$MAKE\) <- open_user$" "$WORK/diff.txt"
expect_match "its growth doubles" "^      growth 48.0 -> 96.0 B/iteration \(\+48.0\)$" "$WORK/diff.txt"
expect_match "its leak doubles" "^      leaked 4,800 -> 9,600 \(\+4,800\) bytes in 100 -> 200 \(\+100\) blocks$" "$WORK/diff.txt"
expect_match "its allocations double" "^      allocations 100 -> 200 \(\+100\), 4,800 -> 9,600 \(\+4,800\) bytes allocated$" "$WORK/diff.txt"
expect_no_match "open_admin and render are unchanged: not listed" "open_admin|render" "$WORK/diff.txt"

run_diff "$WORK/v1.trace" "$WORK/v2.trace" --format json
expect_eq "JSON diff exit" 0 "$RC"
cp "$WORK/out" "$WORK/diff.json"
expect_eq "JSON: format" "memslope-diff 1" "$(jget "$WORK/diff.json" '"%s %d" % (d["format"], d["version"])')"
expect_eq "JSON: the case's figures" "96.0 144.0 9600 14400" \
    "$(jget "$WORK/diff.json" '"%s %s %d %d" % (d["cases"][0]["old"]["growth_bytes_per_iteration"], d["cases"][0]["new"]["growth_bytes_per_iteration"], d["cases"][0]["old"]["leaked"]["bytes"], d["cases"][0]["new"]["leaked"]["bytes"])')"
expect_eq "JSON: one site changed, two not" "1 2 1" \
    "$(jget "$WORK/diff.json" '"%d %d %d" % (d["cases"][0]["sites_changed"], d["cases"][0]["sites_unchanged"], len(d["cases"][0]["sites"]))')"
expect_eq "JSON: its function stack" '["make_session [session_leak]", "open_user [session_leak]", "main [session_leak]"]' \
    "$(jget "$WORK/diff.json" 'd["cases"][0]["sites"][0]["function_stack"][:3]')"
expect_eq "JSON: its change" "48.0 4800 100 100 4800" \
    "$(jget "$WORK/diff.json" '" ".join(str(d["cases"][0]["sites"][0]["change"][k]) for k in ("growth_bytes_per_iteration", "leaked_bytes", "leaked_blocks", "allocations", "peak_bytes"))')"
expect_eq "JSON: old and new" "48.0 96.0 100 200" \
    "$(jget "$WORK/diff.json" '"%s %s %d %d" % (d["cases"][0]["sites"][0]["old"]["growth_bytes_per_iteration"], d["cases"][0]["sites"][0]["new"]["growth_bytes_per_iteration"], d["cases"][0]["sites"][0]["old"]["leaked_blocks"], d["cases"][0]["sites"][0]["new"]["leaked_blocks"])')"
expect_eq "JSON: the site's label is the text's" "make_session (session_leak.c:$MAKE) <- open_user" \
    "$(jget "$WORK/diff.json" 'd["cases"][0]["sites"][0]["label"]')"

# The other way round: the changes are negative.
run_diff "$WORK/v2.trace" "$WORK/v1.trace"
expect_match "reversed: growth falls" "^      growth 96.0 -> 48.0 B/iteration \(-48.0\)$" "$WORK/out"

# Two runs of one version: nothing changed.
run_diff "$WORK/v1.trace" "$WORK/v1b.trace"
expect_eq "same version exit" 0 "$RC"
expect_match "same version: no site changed" "^  no site changed \(3 unchanged\)$" "$WORK/out"
run_diff "$WORK/v1.trace" "$WORK/v1b.trace" --format json
expect_eq "same version JSON: no site" 0 "$(jget "$WORK/out" 'len(d["cases"][0]["sites"])')"

# Suppressed leaks count on neither side: the site still grows, its leak is not shown.
printf 'leak:open_user\n' >"$WORK/user.supp"
run_diff "$WORK/v1.trace" "$WORK/v2.trace" --suppressions "$WORK/user.supp"
expect_match "suppressed: the growth still differs" "^      growth 48.0 -> 96.0 B/iteration" "$WORK/out"
expect_no_match "suppressed: no leaked line for the site" "^      leaked " "$WORK/out"

# --case, and errors.
run_diff "$WORK/v1.trace" "$WORK/v2.trace" --case requests
expect_eq "--case requests exit" 0 "$RC"
run_diff "$WORK/v1.trace" "$WORK/v2.trace" --case nosuch
expect_eq "--case nosuch exit" 1 "$RC"
expect_match "--case nosuch message" "no case named 'nosuch'" "$WORK/err"
run_diff "$WORK/v1.trace"
expect_eq "one trace: usage" 2 "$RC"
run_diff "$WORK/v1.trace" "$WORK/v2.trace" --format xml
expect_eq "--format xml: usage" 2 "$RC"
run_diff "$WORK/v1.trace" "$WORK/missing.trace"
expect_eq "missing trace: exit 1" 1 "$RC"

# Traces of several processes: diff compares the primary's cases and says
# that the others are left out (it said nothing).
record "$WORK/forks.trace" -- "$FIXTURES/fork_leak_child"
run_diff "$WORK/forks.trace" "$WORK/forks.trace"
expect_eq "several processes: exit" 0 "$RC"
expect_match "... the child not compared, said" '^OLD: the cases of pid [0-9]+ \(.*fork_leak_child\); its 1 other process image is not compared' "$WORK/out"
finish
