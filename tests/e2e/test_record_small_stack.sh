#!/bin/sh
# small_stack: threads made with stacks of PTHREAD_STACK_MIN to 48 KiB
# under record. glibc takes every thread's static TLS, the shim's
# included, from the top of its stack and refuses a stack that cannot
# hold it (EINVAL): with 31 KiB of TLS in the shim, the fixture's first
# thread could not be made (nor node's 32 KiB inspector thread). The
# shim keeps its per-thread caches in memory it maps itself; its own TLS
# stays under a kilobyte (checked on the library, PT_TLS). Python threads
# made with threading.stack_size(32768) too.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture small_stack
need_python

SHIM=$(dirname "$MEMSLOPE")/../lib/memslope/libmemslope.so
TLS=$(LC_ALL=C readelf -lW "$SHIM" | awk '$1 == "TLS" {print $6}')
[ -n "$TLS" ] || TLS=0x0
expect_eq "the shim's TLS (PT_TLS memsz) is under 1 KiB" yes "$([ $((TLS)) -lt 1024 ] && echo yes || echo "no: $((TLS)) bytes")"

LINE=$(fixture_line small_stack.c SMALL-STACK)
record_and_report small -- "$FIXTURES/small_stack"
J=$WORK/small.json
expect_eq "record exit status (every thread made)" 0 "$REC_RC"
expect_site "$J" small_stack_block "$LINE" allocations=4 allocated_bytes=96 live_bytes=96
expect_eq "still reachable blocks" 4 "$(jget "$J" 'd["leaks_at_exit"]["still_reachable"]["blocks"]')"

# The shim alone, recording nothing (as it is in a process memslope does not follow)
env LD_PRELOAD="$SHIM" "$FIXTURES/small_stack" 2>"$WORK/alone.err"
expect_eq "preloaded alone: exit status (every thread made)" 0 "$?"

# Python's smallest thread stack (threading.stack_size: 32 KiB), whose
# captures merge Python frames: "can't start new thread" before.
cat >"$WORK/stack.py" <<'PY'
import threading
threading.stack_size(32768)
out = []
threads = [threading.Thread(target=lambda: out.append([str(i) * 3 for i in range(500)])) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(out))
PY
record "$WORK/py.trace" -- "$PY" "$WORK/stack.py"
expect_eq "python threads of 32 KiB recorded: exit status" 0 "$REC_RC"
expect_eq "python threads of 32 KiB recorded: all four ran" 4 "$(cat "$WORK/rec.out")"
finish
