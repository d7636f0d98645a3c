#!/bin/sh
# memslope perf: CPU sampling of fixtures/cpu_burn with Linux perf, converted
# to speedscope JSON and collapsed stacks; exit status pass-through; and the
# explanation of each way perf commonly fails, through stand-in `perf`
# scripts put first on PATH. Skips when this machine's perf cannot sample.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture cpu_burn
need_python
command -v perf >/dev/null 2>&1 || skip "perf is not installed (apt-get install linux-perf; make deps installs it)"
perf stat -e cpu-clock -- true >/dev/null 2>"$WORK/perf-probe.err" ||
    skip "perf cannot sample here: $(head -n 3 "$WORK/perf-probe.err" | tr '\n' ' ')"
cd "$WORK" || fail "cannot enter $WORK"
BURN="$FIXTURES/cpu_burn"
TIMEOUT=$(command -v timeout) # tests below run with a PATH that lacks it

# run NAME [ARG...]: memslope with ARGs; exit status in RC, output in NAME.out/.err.
run() {
    _name=$1
    shift
    log "\$ memslope $*"
    "$TIMEOUT" -k 5 120 "$MEMSLOPE" "$@" >"$WORK/$_name.out" 2>"$WORK/$_name.err"
    RC=$?
    log "  -> exit $RC"
    sed 's/^/    | /' "$WORK/$_name.err" | head -n 15
}

# check_speedscope FILE: the members speedscope requires, every frame index in
# range, weights as many as samples; prints the frame names, one a line.
check_speedscope() {
    python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["$schema"] == "https://www.speedscope.app/file-format-schema.json", d.get("$schema")
frames = d["shared"]["frames"]
assert frames and all(isinstance(f["name"], str) and f["name"] for f in frames)
assert d["profiles"], "no profiles"
for p in d["profiles"]:
    assert p["type"] == "sampled" and p["unit"] == "none", (p["type"], p["unit"])
    assert len(p["samples"]) == len(p["weights"]), "samples and weights differ in length"
    assert all(w > 0 for w in p["weights"])
    assert p["endValue"] == sum(p["weights"]), "endValue is not the sum of the weights"
    for stack in p["samples"]:
        assert all(0 <= i < len(frames) for i in stack), "frame index out of range"
assert 0 <= d["activeProfileIndex"] < len(d["profiles"])
for f in frames:
    print(f["name"], f.get("file", ""), f.get("line", ""))
print("PROFILES", " | ".join(p["name"] for p in d["profiles"]))
PY
}

# 1. Default: DWARF call graphs to speedscope, named after the command and pid.
run default perf -- "$BURN" 600 3
expect_eq "exit status passed through" 3 "$RC"
out=$(ls memslope.cpu_burn.*.speedscope.json 2>/dev/null | head -n 1)
[ -n "$out" ] || fail "no memslope.cpu_burn.PID.speedscope.json in $WORK: $(ls)"
name_ok=no
printf '%s\n' "$out" | grep -qE '^memslope\.cpu_burn\.[0-9]+\.speedscope\.json$' && name_ok=yes
expect_eq "default output is named memslope.cpu_burn.PID.speedscope.json" yes "$name_ok"
expect_eq "raw perf data kept beside it" yes "$([ -s "$out.perf.data" ] && echo yes || echo no)"
check_speedscope "$out" >"$WORK/frames.txt" 2>"$WORK/check.err" || { cat "$WORK/check.err"; fail "$out is not a valid speedscope file"; }
for fn in main burn_main_loop burn_square_sum burn_xor_shift burn_worker_loop; do
    expect_match "frame $fn" "^$fn " "$WORK/frames.txt"
done
expect_match "source lines from perf's srcline" '^burn_square_sum cpu_burn\.c [0-9]+$' "$WORK/frames.txt"
expect_match "one profile per thread, the worker by its name" 'PROFILES .*burn worker \(pid [0-9]+, tid [0-9]+\)' "$WORK/frames.txt"
expect_match "a summary names the output" "samples .* -> $out" "$WORK/default.err"
expect_match "the command's own output is untouched" '^cpu_burn: done' "$WORK/default.out"

# 2. Collapsed stacks, frame pointers, another rate, -o.
run collapsed perf --format collapsed --call-graph fp --rate 500 -o burn.folded -- "$BURN" 300
expect_eq "collapsed exit" 0 "$RC"
expect_eq "collapsed raw data" yes "$([ -s burn.folded.perf.data ] && echo yes || echo no)"
expect_match "collapsed line: thread;...;leaf count" '^cpu_burn;.*main;burn_main_loop;burn_(square_sum|xor_shift) [0-9]+$' burn.folded
expect_no_match "every line ends with a count" ' [^0-9]*$|^$' burn.folded

# 3. Killed by a signal: 128 + the signal.
run abort perf -o abort.json -- "$BURN" 100 abort
expect_eq "killed by SIGABRT" 134 "$RC"
check_speedscope abort.json >/dev/null 2>&1 && expect_eq "profile written after a crash" ok ok ||
    expect_eq "profile written after a crash" ok missing

