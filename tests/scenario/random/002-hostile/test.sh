#!/bin/bash
# Random histories with a hostile user (tests/random/difftest.py, method
# h): user 4242 owns the receive -s directory in DEST and files of its own
# in SRC. Before and during root's runs it plants FIFOs, symlinks, hard
# links, files and directories at names like encio's working names,
# renames root's received snapshots onto them, forges a received UUID on
# a subvolume of its own, reads DEST, and rewrites its copies in DEST with
# their times put back before encio copy -rT runs again. Each seed cuts one
# step and resumes it: the resumed stream goes to btrfs receive first, in
# a private mount namespace with canary files at the stream's paths
# outside DEST, which must refuse it before any write. The result equals
# the source; the user's names, root's received subvolumes and every
# canary stay; no file not the user's holds the bytes it wrote; nothing
# hangs. Method a (encio send | btrfs receive) runs chrooted the same way.
# A few seeds, bounded in time; make soak SOAK_ARGS='--methods h' runs many.
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv
for t in python3 setfacl setfattr chattr fallocate unshare; do
	command -v $t >/dev/null || _not_run "needs $t"
done

# DIFFTEST_SEEDS overrides the seeds; after the budget no new seed starts,
# but the first DIFFTEST_MIN ones always run.
"$TOP_SRCDIR/tests/random/difftest.py" --encio "$ENCIO" --seeds "${DIFFTEST_SEEDS:-1-60}" \
	--methods a,h,diff --min-seeds "${DIFFTEST_MIN:-8}" --budget "${DIFFTEST_BUDGET:-60}" \
	${DIFFTEST_ARGS:-}
rc=$?
[ $rc -eq 0 ] || [ $rc -eq 77 ] || _fail "a hostile user's acts changed root's results (rerun one: tests/random/difftest.py --methods a,h --seed N -v --keep)"
exit $rc
