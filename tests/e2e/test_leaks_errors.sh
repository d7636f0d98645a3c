#!/bin/sh
# memslope leaks PID when it cannot or must not scan: usage errors exit 2;
# a pid that does not exist, a refused ptrace and a heap that does not
# validate exit 3 (1 means leaks were found, as macOS leaks) with a message
# naming the problem and what to do, and the target is never left stopped.
# A process another tracer holds, a kernel thread, a static program and one
# with tcmalloc are each named as what they are.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture leak_corrupt

run_leaks() {
    timeout -k 5 60 "$MEMSLOPE" leaks "$@" >"$WORK/out" 2>"$WORK/err"
    RC=$?
    log "\$ memslope leaks $* -> exit $RC"
    sed 's/^/    | /' "$WORK/err" | head -n 5
}

run_leaks
expect_eq "no PID: exit status" 2 "$RC"
expect_match "no PID: message" "missing PID" "$WORK/err"
run_leaks notapid
expect_eq "bad PID: exit status" 2 "$RC"
expect_match "bad PID: message" "not a process id" "$WORK/err"
run_leaks --format xml 1
expect_eq "bad format: exit status" 2 "$RC"
run_leaks 1 2
expect_eq "two PIDs: exit status" 2 "$RC"

# A pid that is not in use: the highest one the kernel can hand out.
max=$(cat /proc/sys/kernel/pid_max 2>/dev/null || echo 4194304)
free_pid=$((max - 1))
[ -d "/proc/$free_pid" ] && free_pid=$((max - 2))
run_leaks "$free_pid"
expect_eq "no such process: exit status" 3 "$RC"
expect_match "no such process: message" "no process with pid $free_pid" "$WORK/err"

# memslope's own pid, and a zombie: said as what they are, not blamed on
# the kernel's ptrace access check.
timeout -k 5 60 sh -c 'exec "$1" leaks $$' sh "$MEMSLOPE" >"$WORK/out" 2>"$WORK/err"
RC=$?
expect_eq "its own pid: exit status" 3 "$RC"
expect_match "its own pid: message" "^memslope leaks: [0-9]+ is memslope itself" "$WORK/err"
expect_no_match "its own pid: not blamed on ptrace" "ptrace access check" "$WORK/err"
sh -c 'sleep 0.1 & echo $! >"$1"; exec sleep 5' sh "$WORK/zombie.pid" &
PARENT=$!
for _i in $(seq 1 50); do
    [ -s "$WORK/zombie.pid" ] && [ "$(awk '{print $3}' "/proc/$(cat "$WORK/zombie.pid")/stat" 2>/dev/null)" = Z ] && break
    sleep 0.1
done
run_leaks "$(cat "$WORK/zombie.pid")"
expect_eq "a zombie: exit status" 3 "$RC"
expect_match "a zombie: message" "process [0-9]+ has exited \(a zombie" "$WORK/err"
expect_no_match "a zombie: not blamed on ptrace" "ptrace access check" "$WORK/err"
kill "$PARENT" 2>/dev/null
wait "$PARENT" 2>/dev/null

# A heap that does not validate: refuse, and leave the process running.
mkfifo "$WORK/in"
"$FIXTURES/leak_corrupt" <"$WORK/in" >"$WORK/pid" &
CHILD=$!
exec 3>"$WORK/in"
await_pid "$WORK/pid" >/dev/null
run_leaks "$CHILD"
expect_eq "corrupt heap: exit status" 3 "$RC"
expect_match "corrupt heap: message" "does not validate: chunk at 0x[0-9a-f]+ \(size field 0x123457\).*refusing to guess" "$WORK/err"
expect_in "corrupt heap: process state afterwards" "S R" "$(awk '/^State:/{print $2}' /proc/$CHILD/status)"

# ptrace refused: an unprivileged user against another user's process.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null 2>&1; then
    timeout -k 5 60 setpriv --reuid=65534 --regid=65534 --clear-groups "$MEMSLOPE" leaks "$CHILD" \
        >"$WORK/out" 2>"$WORK/err"
    RC=$?
    log "\$ (as nobody) memslope leaks $CHILD -> exit $RC"
    sed 's/^/    | /' "$WORK/err"
    expect_eq "ptrace refused: exit status" 3 "$RC"
    expect_match "ptrace refused: message" "ptrace access check refused.*CAP_SYS_PTRACE.*ptrace_scope" "$WORK/err"
