#!/bin/bash
# The random histories that found a bug beyond the seeds random/001 runs,
# each with the method that met it, run on every check so that none comes
# back. SEED:METHODS, and what each found:
#   67:b     send -p read the tail of a file cut short from a directory
#            its orphan name resolved to (EISDIR: the send failed)
#   81:sub   copy --subvolumes: a snapshot's directory took the times a
#            nested subvolume's snapshot in SRC's append-only directory left
#   126:sub  send -p from a later parent: a file cut short inside a sector
#            got zeros past the parent's size (wrong data, exit 0)
#   168:sub  copy --subvolumes: a subvolume holding a nested one copied
#            from an old snapshot, 23% more room than SRC; then, by the
#            moment the first run is killed: every extent decoded under a
#            nocow root (the probe's file took nocow), a partial no rerun
#            took (killed before its mark, or between marks), a snapshot
#            sent again what the live subvolume's copy held (+2.9%)
#   781:b    receive: a directory append-only in the parent and made
#            immutable too lost its immutable flag (exit 0)
source "$(dirname "$0")/../../../common.sh"
require_root
require_setpriv
for t in python3 setfacl setfattr chattr fallocate unshare compsize; do
	command -v $t >/dev/null || _not_run "needs $t"
done

failed=()
for sm in 67:b 81:sub 126:sub 168:sub 781:b; do
	seed=${sm%%:*}
	"$TOP_SRCDIR/tests/random/difftest.py" --encio "$ENCIO" --seed "$seed" \
		--methods "${sm#*:}" || failed+=("$sm")
done
[ ${#failed[@]} -eq 0 ] || _fail "seeds that found bugs differ again: ${failed[*]}"
echo "PASS: $TEST_NAME"
