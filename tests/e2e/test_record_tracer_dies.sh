#!/bin/sh
# memslope itself is killed while the target waits in fgets with a breakpoint
# planted there (--iteration fgets). The target must never be left stopped,
# hanging, or killed by a stray breakpoint (SIGTRAP):
#   SIGTERM to memslope: it ends the target (the signal is passed on), writes
#     a complete trace and exits 143;
#   SIGKILL to memslope: the target either carries on (exit 0) or is killed
#     with it (PTRACE_O_EXITKILL); nothing else.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture stdin_reader
need_python

fate() { # SIGNAL: prints "memslope=RC target=FATE"
    "$PY" - "$MEMSLOPE" "$FIXTURES/stdin_reader" "$WORK" "$1" <<'PYEOF'
import ctypes, os, signal, subprocess, sys, time
memslope, fixture, work, signame = sys.argv[1:5]
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)   # PR_SET_CHILD_SUBREAPER: the orphaned target comes to us
out = open(os.path.join(work, signame + ".out"), "w")
err = open(os.path.join(work, signame + ".err"), "w")
p = subprocess.Popen([memslope, "record", "--iteration", "fgets", "-o", os.path.join(work, signame + ".trace"),
                      "--", fixture], stdin=subprocess.PIPE, stdout=out, stderr=err)
p.stdin.write(b"a\n"); p.stdin.flush()
target = None
for _ in range(200):
    time.sleep(0.05)
    try:
        kids = open("/proc/%d/task/%d/children" % (p.pid, p.pid)).read().split()
    except OSError:
        kids = []
    if kids:
        target = int(kids[0])
        break
if target is None:
    print("memslope=? target=never-started")
    p.kill(); sys.exit(0)
time.sleep(0.7)   # the target has read "a" and waits in fgets again
os.kill(p.pid, getattr(signal, "SIG" + signame))
rc = p.wait()
try:
    p.stdin.write(b"b\nc\n"); p.stdin.close()
except (BrokenPipeError, OSError):
    pass
signal.signal(signal.SIGALRM, lambda *a: None)
signal.alarm(10)
try:
    _, status = os.waitpid(target, 0)
    fate = "exit-%d" % os.WEXITSTATUS(status) if os.WIFEXITED(status) else "signal-%d" % os.WTERMSIG(status)
except ChildProcessError:
    fate = "reaped-by-memslope"
except InterruptedError:
    state = open("/proc/%d/status" % target).read().split("State:")[1].split()[0]
    fate = "stuck-in-state-" + state
    os.kill(target, signal.SIGKILL)
    os.waitpid(target, 0)
signal.alarm(0)
print("memslope=%d target=%s" % (rc, fate))
PYEOF
}

log "\$ memslope record --iteration fgets -- stdin_reader; kill -TERM memslope while the target waits"
r=$(fate TERM)
log "  $r"
expect_eq "SIGTERM to memslope: memslope's exit status" 143 "$(echo "$r" | sed 's/memslope=\([^ ]*\).*/\1/')"
expect_in "SIGTERM to memslope: the target's fate" "reaped-by-memslope signal-15 exit-0" "$(echo "$r" | sed 's/.*target=//')"
report_json "$WORK/TERM.trace" "$WORK/TERM.json"
expect_eq "SIGTERM to memslope: trace complete (no warning)" "[]" "$(jget "$WORK/TERM.json" 'd.get("warnings", [])')"
expect_in "SIGTERM to memslope: exit in the trace" '{"signal":15} {"status":0}' "$(jget "$WORK/TERM.json" 'd["exit"]' | tr -d ' ')"

log "\$ memslope record --iteration fgets -- stdin_reader; kill -KILL memslope while the target waits"
r=$(fate KILL)
log "  $r"
expect_in "SIGKILL to memslope: the target's fate (never stuck, never SIGTRAP)" "exit-0 signal-9" "$(echo "$r" | sed 's/.*target=//')"
if [ "$(echo "$r" | sed 's/.*target=//')" = exit-0 ]; then
    expect_eq "SIGKILL to memslope: the target carried on and read every line" "3 lines" "$(tail -n 1 "$WORK/KILL.out")"
fi
finish
