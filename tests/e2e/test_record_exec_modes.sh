#!/bin/sh
# Ways of starting a program: fork + exec, vfork + exec, posix_spawn (which
# glibc does with clone(CLONE_VM | CLONE_VFORK)); exec into a static program
# the shim cannot be preloaded into (/sbin/ldconfig on Debian); a command
# that clears its environment (env -i) before exec. The exec'd image is
# recorded (or, when it cannot be, the report says so plainly); exit statuses
# and output pass through. A command that removes or replaces LD_PRELOAD
# is named in the warning, on record's stderr too.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture fork_exec demo_leak
need_python

DL='[p for p in d["processes"] if p["exe"].endswith("/demo_leak")][0]'
FE='[p for p in d["processes"] if p["exe"].endswith("/fork_exec") and p["totals"]["allocations"] > 0][0]'

for mode in --fork --vfork --spawn; do
    name=m${mode#--}
    record_and_report "$name" -- "$FIXTURES/fork_exec" "$mode"
    J=$WORK/$name.json
    expect_eq "$mode: record exit status" 0 "$REC_RC"
    expect_eq "$mode: top-level totals (fork_exec's, the launched command's own process)" \
        '{"allocated_bytes": 3500, "allocations": 5, "frees": 5, "peak_bytes": 3500}' "$(jget "$J" 'd["totals"]')"
    expect_eq "$mode: demo_leak image exit" '{"status": 0}' "$(jget "$J" "$DL[\"exit\"]")"
    expect_totals "$J" "$DL" 217 100 31552
    expect_totals "$J" "$FE" 5 5 3500
done

# A forked child that allocates nothing before its exec did load the shim (it
# inherited it): the report must not claim otherwise.
expect_eq "--fork: no 'shim never loaded' warning for the fork child that inherited the shim" "[]" \
    "$(jget "$WORK/mfork.json" '[w for p in d["processes"] if p["exe"].endswith("/fork_exec") for w in p.get("warnings", []) if "never loaded" in w]')"

# Exec into a static program: it runs, its output and status pass through, the
# report lists it and says that its allocations could not be recorded.
STATIC=/sbin/ldconfig
if [ -x "$STATIC" ]; then
    record_and_report static -- "$FIXTURES/fork_exec" "$STATIC" --version
    J=$WORK/static.json
    expect_eq "static exec: record exit status" 0 "$REC_RC"
    expect_match "static exec: its output passes through" '^ldconfig' "$WORK/rec.out"
    expect_eq "static exec: ldconfig image listed, exit 0" '[{"status": 0}]' \
        "$(jget "$J" '[p["exit"] for p in d["processes"] if p["exe"].endswith("/ldconfig")]')"
    expect_totals "$J" "$FE" 5 5 3500
    expect_eq "static exec: a warning names ldconfig" true \
        "$(jget "$J" 'any("ldconfig" in w for p in d["processes"] for w in p.get("warnings", [])) or any("ldconfig" in w for w in d.get("warnings", []))')"
    expect_eq "static exec: ... and says it is statically linked" true \
        "$(jget "$J" 'any("ldconfig" in w and "statically linked" in w for p in d["processes"] for w in p.get("warnings", []))')"
    # Launched directly, the static program is the headline: its text report
    # says nothing was recorded, not that every allocation was freed.
    record "$WORK/static_only.trace" -- "$STATIC" --version
    "$MEMSLOPE" report "$WORK/static_only.trace" >"$WORK/static_only.txt" 2>&1
    expect_match "static program: the text says nothing was recorded" \
        "^Nothing was recorded in this process: memslope's shim was not loaded into it" "$WORK/static_only.txt"
    expect_no_match "static program: nothing claimed freed" "Every allocation was freed" "$WORK/static_only.txt"
    record "$WORK/static3.trace" -- "$FIXTURES/fork_exec" --vfork /bin/sh -c 'exit 3'
    expect_eq "vfork + exec of sh -c 'exit 3': record exit status" 3 "$REC_RC"
else
    log "no $STATIC: static exec not checked"
fi

# A setuid program runs in secure-execution mode, where ld.so ignores
# LD_PRELOAD: the warning says so, and does not blame a static binary.
if [ "$(id -u)" -eq 0 ]; then
    cp "$FIXTURES/demo_leak" "$WORK/suid_demo" && chown 65534 "$WORK/suid_demo" && chmod u+s "$WORK/suid_demo"
    record_and_report suid -- "$WORK/suid_demo"
    expect_eq "setuid: record exit status" 0 "$REC_RC"
    jget "$WORK/suid.json" '[w for p in d["processes"] for w in p.get("warnings", [])]' >"$WORK/suid.warnings"
    expect_match "setuid: the warning names secure-execution mode" \
        "suid_demo\\): the shim never loaded, so its allocations are not recorded: it runs in secure-execution mode, setuid" "$WORK/suid.warnings"
    expect_no_match "setuid: no static binary blamed" "static" "$WORK/suid.warnings"
else
    log "not root: the setuid case is not checked"
fi

# env -i clears LD_PRELOAD before the exec, env LD_PRELOAD=... replaces it:
# demo_leak runs without the shim. The trace and record's stderr say which
# command did what, and how to preload a library of one's own.
DEMO_WARNINGS='[w for p in d["processes"] if p["exe"].endswith("/demo_leak") for w in p.get("warnings", [])]'
record_and_report envi -- env -i "$FIXTURES/demo_leak"
expect_eq "env -i: record exit status" 0 "$REC_RC"
expect_eq "env -i: demo_leak not recorded" 0 \
    "$(jget "$WORK/envi.json" 'sum(p["totals"]["allocations"] for p in d["processes"] if p["exe"].endswith("/demo_leak"))')"
jget "$WORK/envi.json" "$DEMO_WARNINGS" >"$WORK/envi.warnings"
expect_match "env -i: the warning says LD_PRELOAD was removed" \
    "demo_leak\\): the shim never loaded, so its allocations are not recorded: a command on the way .* removed LD_PRELOAD" \
    "$WORK/envi.warnings"
expect_match "env -i: ... and so does record's stderr" "^memslope: warning: process [0-9]* \\(.*/demo_leak\\): .*removed LD_PRELOAD" \
    "$WORK/rec.err"
LIBM=/lib/x86_64-linux-gnu/libm.so.6
record_and_report envpre -- env LD_PRELOAD=$LIBM "$FIXTURES/demo_leak"
expect_eq "env LD_PRELOAD=libm: record exit status" 0 "$REC_RC"
jget "$WORK/envpre.json" "$DEMO_WARNINGS" >"$WORK/envpre.warnings"
expect_match "env LD_PRELOAD=libm: the warning names the value that replaced memslope's" \
    "replaced its LD_PRELOAD with '$LIBM'; set it before memslope instead" "$WORK/envpre.warnings"
expect_match "env LD_PRELOAD=libm: ... on record's stderr too" "^memslope: warning: .*replaced its LD_PRELOAD" \
    "$WORK/rec.err"
# A command that cleans the environment of a whole chain of programs: one
# warning on stderr, then how many more.
record "$WORK/chain.trace" -- env -i /bin/sh -c '/bin/true; /bin/true; /bin/true'
expect_eq "env -i sh -c ...: one process named on stderr" 1 "$(grep -c '^memslope: warning: process' "$WORK/rec.err")"
expect_match "env -i sh -c ...: and how many more" "^memslope: warning: [0-9]+ more processes ran without the shim" \
    "$WORK/rec.err"
# What the warning says to do works: memslope keeps the library and adds its shim.
LD_PRELOAD=$LIBM record "$WORK/pre.trace" -- "$FIXTURES/demo_leak"
report_json "$WORK/pre.trace" "$WORK/pre.json"
expect_totals "$WORK/pre.json" "$DL" 217 100 31552
expect_eq "LD_PRELOAD=libm memslope record: no warning on stderr" "" "$(grep warning "$WORK/rec.err")"
finish
