#!/bin/bash
# encio features on btrfs (text and JSON), on a read-only snapshot (reads
# not probed, not reported as failing), on tmpfs (not btrfs, exit 0) and
# without CAP_SYS_ADMIN (encoded I/O refused with EPERM, said so).
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 512M compress-force=zstd:3
SRC=$MNT
make_tmpfs tmp 16M
TMP=$MNT
compressible 300000 >"$SRC/file"
sync

_log "btrfs directory"
meminfo() { awk -v k="$1:" '$1 == k {print $2}' /proc/meminfo; }
total_before=$(meminfo HugePages_Total)
out=$(timeout 60 "$ENCIO" features "$SRC") || _fail "features on btrfs failed"
total_after=$(meminfo HugePages_Total)
echo "$out"
field() { echo "$out" | sed -n "s/^$1: *//p"; }
[ "$(field kernel)" = "$(uname -r)" ] || _fail "kernel release"
field filesystem | grep -q "^btrfs, mounted on $SRC" || _fail "filesystem line"
[ "$(field 'sector size')" = "$(stat -f -c %S "$SRC")" ] || _fail "sector size"
[ "$(field compression)" = "compress-force=zstd:3" ] || _fail "compression mount option"
[ "$(field CAP_SYS_ADMIN)" = yes ] || _fail "CAP_SYS_ADMIN as root"
echo "$out" | grep -qE "^encoded read +ioctl +works" || _fail "encoded read ioctl"
echo "$out" | grep -qE "^encoded write +ioctl +works" || _fail "encoded write ioctl"
echo "$out" | grep -qE "^encoded read +uring-fixed +works" || _fail "encoded read uring-fixed"
field 'fixed buffer flag' | grep -qE '^(honoured|ignored)$' || _fail "fixed flag not probed"
field 'uring writes on io-wq' | grep -qE '^(yes|no)$' || _fail "io-wq punting not probed"
want=$(cat /sys/fs/btrfs/features/send_stream_version 2>/dev/null || echo 1)
[ "$(field 'send stream version')" = "$want" ] || _fail "send stream version"
thp=$(sed 's/.*\[\(.*\)\].*/\1/' /sys/kernel/mm/transparent_hugepage/enabled)
[ "$(field THP)" = "$thp" ] || _fail "THP mode"
# The free count moves whenever any process takes or gives back hugetlb
# pages (another encio's buffers): the total, the page size, and a free
# count within the total are what stays.
read -r free _ _ total size _ <<<"$(field 'hugetlb pages' | tr -d '(')"
[ "$total" = "$total_before" ] || [ "$total" = "$total_after" ] ||
	_fail "hugetlb pages: total $total, /proc/meminfo $total_before then $total_after"
[ "$size" = "$(meminfo Hugepagesize)" ] || _fail "hugetlb page size $size"
[ -n "$free" ] && [ "$free" -le "$total" ] || _fail "hugetlb pages: $free free of $total"
field 'buffer backing' | grep -qE 'pages$' || _fail "buffer backing"
field 'defer taskrun' | grep -qE 'accepted$' || _fail "defer taskrun"
# No scratch file left behind.
[ "$(ls -A "$SRC")" = file ] || _fail "scratch file left: $(ls -A "$SRC")"

_log "a file, JSON"
json=$(timeout 60 "$ENCIO" features --format=json "$SRC/file") || _fail "features --format=json"
echo "$json" | python3 -m json.tool >/dev/null || _fail "invalid JSON: $json"
echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["btrfs"] is True and d["cap_sys_admin"] is True, d
assert d["encoded_read"]["ioctl"] == "works", d
assert d["encoded_write"]["ioctl"] == "works", d
assert d["fixed"] in ("honoured", "ignored"), d
assert d["compression"] == "compress-force=zstd:3", d
assert d["sector_size"] > 0 and d["send_stream_version"] >= 1, d
assert d["fs_type"] == "0x9123683e", d
assert d["uring_write_punted"] in (True, False), d
' || _fail "JSON content"

_log "a read-only snapshot: no scratch file, reads not probed"
btrfs -q subvolume create "$SRC/sub" || _fail "subvolume create"
compressible 300000 >"$SRC/sub/file"
btrfs -q subvolume snapshot -r "$SRC/sub" "$SRC/snap" || _fail "snapshot"
out=$(timeout 60 "$ENCIO" features "$SRC/snap") || _fail "features on a read-only snapshot"
echo "$out"
echo "$out" | grep -q "^encoded read .*EROFS" && _fail "encoded reads reported failing with EROFS"
[ "$(echo "$out" | grep -cE "^encoded read +(ioctl|uring|uring-fixed) +not probed")" = 3 ] ||
	_fail "encoded reads not said to be not probed"
echo "$out" | grep -qE "^encoded write +ioctl +EROFS" || _fail "encoded write not EROFS"
echo "$out" | grep -q "^probe: .*reads not probed" || _fail "probe line does not say why"
out=$(timeout 60 "$ENCIO" features "$SRC/snap/file") || _fail "features on a snapshot's file"
echo "$out" | grep -qE "^encoded read +ioctl +works" || _fail "encoded read of a snapshot's file"
btrfs -q subvolume delete "$SRC/snap" "$SRC/sub" >/dev/null

_log "tmpfs: not btrfs, exit 0"
out=$(timeout 60 "$ENCIO" features "$TMP") || _fail "features on tmpfs exit $?"
echo "$out"
echo "$out" | grep -q "not btrfs" || _fail "tmpfs not reported as not btrfs"
json=$(timeout 60 "$ENCIO" features --format=json "$TMP") || _fail "features json on tmpfs"
echo "$json" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["btrfs"] is False, d' ||
	_fail "tmpfs JSON"

_log "without CAP_SYS_ADMIN"
command -v setpriv >/dev/null || _not_run "needs setpriv"
out=$(setpriv --inh-caps=-sys_admin --bounding-set=-sys_admin \
	timeout 60 "$ENCIO" features "$SRC") || _fail "features without CAP_SYS_ADMIN failed"
echo "$out"
[ "$(field CAP_SYS_ADMIN)" = no ] || _fail "CAP_SYS_ADMIN not reported as missing"
echo "$out" | grep -qE "^encoded read +ioctl +EPERM" || _fail "encoded read not EPERM"
echo "$out" | grep -qE "^encoded write +ioctl +EPERM" || _fail "encoded write not EPERM"
# Every mode is tried for real, not only the ioctl.
[ "$(echo "$out" | grep -cE "^encoded (read|write) +(ioctl|uring|uring-fixed) +EPERM")" = 6 ] ||
	_fail "not every mode reports EPERM"
[ "$(field 'auto chooses')" = "read none, write none" ] || _fail "auto choice without capability"
json=$(setpriv --inh-caps=-sys_admin --bounding-set=-sys_admin \
	timeout 60 "$ENCIO" features --format=json "$SRC/file") || _fail "json without CAP_SYS_ADMIN"
echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["cap_sys_admin"] is False and d["encoded_read"]["ioctl"] == "EPERM", d
' || _fail "JSON without CAP_SYS_ADMIN"
exit 0
