# tests/e2e/lib.sh - helpers shared by the end-to-end tests (POSIX sh).
#
# A test script sources it first:   . "$(dirname "$0")/lib.sh"
# and gets, from tests/e2e/run.sh (or the defaults below when it runs alone
# from the repository root): MEMSLOPE, FIXTURES, WORK.
#
# The python checks they call are tests/e2e/*.py.
#
# Contract (tests/e2e/run.sh): exit 0 pass, 77 skip (reason as the last line),
# anything else fail. Checks made with expect_eq and friends do not stop the
# test: every mismatch is printed, and `finish` exits 1 if there was any, so
# one run shows everything that is wrong.
#
#   need_memslope | need_fixture NAME... | need_valgrind | need_python | need_chromium
#   cpython_interpreters
#   fixture_line FILE MARKER         line number of the "/* MARKER */" or
#                                    "// MARKER" comment in fixtures/FILE
#   record TRACE [RECORD-OPTIONS] -- COMMAND [ARG...]
#                                    memslope record -o TRACE under a timeout;
#                                    sets REC_RC; stdout in $WORK/rec.out,
#                                    stderr in $WORK/rec.err
#   record_no_ptrace TRACE [RECORD-OPTIONS] -- COMMAND [ARG...]
#                                    the same under fixtures/no_ptrace (seccomp
#                                    denies ptrace and process_vm_readv/writev)
#   report_json TRACE JSON [OPT...]  memslope report TRACE --format json [OPT...] > JSON,
#                                    must exit 0 and print valid JSON
#   report_format OUT TRACE FORMAT [OPTION...]
#                                    memslope report -o $WORK/OUT; sets RC; a
#                                    format it does not know fails the test
#   jget JSON EXPR                   python expression over the report `d`,
#                                    e.g. jget r.json 'd["totals"]["frees"]';
#                                    prints MISSING if a key is absent
#   site_get JSON FIELD FUNC LINE    FIELD summed over cases[0].sites whose
#                                    innermost frame is FUNC at LINE ("none"
#                                    if no site matches; the sites that were
#                                    reported are then listed in the log)
#   site_any_get JSON FIELD FUNC     same, over sites with FUNC in any frame
#   trace_stacks TRACE               every stack of every process image, one a
#                                    line: "ID<TAB>EXE<TAB>module:function;..."
#   vg_run NAME [VALGRIND-OPTIONS] -- COMMAND [ARG...]
#                                    runs memcheck, one log per process in
#                                    $WORK/vg.NAME.PID.log; sets VG_RC
#   vg_figures LOG                   "allocs frees bytes def_bytes def_blocks
#                                    ind_bytes ind_blocks pos_bytes pos_blocks
#                                    reach_bytes reach_blocks" from one log
#   expect_eq WHAT EXPECTED ACTUAL   soft check; also expect_ne, expect_in,
#                                    expect_match (grep -E), expect_lt
#   browse NAME URL CHROMIUM-OPTION... headless Chromium (need_chromium), offline;
#                                    stdout in $WORK/NAME.out, its log in $WORK/NAME.log
#   expect_quiet_console NAME        no console message in $WORK/NAME.log
#   finish                           exit 1 if any soft check failed, else 0

set -u

: "${MEMSLOPE:=$(pwd)/build/bin/memslope}"
: "${FIXTURES:=$(pwd)/build/fixtures}"
if [ -z "${WORK:-}" ]; then
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/memslope-e2e.XXXXXX")
fi
export MEMSLOPE FIXTURES WORK
# Each test has a symbol cache of its own, empty at its start: every test
# resolves from debug info as a first recording does (and writes the cache
# as every recording does), none depends on what an earlier one left, and
# nothing goes to the user's ~/.cache. test_record_symbol_cache.sh tests
# the cache itself.
XDG_CACHE_HOME=$WORK/xdg-cache
export XDG_CACHE_HOME
SRC_FIXTURES=${SRC_FIXTURES:-$(pwd)/fixtures}
# This folder, where the python checks (tests/e2e/*.py) are.
E2E_DIR=$(cd "$(dirname "$0")" && pwd)
RECORD_TIMEOUT=${RECORD_TIMEOUT:-60}
# The interpreter itself, resolved once: wrappers such as pyenv's shims cost
# a large fraction of a second per call, and the tests call python often.
if [ -z "${PY:-}" ]; then
    PY=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) || PY=python3
    [ -n "$PY" ] || PY=python3
