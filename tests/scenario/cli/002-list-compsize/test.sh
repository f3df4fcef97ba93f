#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# encio list: totals equal compsize -b byte for byte (per type and TOTAL),
# and the kinds of ranges (hole, prealloc, inline) are where they should be,
# on zlib, lzo and zstd (compress-force) images.

. "$(dirname "$0")/../../../common.sh"

require_root
command -v compsize >/dev/null || _not_run "needs compsize (btrfs-compsize)"
command -v python3 >/dev/null || _not_run "needs python3"
command -v fallocate >/dev/null || _not_run "needs fallocate"

# compare_totals PATH...: encio list -r totals must equal compsize -b's rows.
compare_totals()
{
	local json=$TEST_TMP/list.json cs=$TEST_TMP/compsize.txt

	echo "+ compare with compsize: $*"
	"$ENCIO" list -r --format=json "$@" >"$json" ||
		_fail "encio list failed: $*"
	compsize -b "$@" >"$cs" 2>&1
	python3 - "$json" "$cs" <<'PY' || _fail "totals differ from compsize: $*"
import json, sys
out = json.load(open(sys.argv[1]))
types = out["totals"]["types"]
rows = {}
for line in open(sys.argv[2]):
    f = line.split()
    if len(f) == 5 and f[0] != "Type":
        rows[f[0]] = tuple(int(x) for x in f[2:5])
bad = 0
for name, row in types.items():
    mine = (row["disk"], row["uncompressed"], row["referenced"])
    # compsize hides rows with nothing uncompressed (referenced may not be 0)
    if name not in rows and mine[1] == 0:
        continue
    theirs = rows.get(name, (0, 0, 0))
    flag = "" if mine == theirs else "   <-- differs"
    print("  %-9s encio %-36s compsize %s%s" % (name, mine, theirs, flag))
    bad += mine != theirs
for name in rows:
    if name not in types:
        print("  compsize row %s unknown to encio" % name)
        bad += 1
sys.exit(1 if bad else 0)
PY
}

# kinds FILE: the kinds of its ranges, consecutive repeats folded.
kinds()
{
	"$ENCIO" list --format=json "$1" | python3 -c '
import json, sys
k = [e["kind"] for e in json.load(sys.stdin)["files"][0]["extents"]]
print(" ".join(x for i, x in enumerate(k) if i == 0 or k[i - 1] != x))'
}

# compressions FILE: the set of compression names of its non-hole ranges.
compressions()
{
	"$ENCIO" list --format=json "$1" | python3 -c '
import json, sys
e = json.load(sys.stdin)["files"][0]["extents"]
print(" ".join(sorted({x["compression"] for x in e if x["kind"] != "hole"})))'
}

check_kinds()
{
	local file=$1 want=$2 got

	got=$(kinds "$file")
	echo "  kinds $(basename "$file"): $got"
	[ "$got" = "$want" ] || _fail "$file: kinds '$got', expected '$want'"
}

check_compressions()
{
	local file=$1 want=$2 got

	got=$(compressions "$file")
	[ "$got" = "$want" ] || _fail "$file: compression '$got', expected '$want'"
}

