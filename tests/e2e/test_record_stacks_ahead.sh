#!/bin/sh
# Stacks written ahead: while the tracer has time to spare, the stacks of a
# running image's new sites go to the trace (once a thousand are new), so
# that its end has less to do (python3 -c pass: 22 ms after the exit, 5 ms
# with them). The image is named first, as at a checkpoint: a memslope
# killed after that, even with checkpoints off, leaves a trace that reads
# and says whose stacks they are and that the figures stop early.
. "$(dirname "$0")/lib.sh"
need_memslope
need_python
cd "$WORK" || fail "cannot enter $WORK"

# The sections of a trace by kind (trace-format.md: u32 kind, u32, u64
# length, payload, u32 crc), as "KIND KIND ...": a trace being written may
# end inside a section, which is not counted.
sections() {
    "$PY" - "$1" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
offset, kinds = 16, []
while offset + 16 <= len(data):
    kind, _, length = struct.unpack_from("<IIQ", data, offset)
    if offset + 16 + length + 4 > len(data):
        break
    kinds.append(str(kind))
    offset += 16 + length + 4
print(" ".join(kinds))
PY
}
PROCESS=5
STACKS_SHARED=16

# A Python start-up makes about ten thousand sites; the program then sleeps.
"$MEMSLOPE" record --quiet --checkpoint off -o killed.trace -- "$PY" -c 'import json, email.message, time; time.sleep(30)' \
    >/dev/null 2>&1 &
tracer=$!
written=no
for _ in $(seq 100); do
    case " $(sections killed.trace 2>/dev/null) " in
        *" $STACKS_SHARED "*) written=yes; break ;;
    esac
    sleep 0.1
done
kill -KILL $tracer
wait $tracer 2>/dev/null
expect_eq "stacks written while the program runs, checkpoints off" yes "$written"
kinds=" $(sections killed.trace) "
expect_eq "the image named before its stacks" yes \
    "$(echo "$kinds" | awk -v p=$PROCESS -v s=$STACKS_SHARED '{for (i = 1; i <= NF; i++) {if ($i == p) seen = 1; if ($i == s) {print seen ? "yes" : "no: stacks first"; exit}}}')"
"$MEMSLOPE" report killed.trace --format json >killed.json 2>killed.err
expect_eq "killed: the trace reads" 0 "$?"
expect_match "killed: said to be cut short" "killed.trace is incomplete" killed.err
expect_eq "killed: the process is named" yes \
    "$(jget killed.json '"yes" if d["processes"][0]["exe"].split("/")[-1].startswith("python") else d["processes"][0]["exe"]')"
expect_eq "killed: its figures stop while it ran" yes \
    "$(jget killed.json '"yes" if d["processes"][0]["exit"] is None and d["processes"][0]["checkpoint_seconds"] > 0 else "no"')"

# A normal end: the image's record ahead of its stacks and its final one;
# its stacks read back, each frame named (no frame left unresolved by being
# written before its module was known).
record ended.trace --checkpoint off -- "$PY" -c 'import json, email.message'
expect_eq "ended: exit" 0 "$REC_RC"
kinds=" $(sections ended.trace) "
expect_eq "ended: two PROCESS records (ahead of the stacks, at the end)" 2 \
    "$(echo "$kinds" | tr ' ' '\n' | grep -c "^$PROCESS\$")"
report_json ended.trace ended.json >/dev/null
expect_eq "ended: not incomplete" false "$(jget ended.json 'd.get("incomplete", False)')"
expect_eq "ended: sites listed" yes "$(jget ended.json '"yes" if d["cases"][0]["sites"] else "no"')"
expect_eq "ended: every frame of the sites listed in a module" 0 \
    "$(jget ended.json 'sum(1 for c in d["cases"] for s in c["sites"] for f in s["frames"] if not f.get("module"))')"
finish
