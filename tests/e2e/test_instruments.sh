#!/bin/sh
# memslope instruments: the exact `xcrun xctrace record` argument vector,
# checked through a stand-in `xcrun` first on PATH that writes its arguments
# one per line (template names with spaces and .tracetemplate paths must pass
# unchanged), xcrun's exit status passed through, and the explanation when
# there is no xcrun at all (every Linux machine).
. "$(dirname "$0")/lib.sh"
need_memslope
cd "$WORK" || fail "cannot enter $WORK"
TIMEOUT=$(command -v timeout) # some runs below have a PATH without it

mkdir -p bin empty "My Templates"
cat >bin/xcrun <<'SH'
#!/bin/sh
: >"$XCRUN_ARGS"
for a in "$@"; do printf '%s\n' "$a" >>"$XCRUN_ARGS"; done
[ -n "${XCRUN_SIGNAL:-}" ] && kill -"$XCRUN_SIGNAL" $$
exit "${XCRUN_EXIT:-0}"
SH
chmod +x bin/xcrun
export XCRUN_ARGS="$WORK/xcrun.args"

# run NAME [ARG...]: memslope with ARGs and the stand-in first on PATH.
run() {
    _name=$1
    shift
    rm -f "$XCRUN_ARGS"
    log "\$ memslope $*"
    PATH="$WORK/bin:$PATH" "$TIMEOUT" -k 5 60 "$MEMSLOPE" "$@" >"$WORK/$_name.out" 2>"$WORK/$_name.err"
    RC=$?
    log "  -> exit $RC"
    sed 's/^/    | /' "$WORK/$_name.err" | head -n 12
}

# expect_args WHAT LINE...: the stand-in got exactly these arguments.
expect_args() {
    _what=$1
    shift
    : >"$WORK/expected.args"
    for a in "$@"; do printf '%s\n' "$a" >>"$WORK/expected.args"; done
    if cmp -s "$WORK/expected.args" "$XCRUN_ARGS"; then
        log "ok       $_what"
    else
        expect_eq "$_what" "$(tr '\n' '|' <"$WORK/expected.args")" "$(tr '\n' '|' <"$XCRUN_ARGS" 2>/dev/null)"
    fi
}

# A template name with a space, a time limit, arguments with spaces.
run spaces instruments --template "Time Profiler" -o out.trace --time-limit 10s -- /bin/echo "hello world" --flag
expect_eq "exit status" 0 "$RC"
expect_args "xctrace argv, template with a space" xctrace record --template "Time Profiler" --output out.trace \
    --time-limit 10s --target-stdout - --launch -- /bin/echo "hello world" --flag

# A .tracetemplate path (with spaces), no time limit, default output name,
# the command's status passed through.
template="$WORK/My Templates/Allocations + Leaks.tracetemplate"
: >"$template"
XCRUN_EXIT=7 run path instruments --template "$template" -- ./bench 200
expect_eq "exit status passed through" 7 "$RC"
out=$(sed -n 6p "$XCRUN_ARGS" 2>/dev/null)
name_ok=no
printf '%s\n' "$out" | grep -qE '^memslope\.bench\.[0-9]+\.trace$' && name_ok=yes
expect_eq "default output memslope.bench.PID.trace ($out)" yes "$name_ok"
expect_args "xctrace argv, .tracetemplate path" xctrace record --template "$template" --output "$out" \
    --target-stdout - --launch -- ./bench 200

# --name=value forms; an xcrun killed by a signal gives 128 + signal.
XCRUN_SIGNAL=TERM run signal instruments --template=Allocations --output=a.trace --time-limit=2m --open -- sh -c 'exit 3'
expect_eq "killed by SIGTERM" 143 "$RC"
expect_args "xctrace argv, --opt=value forms" xctrace record --template Allocations --output a.trace \
    --time-limit 2m --target-stdout - --launch -- sh -c 'exit 3'

# xcrun without xctrace (Command Line Tools only): its status, and the fix.
XCRUN_EXIT=72 run clt instruments --template Leaks -o l.trace -- ./bench
expect_eq "xcrun's status when xctrace is missing" 72 "$RC"
expect_match "points to the full Xcode" 'xcode-select -s /Applications/Xcode\.app/Contents/Developer' "$WORK/clt.err"

# Usage errors.
run notemplate instruments -- ./bench
expect_eq "no --template: usage" 2 "$RC"
run nocommand instruments --template Leaks
expect_eq "no command: usage" 2 "$RC"
expect_eq "xcrun not run on usage errors" no "$([ -e "$XCRUN_ARGS" ] && echo yes || echo no)"

# No xcrun on PATH at all.
log "\$ PATH=$WORK/empty memslope instruments --template Allocations -- ./bench"
PATH="$WORK/empty" "$TIMEOUT" -k 5 60 "$MEMSLOPE" instruments --template Allocations -- ./bench \
    >"$WORK/noxcrun.out" 2>"$WORK/noxcrun.err"
RC=$?
sed 's/^/    | /' "$WORK/noxcrun.err"
expect_eq "without xcrun" 1 "$RC"
expect_match "needs macOS with the full Xcode" 'macOS with the full Xcode' "$WORK/noxcrun.err"
expect_match "names xcode-select" 'sudo xcode-select -s /Applications/Xcode\.app/Contents/Developer' "$WORK/noxcrun.err"
expect_match "points to memslope record on Linux" 'On Linux, `memslope record' "$WORK/noxcrun.err"

finish
