#!/bin/bash
# encio diff in a tree deeper than BTRFS_IOC_INO_LOOKUP returns paths for
# (4080 bytes): the paths of directories that deep are built from their
# INODE_REFs, and a change at the bottom is listed under its whole path.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 1G
SRC=$MNT
run_check btrfs -q subvolume create "$SRC/v"
rel=""
for i in $(seq -w 1 20); do
	rel="${rel:+$rel/}d$i-$(printf 'x%.0s' $(seq 1 230))"
done
# deeper than PATH_MAX: made one level at a time from the level above
(cd "$SRC/v" && for c in ${rel//\// }; do mkdir "$c" && cd "$c" || exit 1; done && echo one >f) ||
	_fail "the deep tree was not made"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/a"
(cd "$SRC/v" && for c in ${rel//\// }; do cd "$c" || exit 1; done && echo two >>f && echo new >g) ||
	_fail "the deep files were not changed"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/b"
[ ${#rel} -gt 4080 ] || _fail "the tree is not deep enough: ${#rel}"

out=$("$ENCIO" diff "$SRC/a" "$SRC/b") || _fail "encio diff failed: $out"
# (times: a clock tick may not have passed since the file was made)
grep -qxE "M	F	$SRC/b/$rel/f	data,size(,times)?" <<<"$out" || _fail "the deep file's change is not listed: $out"
grep -qxF "+	F	$SRC/b/$rel/g	data" <<<"$out" || _fail "the deep new file is not listed: $out"
n=$("$ENCIO" diff --format=json "$SRC/a" "$SRC/b" |
	python3 -c 'import json, sys; print(sum(len(e["path"]) > 4080 for e in json.load(sys.stdin)["entries"]))') ||
	_fail "bad JSON"
[ "$n" -ge 2 ] || _fail "JSON has $n paths past 4080 bytes"
_log "ok"
