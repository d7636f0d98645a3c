#!/bin/sh
# glibc's and libstdc++'s freeres at exit, as memcheck runs them by default:
# threaded C (leak_threads) and C++ (cxx_threads) programs, sqlite3 and git
# have memcheck's totals and four categories; --no-freeres gives memcheck's
# --run-libc-freeres=no figures. freeres runs at exit() and _exit, and not
# while another thread still runs, nor from a signal handler, nor at an
# exit_group system call of the program's own (freeres_paths; a caught
# signal blocked outside any handler, as GNU make keeps SIGCHLD, is told
# apart by the backtrace and runs it); each of those
# is said in the process's warnings (and in the text report, with a child's
# pid), with what memcheck run to compare with.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture leak_threads cxx_threads freeres_paths
need_python

# categories JSON: "definite indirect possible reachable" as bytes/blocks.
categories() {
    jget "$1" '" ".join("%d/%d" % (d["leaks_at_exit"][k]["bytes"], d["leaks_at_exit"][k]["blocks"]) for k in ("definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"))'
}
vg_categories() {
    echo "$VG_DEF_BYTES/$VG_DEF_BLOCKS $VG_IND_BYTES/$VG_IND_BLOCKS $VG_POS_BYTES/$VG_POS_BLOCKS $VG_REACH_BYTES/$VG_REACH_BLOCKS"
}
have_vg=0
command -v valgrind >/dev/null 2>&1 && have_vg=1

# Threaded C: the four exited threads' TLS vectors, which glibc keeps in its
# stack cache, are freed (they were "possibly lost" without freeres).
record_and_report threads -- "$FIXTURES/leak_threads" </dev/null
expect_eq "leak_threads: record exit" 0 "$REC_RC"
expect_eq "leak_threads: categories (the fixture's own blocks only)" "576/8 0/0 0/0 96/4" \
    "$(categories "$WORK/threads.json")"
record_and_report threads_kept --no-freeres -- "$FIXTURES/leak_threads" </dev/null
expect_eq "leak_threads --no-freeres: the four TLS vectors possibly lost" 4 \
    "$(jget "$WORK/threads_kept.json" 'd["leaks_at_exit"]["possibly_lost"]["blocks"] + d["leaks_at_exit"]["suppressed"]["blocks"]')"
expect_eq "leak_threads --no-freeres: 4 frees fewer" \
    "$(($(jget "$WORK/threads.json" 'd["totals"]["frees"]') - 4))" "$(jget "$WORK/threads_kept.json" 'd["totals"]["frees"]')"

# Threaded C++: what is left is the program's (see the fixture).
F=cxx_threads.cpp
record_and_report cxx -- "$FIXTURES/cxx_threads"
expect_eq "cxx_threads: record exit" 0 "$REC_RC"
expect_eq "cxx_threads: categories" "96/3 0/0 0/0 64/1" "$(categories "$WORK/cxx.json")"
expect_site "$WORK/cxx.json" work "$(fixture_line $F CXXT-LEAK)" allocations=3 leaked_bytes=96

# freeres_paths: the stdout buffer (4096 bytes, under FR-BUFFER) is freed by
# freeres, or left when freeres must not run.
BUFFER=$(fixture_line freeres_paths.c FR-BUFFER)
# The report says why freeres did not run (the figures then differ from
# memcheck's): its warning, with what to compare against.
freeres_warning() {
    jget "$1" "' | '.join(w for p in d['processes'] for w in p['warnings'] if 'freeres' in w) or 'none'"
}
buffer_live() {
    jget "$1" "sum(s['live_bytes'] for s in d['cases'][0]['sites'] if any(f.get('function') == 'main' and f.get('line') == $BUFFER for f in s['frames']))"
}
while read -r mode status allocs frees reachable buffer warning <&3; do
    record_and_report "paths_$mode" -- "$FIXTURES/freeres_paths" "$mode"
    J=$WORK/paths_$mode.json
    expect_eq "$mode: record exit" "$status" "$REC_RC"
    expect_eq "$mode: its line passed through" "$mode" "$(cat "$WORK/rec.out")"
    expect_eq "$mode: allocations frees" "$allocs $frees" "$(jget "$J" '"%d %d" % (d["totals"]["allocations"], d["totals"]["frees"])')"
    expect_eq "$mode: still reachable" "$reachable" "$(jget "$J" '"%d/%d" % (d["leaks_at_exit"]["still_reachable"]["bytes"], d["leaks_at_exit"]["still_reachable"]["blocks"])')"
    expect_eq "$mode: stdout's buffer live at exit" "$buffer" "$(buffer_live "$J")"
    case $warning in
    none) expect_eq "$mode: no freeres warning" none "$(freeres_warning "$J")" ;;
    *) freeres_warning "$J" >"$WORK/paths_$mode.warning"
       expect_match "$mode: freeres warning says why" \
           "^glibc's freeres did not run at exit: $(echo "$warning" | tr + ' ')[ ,.]" "$WORK/paths_$mode.warning"
       expect_match "$mode: freeres warning says what to compare with" \
           "compare with valgrind --run-libc-freeres=no --run-cxx-freeres=no" "$WORK/paths_$mode.warning" ;;
    esac
