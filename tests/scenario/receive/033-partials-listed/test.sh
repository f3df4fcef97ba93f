#!/bin/bash
# encio receive --resume-token DEST, DEST a directory holding partials of
# receive -s, lists them: a line each with the name, the bytes of stream
# received and the token (the one --resume-token DEST/NAME prints, still
# bare), or with --format=json an array of objects. A directory holding
# none is an error, but for JSON (an empty array).
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 512M
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
run_check btrfs -q subvolume create "$SRC/v"
for i in $(seq 1 30); do random_bytes 200000 "f$i" >"$SRC/v/f$i"; done
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s2"
size=$("$ENCIO" -q send "$SRC/s1" | wc -c)
T=$TEST_TMP

"$ENCIO" -q send "$SRC/s2" | head -c $((size / 2)) |
	"$ENCIO" -q receive -s "$DST" 2>/dev/null && _fail "a cut stream received"
"$ENCIO" -q send "$SRC/s1" | head -c $((size / 3)) |
	"$ENCIO" -q receive -s "$DST" 2>/dev/null && _fail "a cut stream received"
t1=$("$ENCIO" receive --resume-token "$DST/s1") || _fail "no token of s1"
t2=$("$ENCIO" receive --resume-token "$DST/s2") || _fail "no token of s2"
[ "$(wc -l <<<"$t1")" = 1 ] && [ "${t1#*[[:space:]]}" = "$t1" ] ||
	_fail "DEST/NAME's token is not bare: $t1"

_log "text"
"$ENCIO" receive --resume-token "$DST" >"$T/list" || _fail "--resume-token DEST failed"
cat "$T/list"
[ "$(wc -l <"$T/list")" = 2 ] || _fail "not two lines"
IFS=$'\t' read -r n1 p1 k1 < <(sed -n 1p "$T/list")
IFS=$'\t' read -r n2 p2 k2 < <(sed -n 2p "$T/list")
[ "$n1" = s1 ] && [ "$k1" = "$t1" ] || _fail "line 1 is not s1's: $n1 $k1"
[ "$n2" = s2 ] && [ "$k2" = "$t2" ] || _fail "line 2 is not s2's: $n2 $k2"
[ "$p1" -gt 0 ] && [ "$p1" -lt "$p2" ] && [ "$p2" -le $((size / 2)) ] ||
	_fail "positions $p1 and $p2 are not what was received"
# the same with a trailing slash
[ "$("$ENCIO" receive --resume-token "$DST/")" = "$(cat "$T/list")" ] || _fail "DEST/ lists otherwise"

_log "json"
"$ENCIO" receive --resume-token "$DST" --format=json >"$T/json" || _fail "--format=json failed"
cat "$T/json"
python3 - "$T/json" "$t1" "$t2" "$p1" "$p2" <<'PY' || _fail "the JSON array is not the partials"
import json, sys
a = json.load(open(sys.argv[1]))
want = [{"name": "s1", "position": int(sys.argv[4]), "token": sys.argv[2]},
        {"name": "s2", "position": int(sys.argv[5]), "token": sys.argv[3]}]
sys.exit(a != want)
PY

_log "a directory without partials"
mkdir "$DST/empty"
run_mustfail "no partials" "$ENCIO" receive --resume-token "$DST/empty"
grep -q "no partial receive" <<<"$ERR_OUT" || _fail "unclear: $ERR_OUT"
[ "$("$ENCIO" receive --resume-token "$DST/empty" --format=json | tr -d ' \n')" = "[]" ] ||
	_fail "JSON of none is not []"
exit 0
