#!/bin/sh
# Runs every end-to-end test (tests/e2e/test_*.sh) under a timeout, from the
# repository root. Contract for a test script: exit 0 = pass, 77 = skipped
# (say why on stderr), anything else = fail. Each gets these variables:
#   MEMSLOPE  path of the memslope binary     FIXTURES  built fixtures folder
#   WORK      a fresh scratch folder for this test (removed when it passes)
# and may source tests/e2e/lib.sh for helpers. Select with E2E_FILTER=glob.
cd "$(dirname "$0")/../.." || exit 2
root=$(pwd)
export MEMSLOPE="$root/build/bin/memslope" FIXTURES="$root/build/fixtures"
per_test_timeout=${E2E_TIMEOUT:-180}
passed=0 failed=0 skipped=0 failures=""
for t in tests/e2e/test_*.sh; do
    name=$(basename "$t" .sh)
    case "$name" in ${E2E_FILTER:-*}) ;; *) continue ;; esac
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/memslope-e2e.$name.XXXXXX")
    export WORK
    start=$(date +%s)
    timeout -k 10 "$per_test_timeout" sh "$t" >"$WORK/.log" 2>&1 </dev/null
    rc=$?
    secs=$(( $(date +%s) - start ))
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1)); echo "PASS  $name (${secs}s)"; rm -rf "$WORK"
    elif [ $rc -eq 77 ]; then
        skipped=$((skipped + 1)); echo "SKIP  $name: $(tail -n 1 "$WORK/.log")"; rm -rf "$WORK"
    else
        failed=$((failed + 1)); failures="$failures $name"
        [ $rc -eq 124 ] && echo "FAIL  $name: timed out after ${per_test_timeout}s" || echo "FAIL  $name (exit $rc)"
        sed 's/^/    | /' "$WORK/.log" | tail -n 40
    fi
done
echo "e2e: $passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
