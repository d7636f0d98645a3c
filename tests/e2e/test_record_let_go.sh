#!/bin/sh
# A command that ends while a process it started runs on (a daemon, a job
# put in the background): record ends with the command, as the command
# does in a shell, and lets that process go, its record ending there
# ("still running when the command ended"); it runs on untraced, unharmed.
# It once waited for it to end, whatever that took (ssh-agent: forever),
# and a SIGTERM to memslope could not stop the wait. --wait-all records it
# to its end, and a signal to memslope then ends the wait.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture leave_running

# The default: the command ends at once; the child, let go of, finishes
# its 5 s and writes its file.
start=$(date +%s)
record "$WORK/let-go.trace" -- "$FIXTURES/leave_running" "$WORK/let-go.done" 5
expect_eq "let go: exit" 0 "$REC_RC"
expect_lt "... well before the child's 5 s (seconds)" 4 "$(($(date +%s) - start))"
expect_match "... says so" 'the command ended with 1 process it started still running' "$WORK/rec.err"
report_json "$WORK/let-go.trace" "$WORK/let-go.json"
expect_eq "... two processes" 2 "$(jget "$WORK/let-go.json" 'len(d["processes"])')"
expect_eq "... the child's record: let go of, no exit" "True None" \
    "$(jget "$WORK/let-go.json" '" ".join(str(x) for x in [[p for p in d["processes"] if not p["primary"]][0].get("let_go_seconds", -1) >= 0, [p for p in d["processes"] if not p["primary"]][0]["exit"]])')"
expect_match "... its note" 'still running when the command ended, and was let go of' "$WORK/let-go.json"
"$MEMSLOPE" report "$WORK/let-go.trace" >"$WORK/let-go.txt"
expect_match "... in the text report" 'still running when the command ended, [0-9.]+ s in \(let go of\)' "$WORK/let-go.txt"
for _ in $(seq 1 80); do [ -s "$WORK/let-go.done" ] && break; sleep 0.1; done
expect_match "the child ran on to its end" '^done [0-9]+$' "$WORK/let-go.done"

# --wait-all: the child recorded to its end, its leak found.
record "$WORK/wait-all.trace" --wait-all -- "$FIXTURES/leave_running" "$WORK/wait-all.done" 1
expect_eq "--wait-all: exit" 0 "$REC_RC"
expect_match "... the child had ended" '^done [0-9]+$' "$WORK/wait-all.done"
report_json "$WORK/wait-all.trace" "$WORK/wait-all.json"
child='[p for p in d["processes"] if not p["primary"]][0]'
expect_eq "... the child's exit" 0 "$(jget "$WORK/wait-all.json" "$child"'["exit"]["status"]')"
expect_eq "... its leak" "777 1" \
    "$(jget "$WORK/wait-all.json" '" ".join(str(x) for x in ['"$child"'["leaks_at_exit"]["definitely_lost"]["bytes"], '"$child"'["leaks_at_exit"]["definitely_lost"]["blocks"]])')"
expect_eq "... every allocation of it" 1 \
    "$(jget "$WORK/wait-all.json" 'int('"$child"'["totals"]["allocations"] >= int(open("'"$WORK"'/wait-all.done").read().split()[1]))')"

# --wait-all, and a SIGTERM to memslope once the command has ended: the
# wait ends, the child is let go of and runs on.
# (the child marks iterations all the time: a thread stopped at the
# marker's breakpoint as it is let go of must not get our SIGTRAP)
"$MEMSLOPE" record --wait-all -o "$WORK/term.trace" -- "$FIXTURES/leave_running" "$WORK/term.done" 5 \
    >/dev/null 2>"$WORK/term.err" &
recording=$!
sleep 1.5 # the command has ended (it forks and exits at once); the child runs 5 s
kill -TERM "$recording"
wait "$recording"
expect_eq "--wait-all, SIGTERM: exit (the command's)" 0 "$?"
expect_match "... the child let go of" 'the command ended with 1 process it started still running' "$WORK/term.err"
report_json "$WORK/term.trace" "$WORK/term.json"
expect_eq "... its record: let go of" true \
    "$(jget "$WORK/term.json" '[p for p in d["processes"] if not p["primary"]][0].get("let_go_seconds", -1) > 0')"
for _ in $(seq 1 80); do [ -s "$WORK/term.done" ] && break; sleep 0.1; done
expect_match "... and ran on to its end" '^done [0-9]+$' "$WORK/term.done"

# A child whose main thread has ended while its other thread runs on: a
# zombie leader cannot be detached, and memslope's exit would kill the
# process (PTRACE_O_EXITKILL). Its record ends, memslope says why it waits,
# waits for it to end, and the closing note says it waited (not "runs on").
record "$WORK/leader.trace" -- "$FIXTURES/leave_running" "$WORK/leader.done" 2 leader-exits
expect_eq "leader ended first: exit" 0 "$REC_RC"
expect_match "... the child ran to its end before memslope returned" '^done [0-9]+$' "$WORK/leader.done"
expect_match "... why memslope waits" "main thread has ended while its other threads run on: its record ends here, and memslope waits for it to end" "$WORK/rec.err"
expect_match "... the closing note" 'then let go of; memslope waited for it to end, its main thread having ended first' "$WORK/rec.err"
expect_no_match "... not said to run on" 'it runs on' "$WORK/rec.err"
report_json "$WORK/leader.trace" "$WORK/leader.json"
expect_eq "... its record: let go of, no exit" "True None" \
    "$(jget "$WORK/leader.json" '" ".join(str(x) for x in [[p for p in d["processes"] if not p["primary"]][0].get("let_go_seconds", -1) >= 0, [p for p in d["processes"] if not p["primary"]][0]["exit"]])')"
finish
