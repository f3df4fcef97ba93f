#!/bin/bash
# SIGINT stops copy -r --subvolumes at once while it waits for the
# kernel's difference of its next subvolume, which the thread ahead is
# still making (a snapshot with 60,000 new files after an empty one): the
# wait and the pass under way end, the copy exits 130 with the complete
# subvolumes kept, and a rerun completes the move.
# encio-test: alone
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 2G
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/v"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
python3 - "$SRC/v" <<'PY' || _fail "making the files"
import os, sys
for d in range(60):
    os.mkdir(f"{sys.argv[1]}/d{d}")
    for i in range(1000):
        os.close(os.open(f"{sys.argv[1]}/d{d}/f{i}", os.O_CREAT | os.O_WRONLY, 0o644))
PY
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s2"

make_btrfs dst 2G
DST=$MNT
env --default-signal=INT "$ENCIO" copy -rT --subvolumes "$SRC" "$DST/x" >"$TEST_TMP/copy.out" 2>&1 &
pid=$!
sleep 1
start=$(date +%s%N)
kill -INT "$pid"
wait "$pid"
rc=$?
took=$((($(date +%s%N) - start) / 1000000))
cat "$TEST_TMP/copy.out"
echo "exit status $rc, $took ms after SIGINT"
[ "$rc" = 130 ] || _fail "exit status $rc after SIGINT, not 130"
[ "$took" -lt 3000 ] || _fail "the copy took $took ms to stop"
run_check "$ENCIO" -q copy -rT --subvolumes "$SRC" "$DST/x"
diff -r "$SRC/s2" "$DST/x/s2" || _fail "the rerun did not complete the move"
