#!/bin/sh
# Runs every unit-test binary given; each is a cmocka program built with
# ASan and UBSan. Prints a closing "N passed, N failed" line over binaries.
passed=0 failed=0
for t in "$@"; do
    if ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 timeout 300 "$t"; then
        passed=$((passed + 1))
    else
        echo "FAILED: $t" >&2
        failed=$((failed + 1))
    fi
done
echo "unit: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