# 4. --open with no viewer prints the path; with a `speedscope` command runs it.
mkdir -p viewer
cat >viewer/speedscope <<'SH'
#!/bin/sh
printf '%s\n' "$@" >"$SPEEDSCOPE_ARGS"
SH
chmod +x viewer/speedscope
run open_none perf --open -o open1.json -- "$BURN" 50
expect_match "--open without a viewer names speedscope.app" 'https://www\.speedscope\.app' "$WORK/open_none.err"
expect_match "... and the file" 'open1\.json$' "$WORK/open_none.err"
SPEEDSCOPE_ARGS="$WORK/speedscope.args" PATH="$WORK/viewer:$PATH" run open_cli perf --open -o open2.json -- "$BURN" 50
expect_eq "speedscope command got the file" open2.json "$(cat "$WORK/speedscope.args" 2>/dev/null)"

# 4b. Where the profile goes (issue 19): never through a symbolic link another
# user planted, before the command runs; '-' is standard output; a device
# node is written into, never replaced.
echo precious >victim
ln -s victim planted.json
chown -h nobody planted.json 2>/dev/null || chown -h 65534 planted.json
run planted perf -o planted.json -- "$BURN" 50
expect_eq "-o another user's symlink: refused" 1 "$RC"
expect_match "... says why" 'planted\.json is a symbolic link owned by another user' "$WORK/planted.err"
expect_eq "... its target untouched" precious "$(cat victim)"
expect_no_match "... before the command ran" 'cpu_burn: done' "$WORK/planted.out"
run dash perf --format collapsed -o - -- "$BURN" 50
expect_eq "-o -: exit" 0 "$RC"
expect_match "-o -: the profile on standard output" '^cpu_burn;.*main;burn_main_loop' "$WORK/dash.out"
if [ "$(id -u)" -eq 0 ] && mknod null c 1 3 2>/dev/null; then
    run device perf -o null -- "$BURN" 50
    expect_eq "-o a device: exit" 0 "$RC"
    expect_eq "-o a device: still a character device" "character special file" "$(stat -c %F null)"
fi

# 5. Usage errors and a command that does not exist.
run nocmd perf
expect_eq "no command: usage" 2 "$RC"
run badgraph perf --call-graph lbr -- "$BURN"
expect_eq "--call-graph lbr: usage" 2 "$RC"
run missing perf -- "$WORK/no-such-program"
expect_eq "missing command" 127 "$RC"
expect_match "missing command is named" 'no-such-program' "$WORK/missing.err"

run baddir perf -o "$WORK/no-such-dir/x.json" -- "$BURN" 50
expect_eq "unwritable output folder" 1 "$RC"
expect_match "... is named" 'cannot create .*no-such-dir' "$WORK/baddir.err"
expect_no_match "... before the command ran" 'cpu_burn: done' "$WORK/baddir.out"

# 6. perf's failures, explained, through stand-ins on PATH.
mkdir -p empty fake
PATH="$WORK/empty" run noperf perf -- "$BURN" 50
expect_eq "perf not installed" 1 "$RC"
expect_match "... names the Debian package" 'apt-get install linux-perf' "$WORK/noperf.err"

cat >fake/perf <<'SH'
#!/bin/sh
echo "E: linux-perf-5.10 is not installed." >&2
exit 1
SH
chmod +x fake/perf
PATH="$WORK/fake:/usr/bin:/bin" run mismatch perf -- "$BURN" 50
expect_eq "perf for another kernel" 1 "$RC"
expect_match "... says so" 'does not match the running kernel' "$WORK/mismatch.err"
expect_match "... quotes the wrapper" 'linux-perf-5.10 is not installed' "$WORK/mismatch.err"

cat >fake/perf <<'SH'
#!/bin/sh
case "$1" in
--version) echo "perf version 6.1.0"; exit 0 ;;
stat) printf 'Error:\nNo permission to enable cycles event.\n\nYou may not have permission to collect stats.\n\nConsider tweaking /proc/sys/kernel/perf_event_paranoid,\n' >&2; exit 255 ;;
esac
exit 99
SH
PATH="$WORK/fake:/usr/bin:/bin" run paranoid perf -- "$BURN" 50
expect_eq "perf not permitted" 1 "$RC"
expect_match "... names the sysctl" 'sysctl kernel\.perf_event_paranoid=1' "$WORK/paranoid.err"
expect_match "... names the capability" 'CAP_PERFMON' "$WORK/paranoid.err"
expect_match "... mentions containers" 'container' "$WORK/paranoid.err"

# No hardware counters: falls back to cpu-clock, says so, records with it.
real_perf=$(command -v perf)
cat >fake/perf <<SH
#!/bin/sh
case "\$1" in
stat) case "\$*" in *cycles*) echo "<not supported>,,cycles,0,100.00,,"; exit 0 ;; esac ;;
record) printf '%s\n' "\$@" >"$WORK/record.args" ;;
esac
exec "$real_perf" "\$@"
SH
PATH="$WORK/fake:$PATH" run nocycles perf -o nocycles.json -- "$BURN" 100
expect_eq "cpu-clock fallback exit" 0 "$RC"
expect_match "fallback is announced" 'cycle counter is not available.*cpu-clock|cpu-clock software timer' "$WORK/nocycles.err"
expect_match "records with cpu-clock" '^cpu-clock$' "$WORK/record.args"
expect_match "records DWARF call graphs by default" '^--call-graph=dwarf$' "$WORK/record.args"

finish