fi
VALGRIND_TIMEOUT=${VALGRIND_TIMEOUT:-120}
_failures=0

# No core files from the crash fixtures.
ulimit -c 0 2>/dev/null || true

log() { printf '%s\n' "$*"; }

# Stops the test now: a precondition that makes every later check moot.
fail() {
    printf 'FAIL: %s\n' "$*"
    exit 1
}

skip() {
    printf 'skipped: %s\n' "$*"
    exit 77
}

need_memslope() {
    [ -x "$MEMSLOPE" ] || fail "memslope is not built: $MEMSLOPE is missing (run: make all)"
}

need_fixture() {
    for _f in "$@"; do
        [ -x "$FIXTURES/$_f" ] || fail "fixture not built: $FIXTURES/$_f (run: make fixtures)"
    done
}

need_valgrind() {
    command -v valgrind >/dev/null 2>&1 || skip "valgrind is not installed (make deps installs it)"
}

need_python() {
    command -v python3 >/dev/null 2>&1 || skip "python3 is not installed (make deps installs it)"
}

# Every CPython 3.6+ here (not a free-threaded build), one line each, each
# interpreter once, by its real path (pyenv's names are scripts): $PY, the
# system's, python3.N on PATH and pyenv's (~/.pyenv/versions/3.*).
cpython_interpreters() {
    for py in "$PY" /usr/bin/python3 $(command -v python3.6 python3.7 python3.8 python3.9 python3.10 python3.11 \
                                       python3.12 python3.13 2>/dev/null) \
              "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.*/bin/python3; do
        "$py" -c 'import sys, os, sysconfig
if sys.version_info >= (3, 6) and not sysconfig.get_config_var("Py_GIL_DISABLED"):
    print(os.path.realpath(sys.executable))' 2>/dev/null
    done | awk '!seen[$0]++'
}

need_chromium() {
    CHROMIUM=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
    [ -n "$CHROMIUM" ] || skip "chromium is not installed (apt-get install chromium; make deps installs it)"
}

# await_pid FILE: waits up to 10 s for the "pid N" line a waiting fixture
# prints into FILE, then prints N (nothing if it never came).
await_pid() {
    for _i in $(seq 1 100); do
        grep -q '^pid ' "$1" 2>/dev/null && break
        sleep 0.1
    done
    awk '/^pid /{print $2}' "$1" 2>/dev/null
}

# build_leaky_ext PYTHON DIR: fixtures/python/leaky_ext.c built for that
# interpreter into DIR, with its driver drive_leaky.py; 1 when the
# interpreter has no Python.h (the caller skips).
build_leaky_ext() {
    _include=$("$1" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    _suffix=$("$1" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
    [ -f "$_include/Python.h" ] || return 1
    mkdir -p "$2"
    cc -shared -fPIC -g -O0 -I"$_include" -o "$2/leaky_ext$_suffix" "$SRC_FIXTURES/python/leaky_ext.c" ||
        fail "cannot build the extension for $1"
    cp "$SRC_FIXTURES/python/drive_leaky.py" "$2/"
}

# fixture_line FILE MARKER -> the line that carries the marker comment (C or Python).
fixture_line() {
    _n=$(grep -nE "(/\*|//|#) $2( \*/|\$)" "$SRC_FIXTURES/$1" | cut -d: -f1)
    case "$_n" in
        ''|*[!0-9]*) fail "marker $2 must be on exactly one line of fixtures/$1 (found: '$_n')" ;;
    esac
    printf '%s\n' "$_n"
}

# --- soft checks -------------------------------------------------------------

_mismatch() {
    _failures=$((_failures + 1))
    printf 'MISMATCH %s\n' "$*"
}

expect_eq() {
    if [ "$2" = "$3" ]; then
        printf 'ok       %s = %s\n' "$1" "$3"
    else
        _mismatch "$1: expected $2, got $3"
    fi
}

expect_ne() {
    if [ "$2" != "$3" ]; then
        printf 'ok       %s = %s (not %s)\n' "$1" "$3" "$2"
    else
        _mismatch "$1: expected anything but $2"
    fi
}

# expect_in WHAT "A B C" ACTUAL
expect_in() {
    for _v in $2; do
        if [ "$_v" = "$3" ]; then
            printf 'ok       %s = %s (one of: %s)\n' "$1" "$3" "$2"
            return 0
        fi
    done
    _mismatch "$1: expected one of [$2], got $3"
}

# expect_lt WHAT LIMIT ACTUAL: ACTUAL is an integer below LIMIT.
expect_lt() {
    case "$3" in
        ''|*[!0-9]*) _mismatch "$1: expected an integer below $2, got '$3'"; return ;;
    esac
    if [ "$3" -lt "$2" ]; then
        printf 'ok       %s = %s (< %s)\n' "$1" "$3" "$2"
    else
        _mismatch "$1: expected below $2, got $3"
    fi
}

