#!/bin/bash
# receive -s stopped by ENOSPC keeps what arrived: the working subvolume
# stays at the last command applied (not at the checkpoint its first
# command took), so that once space is freed the resume sends only the
# rest, and the result equals SRC.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
run_check btrfs -q subvolume create "$SRC/v"
for i in $(seq 1 16); do random_bytes $((10 * 1024 * 1024)) "r$i" >"$SRC/v/f$i"; done
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s"
whole=$("$ENCIO" -q send "$SRC/s" | wc -c)

# about 60 MiB left for a stream of 160 MiB
avail=$(df -B1 --output=avail "$DST" | tail -1)
run_check fallocate -l $((avail - 60 * 1024 * 1024)) "$DST/filler"
run_check sync
"$ENCIO" -q send "$SRC/s" 2>/dev/null | "$ENCIO" -q receive -s "$DST" 2>"$TEST_TMP/err" &&
	_fail "the receive did not run out of space"
_log "the receive said: $(cat "$TEST_TMP/err")"
grep -q "No space left" "$TEST_TMP/err" || _fail "no ENOSPC said"
grep -q "is full: what arrived is kept; make room in it first" "$TEST_TMP/err" || _fail "not told to make room first"
[ ! -e "$DST/s" ] || _fail "a subvolume cut by ENOSPC got its name"
token=$("$ENCIO" receive --resume-token "$DST/s") || _fail "no partial kept after ENOSPC"

run_check rm "$DST/filler"
run_check sync
"$ENCIO" -q send -t "$token" >"$TEST_TMP/rest" || _fail "send -t failed"
rest=$(stat -c %s "$TEST_TMP/rest")
_log "whole stream $whole B, resumed $rest B"
[ "$rest" -lt $((whole * 3 / 4)) ] ||
	_fail "the resume after ENOSPC sent $rest of $whole bytes: what arrived was not kept"
run_check "$ENCIO" -q receive -s -f "$TEST_TMP/rest" "$DST"
diff -r "$SRC/s" "$DST/s" >/dev/null || _fail "the resumed receive differs from SRC"
[ "$(btrfs property get -ts "$DST/s" ro)" = "ro=true" ] || _fail "not read-only"
_log "ok"
