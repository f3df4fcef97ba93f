#!/bin/bash
# Set up everything and run the test suite: unit tests and scenario tests on
# loopback btrfs images (needs root). Ends with "N passed, N failed, N skipped".
#   scripts/test.sh             the normal build (in build/)
#   scripts/test.sh --sanitize  an AddressSanitizer + UBSan build with lib/'s
#                               asserts on (in build-asan/)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/deps.sh || exit 1
if [ "${1:-}" = --sanitize ]; then
	dir=build-asan
	san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
	# ENCIO_ASSERTS: lib/'s invariants abort here (base/invariant.h);
	# a tree configured without it is configured again
	grep -q ENCIO_ASSERTS "$dir/config.status" 2>/dev/null || rm -f "$dir/Makefile"
	bash scripts/build.sh "$dir" CFLAGS="-O1 -g $san -DENCIO_ASSERTS" LDFLAGS="$san" || exit 1
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
else
	dir=build
	bash scripts/build.sh "$dir" || exit 1
fi
rm -f "$dir"/test-suite.log
make -C "$dir" -s -j2 check
rc=$?
log=$dir/test-suite.log
count() { awk -v k="# $1:" '$1" "$2 == k {print $3}' "$log" 2>/dev/null | head -1; }
pass=$(count PASS); fail=$(count FAIL); skip=$(count SKIP); err=$(count ERROR); xpass=$(count XPASS)
fail=$(( ${fail:-0} + ${err:-0} + ${xpass:-0} ))
[ -s "$log" ] || fail=$((fail + 1))
[ $rc -ne 0 ] && [ "$fail" -eq 0 ] && fail=1
[ "$fail" -ne 0 ] && [ -s "$log" ] && cat "$log" | tail -200
echo "${pass:-0} passed, $fail failed, ${skip:-0} skipped"
[ "$fail" -eq 0 ]