# expect_match WHAT ERE FILE: FILE has a line matching the extended regex.
expect_match() {
    if grep -qE "$2" "$3" 2>/dev/null; then
        printf 'ok       %s (/%s/)\n' "$1" "$2"
    else
        _mismatch "$1: no line matches /$2/ in $(basename "$3"); it holds:"
        sed 's/^/    > /' "$3" 2>/dev/null | head -n 20
    fi
}

expect_no_match() {
    if grep -qE "$2" "$3" 2>/dev/null; then
        _mismatch "$1: a line matches /$2/ in $(basename "$3"):"
        grep -E "$2" "$3" | head -n 5 | sed 's/^/    > /'
    else
        printf 'ok       %s (no /%s/)\n' "$1" "$2"
    fi
}

finish() {
    if [ "$_failures" -ne 0 ]; then
        printf 'FAIL: %d check(s) failed (scratch folder: %s)\n' "$_failures" "$WORK"
        exit 1
    fi
    printf 'all checks passed\n'
    exit 0
}

# --- web pages -----------------------------------------------------------------

# browse NAME URL CHROMIUM-OPTION...: headless Chromium, offline; stdout in
# $WORK/NAME.out, its log (console messages included) in $WORK/NAME.log.
browse() {
    _name=$1 _url=$2
    shift 2
    timeout -k 5 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$(mktemp -d "$WORK/profile.XXXXXX")" --enable-logging=stderr --v=0 \
        --window-size=1200,1600 "$@" "$_url" >"$WORK/$_name.out" 2>"$WORK/$_name.log"
    _rc=$?
    [ "$_rc" -eq 0 ] || { tail -n 20 "$WORK/$_name.log"; fail "chromium exited $_rc on $_url"; }
}

# Everything the page said to the console: errors, uncaught exceptions, blocked loads.
expect_quiet_console() {
    grep -E 'CONSOLE|Uncaught|Refused to|net::ERR' "$WORK/$1.log" >"$WORK/$1.console" || true
    expect_eq "$1: no console messages" "" "$(cat "$WORK/$1.console")"
}

# --- memslope ------------------------------------------------------------------

# record TRACE [RECORD-OPTIONS] -- COMMAND [ARG...]; stdin is the caller's.
record() {
    _record "" "$@"
}

# record_no_ptrace TRACE [RECORD-OPTIONS] -- COMMAND [ARG...]: as record,
# where ptrace (and process_vm_readv/writev) is denied by a seccomp filter.
record_no_ptrace() {
    _record "$FIXTURES/no_ptrace" "$@"
}

