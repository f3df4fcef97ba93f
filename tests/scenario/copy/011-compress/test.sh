#!/bin/bash
# encio copy --compress from tmpfs into a btrfs mounted without compression:
# every algorithm and level bound, awkward sizes; the data reads back through
# the kernel's decoders, compsize shows the algorithm where the data shrinks
# and 'none' for random data; a non-btrfs destination is an error.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v compsize >/dev/null || _not_run "needs compsize (btrfs-compsize)"

# The extent types of a file, sorted: "none zstd".
types()
{
	compsize_bytes "$1" | awk '$1 != "TOTAL" { print $1 }' | sort | xargs
}

make_tmpfs src 256M
SRC=$MNT
make_btrfs dst 1G ""
DST=$MNT

for s in 1 3000 4097 131073 10485760; do
	compressible "$s" >"$SRC/text-$s"
done
random_bytes 1048576 r >"$SRC/random"
{
	compressible 300000
	random_bytes 300000 m
	compressible 300000
} >"$SRC/mixed"

for spec in zstd zstd:1 zstd:15 zlib zlib:1 zlib:9 lzo; do
	alg=${spec%%:*}
	out=$DST/$spec
	mkdir "$out"
	run_check "$ENCIO" -q copy --compress=$spec "$SRC"/* "$out/"
	for f in "$SRC"/*; do
		cmp "$f" "$out/$(basename "$f")" || _fail "$spec: $(basename "$f") differs"
	done
	for s in 131073 10485760; do
		line=$(compsize_bytes "$out/text-$s" | grep "^$alg ") ||
			_fail "$spec: text-$s has no $alg extents: $(compsize_bytes "$out/text-$s")"
		read -r _ disk uncomp _ <<<"$line"
		[ "$disk" -lt "$uncomp" ] || _fail "$spec: text-$s does not shrink: $line"
	done
	compsize_bytes "$out/text-4097" | grep -q "^$alg " || _fail "$spec: text-4097 not compressed"
	# A file under a sector is stored inline, compressed, like the kernel's.
	[ "$(types "$out/text-3000")" = "$alg" ] || _fail "$spec: text-3000 not $alg inline: $(types "$out/text-3000")"
	[ "$(types "$out/text-1")" = none ] || _fail "$spec: text-1 not plain: $(types "$out/text-1")"
	[ "$(types "$out/random")" = none ] ||
		_fail "$spec: random data was written encoded: $(compsize_bytes "$out/random")"
	[ "$(types "$out/mixed")" = "$(echo "$alg none" | xargs -n1 | sort | xargs)" ] ||
		_fail "$spec: mixed is not $alg and none: $(types "$out/mixed")"
done

_log "summary reports the ratio"
sum=$("$ENCIO" copy --compress=zstd "$SRC/text-10485760" "$DST/summary")
echo "$sum"
echo "$sum" | grep -qE "80 chunks compressed, 0 incompressible .* ratio [0-9.]+%" || _fail "no ratio in summary"
json=$("$ENCIO" copy --format=json --compress=zstd "$SRC/random" "$DST/summary-json")
echo "$json" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["chunks_incompressible"] == 8 and d["chunks_compressed"] == 0, d' ||
	_fail "bad JSON summary"

_log "copy -r --compress"
run_check "$ENCIO" -q copy -r --compress=zstd:9 "$SRC" "$DST/tree"
diff -r "$SRC" "$DST/tree" || _fail "tree differs"
compsize_bytes "$DST/tree" | grep -q "^zstd " || _fail "tree not compressed"

_log "errors"
make_tmpfs plain 64M
run_mustfail "compress into tmpfs" "$ENCIO" copy --compress=zstd "$SRC/text-131073" "$MNT/x"
echo "$ERR_OUT" | grep -q "compress.*$MNT/x" || _fail "error does not name the destination"
[ -z "$(ls -A "$MNT")" ] || _fail "files left in $MNT"
for bad in zstd:16 zstd:0 zlib:10 lzo:1 gzip zstd: ""; do
	"$ENCIO" copy --compress="$bad" "$SRC/text-1" "$DST/bad" >/dev/null 2>&1
	[ $? = 2 ] || _fail "--compress='$bad' is not a usage error"
done
exit 0
