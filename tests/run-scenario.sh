#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# make check's runner for the scenario tests (SH_LOG_COMPILER). make check
# runs two tests at a time (scripts/test.sh), each under a shared lock; a
# test whose file holds the line "# encio-test: alone" takes the lock
# exclusively and runs with no other beside it: one that changes what the
# machine shares (vm.nr_hugepages), or that interrupts encio at a moment
# it finds by polling, which a busy machine can let pass.
# A hung test (a kernel deadlock leaves processes in D state) fails after
# 10 minutes instead of stalling the suite; the wait for the lock does not
# count.
lock=${TMPDIR:-/tmp}/encio-tests.lock
mode=--shared
grep -qx '# encio-test: alone' "$1" && mode=--exclusive
exec flock --close $mode "$lock" timeout -k 10 600 bash "$@"
