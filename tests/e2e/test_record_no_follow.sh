#!/bin/sh
# --no-follow: only the command's own process is recorded; its children run
# untraced, unrecorded and unharmed (even with breakpoints planted in the
# parent for the case-end leak check and --iteration), also a child whose
# forking thread ends through its key destructors.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture fork_child fork_exec demo_leak fork_thread_return

record "$WORK/f.trace" --no-follow -- "$FIXTURES/fork_child"
expect_eq "fork_child exit" 0 "$REC_RC"
report_json "$WORK/f.trace" "$WORK/f.json"
expect_eq "one process recorded" 1 "$(jget "$WORK/f.json" 'len(d["processes"])')"
expect_eq "it is the parent" "$(jget "$WORK/f.json" 'd["processes"][0]["pid"]')" "$(jget "$WORK/f.json" 'd["processes"][0]["pid"]')"

record "$WORK/e.trace" --no-follow -- "$FIXTURES/fork_exec"
expect_eq "fork_exec exit (the exec'd child ran to completion)" 0 "$REC_RC"
report_json "$WORK/e.trace" "$WORK/e.json"
expect_eq "the exec'd demo_leak is not recorded" 0 "$(jget "$WORK/e.json" 'sum(1 for p in d["processes"] if p["exe"].endswith("demo_leak"))')"

# A thread forks and, in the unfollowed child, returns: the shim's thread
# destructor once read the parent's slot in the unmapped region (SIGSEGV).
record "$WORK/t.trace" --no-follow -- "$FIXTURES/fork_thread_return"
expect_eq "fork_thread_return: exit" 0 "$REC_RC"
expect_eq "fork_thread_return: the unfollowed child ended well" "child exit 0" "$(cat "$WORK/rec.out")"
record_no_ptrace "$WORK/tn.trace" -- "$FIXTURES/fork_thread_return"
expect_eq "fork_thread_return without ptrace: the child ended well" "child exit 0" "$(cat "$WORK/rec.out")"

record "$WORK/a.trace" -- "$FIXTURES/fork_exec"
report_json "$WORK/a.trace" "$WORK/a.json"
expect_eq "followed by default" 1 "$(jget "$WORK/a.json" 'sum(1 for p in d["processes"] if p["exe"].endswith("demo_leak"))')"
finish
