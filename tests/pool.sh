# tests/pool.sh - runs jobs a few at a time (bash; sourced by the test runners).
#
#   pool_run JOBS START FINISH ITEM...
#
# Calls `START ITEM` in the background for each ITEM, at most JOBS at once, in
# the order given, and `FINISH ITEM` in the foreground as each one ends, in the
# order they end. START keeps its output and status in files of its own;
# FINISH reads them, so whatever it prints about one item stays together.
pool_run() {
    local jobs=$1 start=$2 finish=$3 pid item
    shift 3
    local -A running=()
    [ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
    # wait -p came with bash 5.1; an older bash runs one item at a time.
    if [ "${BASH_VERSINFO[0]}${BASH_VERSINFO[1]}" -lt 51 ]; then
        for item in "$@"; do "$start" "$item"; "$finish" "$item"; done
        return
    fi
    while [ $# -gt 0 ] || [ ${#running[@]} -gt 0 ]; do
        while [ $# -gt 0 ] && [ ${#running[@]} -lt "$jobs" ]; do
            "$start" "$1" &
            running[$!]=$1
            shift
        done
        # -p names the job that ended; a status >128 with no name is a signal
        # to this shell (wait interrupted), so it waits again.
        pid=""
        wait -n -p pid "${!running[@]}"
        [ -n "$pid" ] || continue
        "$finish" "${running[$pid]}"
        unset "running[$pid]"
    done
}

# The number of cores this process may run on.
pool_cores() {
    nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1
}