done 3<<'TABLE'
exit 0 2 1 100/1 0 none
_exit 0 2 1 100/1 0 none
running 0 3 0 4196/2 4096 1+other+thread+still+ran
running3 0 5 0 4196/2 4096 3+other+threads+still+ran
raw 0 2 0 4196/2 4096 the+process+left+past
blocked 0 2 1 100/1 0 none
handler 5 2 0 4196/2 4096 the+process+may+have+ended+from+a+signal+handler
bare 6 2 0 4196/2 4096 the+process+may+have+ended+from+a+signal+handler
TABLE
# The text report says it too, after the other processes, with the pid of
# the one it concerns when that is not the command's own (a shell running
# the program).
record_and_report paths_child -- sh -c "\"$FIXTURES/freeres_paths\" running; true"
"$MEMSLOPE" report "$WORK/paths_child.trace" >"$WORK/paths_child.txt" 2>/dev/null
expect_match "a child's freeres warning in the text report, with its pid" \
    "^warning \(pid [0-9]+\): glibc's freeres did not run at exit: 1 other thread still ran " "$WORK/paths_child.txt"
record_and_report paths_off --no-freeres -- "$FIXTURES/freeres_paths" running
expect_eq "--no-freeres: no freeres warning" none "$(freeres_warning "$WORK/paths_off.json")"

if [ $have_vg = 1 ]; then
    vg_run threads -- "$FIXTURES/leak_threads"
    vg_totals "$(vg_log threads)"
    expect_vg_totals "$WORK/threads.json"
    expect_eq "leak_threads: categories = memcheck's" "$(vg_categories)" "$(categories "$WORK/threads.json")"
    vg_run threads_kept --run-libc-freeres=no --run-cxx-freeres=no -- "$FIXTURES/leak_threads"
    vg_totals "$(vg_log threads_kept)"
    expect_vg_totals "$WORK/threads_kept.json"
    expect_eq "leak_threads --no-freeres: possibly lost blocks = memcheck's without freeres" "$VG_POS_BLOCKS" \
        "$(jget "$WORK/threads_kept.json" 'd["leaks_at_exit"]["possibly_lost"]["blocks"] + d["leaks_at_exit"]["suppressed"]["blocks"]')"
    vg_run cxx -- "$FIXTURES/cxx_threads"
    vg_totals "$(vg_log cxx)"
    expect_vg_totals "$WORK/cxx.json"
    expect_eq "cxx_threads: categories = memcheck's" "$(vg_categories)" "$(categories "$WORK/cxx.json")"
    for mode in exit _exit blocked; do
        vg_run "paths_$mode" -- "$FIXTURES/freeres_paths" "$mode"
        vg_totals "$(vg_log "paths_$mode")"
        expect_vg_totals "$WORK/paths_$mode.json"
        expect_eq "$mode: categories = memcheck's" "$(vg_categories)" "$(categories "$WORK/paths_$mode.json")"
    done
    # where the warning says freeres did not run, the memcheck run it names
    # agrees (running3's thread vectors are suppressed by default.supp here)
    for mode in raw; do
        vg_run "paths_${mode}_nofree" --run-libc-freeres=no --run-cxx-freeres=no -- "$FIXTURES/freeres_paths" "$mode"
        vg_totals "$(vg_log "paths_${mode}_nofree")"
        expect_eq "$mode: categories = memcheck's without freeres, as the warning says" "$(vg_categories)" \
            "$(categories "$WORK/paths_$mode.json")"
    done
fi

# Real programs, when installed (make deps installs both).
SQL='create table t(a, b); insert into t values (1, "one"), (2, "two"); select b from t order by a;'
if command -v sqlite3 >/dev/null 2>&1; then
    record_and_report sqlite -- sqlite3 :memory: "$SQL" </dev/null
    expect_eq "sqlite3: record exit" 0 "$REC_RC"
    if [ $have_vg = 1 ]; then
        vg_run sqlite -- sqlite3 :memory: "$SQL" </dev/null
        vg_totals "$(vg_log sqlite)"
        expect_vg_totals "$WORK/sqlite.json"
        expect_eq "sqlite3: categories = memcheck's" "$(vg_categories)" "$(categories "$WORK/sqlite.json")"
    fi
else
    log "sqlite3 not installed: skipped"
fi
if command -v git >/dev/null 2>&1; then
    REPO=$WORK/repo
    git init -q "$REPO" && printf 'a\n' >"$REPO/a" && git -C "$REPO" add a &&
        git -C "$REPO" -c user.name=t -c user.email=t@example.com commit -qm one || fail "cannot make a git repository in $REPO"
    record_and_report git -- git -C "$REPO" log --oneline </dev/null
    expect_eq "git: record exit" 0 "$REC_RC"
    if [ $have_vg = 1 ]; then
        vg_run git -- git -C "$REPO" log --oneline </dev/null
        vg_totals "$(vg_log git)"
        # Bytes differ by the environment: git's setenv copies environ,
        # whose size differs under memslope and under valgrind (each adds
        # its own variables); counts and leaks do not.
        expect_eq "git: allocations frees = memcheck's" "$VG_ALLOCS $VG_FREES" \
            "$(jget "$WORK/git.json" '"%d %d" % (d["totals"]["allocations"], d["totals"]["frees"])')"
        expect_eq "git: categories = memcheck's" "$(vg_categories)" "$(categories "$WORK/git.json")"
    fi
else
    log "git not installed: skipped"
fi
finish