# hang_snapshot PATTERN: every task of the processes whose command line
# holds PATTERN, and of their children: state, kernel wait channel, system
# call (what a hung recording was doing, for the log).
hang_snapshot() {
    for _p in $(pgrep -f -- "$1"); do
        for _q in "$_p" $(pgrep -P "$_p") $(for _c in $(pgrep -P "$_p"); do pgrep -P "$_c"; done); do
            for _t in /proc/"$_q"/task/*; do
                [ -r "$_t/stat" ] || continue
                printf '%s %s state=%s wchan=%s syscall=%s\n' "$_q/$(basename "$_t")" \
                    "$(cat "$_t/comm" 2>/dev/null)" "$(sed 's/^.*) //' "$_t/stat" | cut -d' ' -f1)" \
                    "$(cat "$_t/wchan" 2>/dev/null)" "$(cut -d' ' -f1 "$_t/syscall" 2>/dev/null)"
            done
        done
    done | sort -u
}

# _record WRAPPER TRACE ...: WRAPPER (a program that execs its arguments) or "".
_record() {
    _wrapper=$1 _trace=$2
    shift 2
    log "\$ ${_wrapper:+$(basename "$_wrapper") }memslope record -o $_trace $*"
    # a recording about to time out is looked at first (its tasks' states)
    rm -f "$WORK/hang.txt"
    (sleep $((RECORD_TIMEOUT - 2)) && hang_snapshot "record -o $_trace" >"$WORK/hang.txt") \
        </dev/null >/dev/null 2>&1 &
    _watch=$!
    timeout -k 5 "$RECORD_TIMEOUT" ${_wrapper:+"$_wrapper"} "$MEMSLOPE" record -o "$_trace" "$@" \
        >"$WORK/rec.out" 2>"$WORK/rec.err"
    REC_RC=$?
    pkill -P "$_watch" 2>/dev/null
    kill "$_watch" 2>/dev/null
    wait "$_watch" 2>/dev/null
    log "  -> exit $REC_RC"
    if [ -s "$WORK/rec.err" ]; then
        log "  stderr:"
        sed 's/^/    | /' "$WORK/rec.err" | head -n 20
    fi
    if [ "$REC_RC" -eq 124 ] && [ -s "$WORK/hang.txt" ]; then
        log "  its tasks $((RECORD_TIMEOUT - 2))s in (pid/tid comm state wchan syscall):"
        sed 's/^/    | /' "$WORK/hang.txt" | head -n 40
    fi
    [ "$REC_RC" -ne 124 ] || fail "memslope record did not finish within ${RECORD_TIMEOUT}s: $*"
    return 0
}

# report_json TRACE JSON [OPTION...]: the report (with those options) must succeed and be JSON.
report_json() {
    _trace=$1 _json=$2
    shift 2
    log "\$ memslope report $_trace --format json $*"
    timeout -k 5 60 "$MEMSLOPE" report "$_trace" --format json "$@" >"$_json" 2>"$_json.err"
    set -- "$_trace" "$_json"
    _rc=$?
    if [ -s "$2.err" ]; then
        log "  stderr:"
        sed 's/^/    | /' "$2.err" | head -n 20
    fi
    [ "$_rc" -eq 0 ] || fail "memslope report $1 --format json exited $_rc (expected 0)"
    "$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' "$2" 2>"$WORK/json.err" || {
        log "  output (first 40 lines):"
        head -n 40 "$2" | sed 's/^/    > /'
        fail "memslope report --format json printed invalid JSON: $(tail -n 1 "$WORK/json.err")"
    }
    log "  -> exit 0, valid JSON ($(wc -c <"$2") bytes)"
}

# record_and_report NAME [RECORD-OPTIONS] -- COMMAND...: records into
# $WORK/NAME.trace and reports into $WORK/NAME.json.
record_and_report() {
    _name=$1
    shift
    record "$WORK/$_name.trace" "$@"
    [ -f "$WORK/$_name.trace" ] || fail "memslope record wrote no trace at $WORK/$_name.trace (exit $REC_RC)"
    report_json "$WORK/$_name.trace" "$WORK/$_name.json"
}

# report_format OUT TRACE FORMAT [OPTION...]: memslope report ... -o $WORK/OUT;
# sets RC. A format memslope does not know fails the test.
report_format() {
    _out=$WORK/$1 _trace=$2 _format=$3
    shift 3
    log "\$ memslope report $_trace --format $_format $* -o $_out"
    timeout -k 5 60 "$MEMSLOPE" report "$_trace" --format "$_format" "$@" -o "$_out" 2>"$_out.err"
    RC=$?
    log "  -> exit $RC"
    [ -s "$_out.err" ] && sed 's/^/    | /' "$_out.err" | head -n 10
    if grep -q "unknown format" "$_out.err"; then
        fail "memslope report does not know --format $_format"
    fi
    return 0
}

# jget JSON EXPR: the value (JSON for containers, plain for numbers/strings).
jget() {
    "$PY" "$E2E_DIR/jget.py" "$1" "$2"
}

# _sites JSON FIELD FUNC LINE MODE: MODE "inner" (innermost frame is FUNC at
# LINE) or "any" (some frame's function is FUNC; LINE ignored). C++ names
# match with or without their parameter list ("make_widget" matches
# "make_widget(long)").
_sites() {
    "$PY" "$E2E_DIR/report_sites.py" "$@"
}

site_get() { _sites "$1" "$2" "$3" "$4" inner; }
site_any_get() { _sites "$1" "$2" "$3" 0 any; }

# expect_site JSON FUNC LINE FIELD=VALUE...: soft checks on one site (the
# site list is printed once if the site is not found).
expect_site() {
    _j=$1 _fn=$2 _ln=$3
    shift 3
    _quiet=0
    for _kv in "$@"; do
        _k=${_kv%%=*} _v=${_kv#*=}
        if [ $_quiet -eq 0 ]; then
            _got=$(site_get "$_j" "$_k" "$_fn" "$_ln")
        else
            _got=$(site_get "$_j" "$_k" "$_fn" "$_ln" 2>/dev/null)
        fi
        _quiet=1
        expect_eq "site $_fn:$_ln $_k" "$_v" "$_got"
    done
}

# trace_stacks TRACE: every stack of every process image in the trace (the
# report shows the primary process's only), one line each:
# "PROCESS_ID<TAB>EXE<TAB>module:function;module:function..." innermost
# first, allocator frames left out. Reads the file as docs/trace-format.md
# describes it.
trace_stacks() {
    "$PY" "$E2E_DIR/trace_stacks.py" "$1"
}

# trace_sections TRACE: the kinds of TRACE's sections, in order, as "KIND
# KIND ..." (docs/trace-format.md: u32 kind, u32, u64 length, payload, u32
# crc); a trace being written may end inside a section, which is not
# counted.
trace_sections() {
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

# wait_for_section TRACE KIND: "yes" as soon as TRACE, being written, holds
# a section of KIND, "no" after 20 s without one.
wait_for_section() {
    for _ in $(seq 200); do
        case " $(trace_sections "$1" 2>/dev/null) " in
            *" $2 "*) echo yes; return ;;
        esac
        sleep 0.1
    done
    echo no
}

# --- valgrind ------------------------------------------------------------------

# vg_run NAME [VALGRIND-OPTIONS] -- COMMAND [ARG...]: memcheck as it runs by
# default, glibc's and libstdc++'s freeres at exit included (memslope runs
# them too, unless record --no-freeres).
vg_run() {
    _name=$1
    shift
    rm -f "$WORK/vg.$_name".*.log
    log "\$ valgrind $*"
    timeout -k 5 "$VALGRIND_TIMEOUT" valgrind --leak-check=full --show-leak-kinds=all --error-exitcode=0 \
        --log-file="$WORK/vg.$_name.%p.log" "$@" >"$WORK/vg.$_name.out" 2>"$WORK/vg.$_name.err"
    VG_RC=$?
    log "  -> exit $VG_RC"
    [ "$VG_RC" -ne 124 ] || fail "valgrind did not finish within ${VALGRIND_TIMEOUT}s: $*"
    return 0
}

# vg_log NAME [COMMAND-REGEX]: the log of the process whose "Command:" line
# matches (the only or first log when no regex is given).
vg_log() {
    for _l in "$WORK/vg.$1".*.log; do
        [ -f "$_l" ] || continue
        if [ $# -lt 2 ] || grep -qE "== Command: $2" "$_l"; then
            printf '%s\n' "$_l"
            return 0
        fi
    done
    fail "no valgrind log for $1${2:+ with a command matching $2} in $WORK"
}

vg_figures() {
    "$PY" "$E2E_DIR/vg_figures.py" "$1"
}

# vg_totals LOG: sets VG_ALLOCS VG_FREES VG_BYTES VG_DEF_BYTES VG_DEF_BLOCKS
# VG_IND_BYTES VG_IND_BLOCKS VG_POS_BYTES VG_POS_BLOCKS VG_REACH_BYTES
# VG_REACH_BLOCKS.
vg_totals() {
    _fig=$(vg_figures "$1") || fail "cannot read valgrind's figures from $1"
    # shellcheck disable=SC2086
    set -- $_fig
    VG_ALLOCS=$1 VG_FREES=$2 VG_BYTES=$3 VG_DEF_BYTES=$4 VG_DEF_BLOCKS=$5
    VG_IND_BYTES=$6 VG_IND_BLOCKS=$7 VG_POS_BYTES=$8 VG_POS_BLOCKS=$9
    shift 9
    VG_REACH_BYTES=$1 VG_REACH_BLOCKS=$2
    log "  memcheck: $VG_ALLOCS allocs, $VG_FREES frees, $VG_BYTES bytes; lost $VG_DEF_BYTES/$VG_DEF_BLOCKS, indirect $VG_IND_BYTES/$VG_IND_BLOCKS, possibly $VG_POS_BYTES/$VG_POS_BLOCKS, reachable $VG_REACH_BYTES/$VG_REACH_BLOCKS"
}

# expect_totals JSON PREFIX ALLOCS FREES BYTES: PREFIX is a python path to an
# object with a "totals" member, e.g. 'd' or 'd["processes"][1]'.
expect_totals() {
    expect_eq "$2.totals.allocations" "$3" "$(jget "$1" "$2[\"totals\"][\"allocations\"]")"
    expect_eq "$2.totals.frees" "$4" "$(jget "$1" "$2[\"totals\"][\"frees\"]")"
    expect_eq "$2.totals.allocated_bytes" "$5" "$(jget "$1" "$2[\"totals\"][\"allocated_bytes\"]")"
}

# shim_tls_modules: how many objects with thread-local storage the shim
# brings into a process (itself and its libraries, less libc and ld.so,
# which every program has; a fixture loads none of the others itself).
shim_tls_modules() {
    _shim=$(dirname "$MEMSLOPE")/../lib/memslope/libmemslope.so
    _n=0
    for _o in "$_shim" $(ldd "$_shim" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'); do
        case $(basename "$_o") in libc.so*|ld-linux*) continue ;; esac
        readelf -lW "$_o" 2>/dev/null | grep -qE '^ +TLS ' && _n=$((_n + 1))
    done
    echo "$_n"
}

# expect_vg_totals JSON: the report's top-level totals against memcheck's
# (vg_totals first). Allocations and frees must be equal. Bytes must be equal
# but for one known, explained difference: glibc sizes a new thread's TLS
# vector (calloc in allocate_dtv) by the number of modules with thread-local
# storage loaded, 16 bytes each, and the shim brings some (memcheck's preload
# none): each vector is 16 x shim_tls_modules bytes larger under memslope.
expect_vg_totals() {
    expect_eq "totals.allocations = memcheck's" "$VG_ALLOCS" "$(jget "$1" 'd["totals"]["allocations"]')"
    expect_eq "totals.frees = memcheck's" "$VG_FREES" "$(jget "$1" 'd["totals"]["frees"]')"
    _ms_bytes=$(jget "$1" 'd["totals"]["allocated_bytes"]')
    _ms_dtv=$(jget "$1" 'sum(s["allocations"] for s in d["cases"][0]["sites"] if any(f.get("function") == "allocate_dtv" for f in s["frames"]))')
    case "$_ms_dtv" in
        ''|*[!0-9]*) expect_eq "TLS vectors allocated (allocate_dtv sites)" "a number" "$_ms_dtv"; return ;;
    esac
    if [ "$_ms_dtv" -eq 0 ]; then
        expect_eq "totals.allocated_bytes = memcheck's" "$VG_BYTES" "$_ms_bytes"
    else
        _slots=$(shim_tls_modules)
        expect_eq "totals.allocated_bytes = memcheck's + $_ms_dtv TLS vectors x $_slots shim TLS modules x 16 B" \
            $((VG_BYTES + _ms_dtv * _slots * 16)) "$_ms_bytes"
    fi
}