make_files()
{
	local d=$1

	mkdir -p "$d"
	# the last 1000 bytes written back on their own: a range of one
	# sector, which btrfs never compresses (written with the rest, a
	# writeback that started early could join it to a compressed range)
	compressible $((1024 * 1024 + 1000)) >"$TEST_TMP/comp"
	head -c 1M "$TEST_TMP/comp" >"$d/comp"
	sync "$d/comp"
	tail -c 1000 "$TEST_TMP/comp" >>"$d/comp"
	random_bytes $((512 * 1024)) rand >"$d/rand"
	{
		compressible $((256 * 1024))
		random_bytes $((256 * 1024)) mixed
		compressible $((256 * 1024))
	} >"$d/mixed"

	# holes at the start, in the middle and at the end
	truncate -s 2M "$d/sparse"
	compressible $((128 * 1024)) |
		dd of="$d/sparse" bs=64K seek=4 conv=notrunc status=none
	compressible $((128 * 1024)) |
		dd of="$d/sparse" bs=64K seek=16 conv=notrunc status=none

	# prealloc around written data, and prealloc past EOF
	fallocate -l 1M "$d/prealloc"
	compressible $((64 * 1024)) |
		dd of="$d/prealloc" bs=64K seek=8 conv=notrunc status=none
	compressible $((100 * 1024)) >"$d/prealloc-eof"
	fallocate -n -o 1M -l 1M "$d/prealloc-eof"

	# inline: compressed and not
	compressible 300 >"$d/inline"
	random_bytes 300 inl >"$d/inline-rand"

	# bookends: 1 MiB written, then 4 KiB in the middle overwritten
	compressible $((1024 * 1024)) >"$d/bookend"
	sync
	random_bytes 4096 over |
		dd of="$d/bookend" bs=4K seek=100 conv=notrunc status=none

	sync
	# shared extents
	cp --reflink=always "$d/comp" "$d/comp.clone"
	cp --reflink=always "$d/bookend" "$d/bookend.clone"
	cp --reflink=always "$d/mixed" "$d/mixed.clone"
	compressible $((8 * 1024)) |
		dd of="$d/mixed.clone" bs=4K seek=10 conv=notrunc status=none
	sync
}

# NAME ALGORITHM MKFS_OPTIONS: the last one has explicit hole items
for config in "zlib zlib" "lzo lzo" "zstd zstd" "holes zstd -O ^no-holes"; do
	set -- $config
	name=$1 alg=$2
	shift 2
	_log "compress-force=$alg mkfs $*"
	make_btrfs "$name" 512M "compress-force=$alg" "$@"
	d=$MNT/d
	make_files "$d"
	if [ "$name" = zstd ]; then
		# more extents than one 128 KiB search buffer holds (85
		# bytes an item): the map takes several searches
		compressible $((256 * 1024 * 1024)) >"$d/big"
		sync
		n=$("$ENCIO" list --format=json "$d/big" |
			python3 -c 'import json,sys; print(json.load(sys.stdin)["totals"]["refs"])')
		[ "$n" -ge 2048 ] || _fail "big: $n extents, expected 2048"
		compare_totals "$d/big"
	fi
	# the set of files the checks below name
	for f in comp rand mixed sparse prealloc prealloc-eof inline \
		inline-rand bookend comp.clone mixed.clone; do
		compare_totals "$d/$f"
	done
	compare_totals "$d/comp" "$d/comp.clone"
	compare_totals "$d/bookend" "$d/bookend.clone" "$d/comp"
	compare_totals "$d/mixed" "$d/mixed.clone" "$d/rand" "$d/inline"
	compare_totals "$d"
	compare_totals "$MNT"

	both=$(printf '%s\n' none "$alg" | sort | xargs)
	check_kinds "$d/comp" "regular"
	# the 1000-byte tail, written back alone, is not compressed
	check_compressions "$d/comp" "$both"
	check_compressions "$d/rand" "none"
	check_compressions "$d/mixed" "$both"
	check_kinds "$d/sparse" "hole regular hole regular hole"
	check_kinds "$d/prealloc" "prealloc regular prealloc"
	check_kinds "$d/prealloc-eof" "regular prealloc"
	check_kinds "$d/inline" "inline"
	check_compressions "$d/inline" "$alg"
	check_kinds "$d/inline-rand" "inline"
	check_kinds "$d/bookend" "regular"

	# the text listing carries the same totals, in pretty sizes
	run_check "$ENCIO" list -r "$d" >"$TEST_TMP/list.txt"
	grep -q '^TOTAL ' "$TEST_TMP/list.txt" || _fail "no TOTAL row in text"
	grep -q "^$alg " "$TEST_TMP/list.txt" || _fail "no $alg row in text"
done

_log "all totals equal compsize"
exit 0
