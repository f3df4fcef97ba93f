#!/bin/bash
# Random histories of snapshots (tests/random/difftest.py), each carried
# by encio send | btrfs receive, encio send | encio receive, btrfs send |
# encio receive, an interrupted and retried encio send | encio receive,
# encio copy -r, encio copy -rT --subvolumes and encio send --subvolumes |
# encio receive (and their second runs), checked against the source and
# against btrfs send |
# btrfs receive; encio diff against the kernel's difference; and encio
# send's streams cut in their file and resumed by position (method cut),
# byte for byte the uncut stream. User 4242 owns files in SRC (reflink copies of root's,
# FIFOs, links), and btrfs receive of encio's streams runs chrooted with
# canaries at the stream's paths; its acts in DEST are random/002-hostile's. A few
# seeds here, bounded in time (an AddressSanitizer build runs encio 2-3x
# slower) but DIFFTEST_MIN at least; make soak runs many. A mismatch prints
# the seed, the method, the snapshot, the path, what differs and the
# history as a shell script.
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv
for t in python3 setfacl setfattr chattr fallocate unshare; do
	command -v $t >/dev/null || _not_run "needs $t"
done

# DIFFTEST_SEEDS overrides the seeds; the budget stops starting new seeds
# on a slow machine rather than running past make check's limits, after
# the first DIFFTEST_MIN.
"$TOP_SRCDIR/tests/random/difftest.py" --encio "$ENCIO" --seeds "${DIFFTEST_SEEDS:-1-80}" \
	--methods d,a,b,c,i,copy,sub,pipe,diff,cut --all-methods --min-seeds "${DIFFTEST_MIN:-12}" \
	--budget "${DIFFTEST_BUDGET:-110}" ${DIFFTEST_ARGS:-}
rc=$?
[ $rc -eq 0 ] || [ $rc -eq 77 ] || _fail "random histories differ (rerun one: tests/random/difftest.py --seed N -v --keep --minimize 300)"
exit $rc