else
    log "not root or no setpriv: the refused-ptrace case is not exercised"
fi
expect_in "after refusals: process state" "S R" "$(awk '/^State:/{print $2}' /proc/$CHILD/status)"
echo >&3
exec 3>&-
wait "$CHILD"
expect_eq "corrupt heap fixture: exit status when released" 0 "$?"

# A process another tracer holds (here memslope record's), and a kernel
# thread: said as what they are, not blamed on permissions.
record "$WORK/held.trace" -- sh -c 'echo "pid $$" >"$1"; exec sleep 3' sh "$WORK/held.pid" &
RECORDER=$!
held=$(await_pid "$WORK/held.pid")
run_leaks "$held"
expect_eq "a traced process: exit status" 3 "$RC"
expect_match "a traced process: message" "cannot attach to process $held .*: it is already being traced, by process [0-9]+" \
    "$WORK/err"
expect_no_match "a traced process: not blamed on permissions" "access check" "$WORK/err"
wait "$RECORDER"
# a kernel thread: PF_KTHREAD in the flags, the 7th field after the name
# (which may hold spaces) and its closing parenthesis
kthread=$(for f in /proc/[0-9]*/stat; do
    sed 's/.*) //' "$f" 2>/dev/null | awk -v pid="${f#/proc/}" '{ if (int($7 / 2097152) % 2) print pid }'
done | sed 's|/stat||' | head -n 1)
if [ -n "$kthread" ]; then
    run_leaks "$kthread"
    expect_eq "a kernel thread: exit status" 3 "$RC"
    expect_match "a kernel thread: message" "it is a kernel thread, which has no user memory" "$WORK/err"
else
    log "no kernel thread visible here: not checked"
fi

# Heaps that are not glibc's dynamic one: the refusal names the reason.
cat >"$WORK/waiter.c" <<'EOF_C'
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(void)
{
    for (int i = 0; i < 100; i++)
        if (!malloc(100 + i))
            return 1;
    printf("pid %d\n", (int)getpid());
    fflush(stdout);
    char c;
    while (read(0, &c, 1) == 1)
        ;
    return 0;
}
EOF_C
# waiting_leaks NAME PROGRAM [ENV...]: memslope leaks on PROGRAM waiting.
waiting_leaks() {
    _name=$1 _program=$2
    shift 2
    rm -f "$WORK/in_$_name"
    mkfifo "$WORK/in_$_name"
    env "$@" "$_program" <"$WORK/in_$_name" >"$WORK/$_name.pid" &
    _waiter=$!
    exec 4>"$WORK/in_$_name"
    run_leaks "$(await_pid "$WORK/$_name.pid")"
    exec 4>&-
    wait "$_waiter"
}
if cc -static -O0 -o "$WORK/waiter_static" "$WORK/waiter.c" 2>/dev/null; then
    waiting_leaks static "$WORK/waiter_static"
    expect_eq "a static program: exit status" 3 "$RC"
    expect_match "a static program: message" "no libc.so is mapped: a statically linked program" "$WORK/err"
else
    log "no static libc: the static program is not checked"
fi
TCMALLOC=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
[ -e "$TCMALLOC" ] || fail "$TCMALLOC is missing (make deps installs libtcmalloc-minimal4)"
cc -O0 -o "$WORK/waiter" "$WORK/waiter.c" || fail "cannot build waiter.c"
waiting_leaks tcmalloc "$WORK/waiter" LD_PRELOAD="$TCMALLOC"
expect_eq "tcmalloc: exit status" 3 "$RC"
expect_match "tcmalloc: message" "the process has libtcmalloc_minimal.so.4[.0-9]* mapped: memslope leaks reads glibc's" \
    "$WORK/err"
JEMALLOC=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
[ -e "$JEMALLOC" ] || fail "$JEMALLOC is missing (make deps installs libjemalloc2)"
waiting_leaks jemalloc "$WORK/waiter" LD_PRELOAD="$JEMALLOC"
expect_eq "jemalloc: exit status" 3 "$RC"
expect_match "jemalloc: message" "it has libjemalloc.so.2 mapped, and memslope leaks reads glibc's heap only" "$WORK/err"
finish
