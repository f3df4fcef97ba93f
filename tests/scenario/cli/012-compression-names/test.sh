#!/bin/bash
# One spelling of each compression name: encio read prints the name encio
# list prints for the same extent (lzo too, whatever its segment size id),
# and encio write takes that name back; the sized lzo names are still
# accepted.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 256M compress-force=zstd
SRC=$MNT

# The first compressed extent of $1 as "offset compression" from encio list.
first_extent() { "$ENCIO" list "$1" | awk 'NF == 5 && $1 ~ /^[0-9]+$/ && $4 != "none" {print $1, $4; exit}'; }
value() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }

for alg in zlib zstd lzo; do
	_log "$alg: read prints list's name"
	run_check mount -o remount,compress-force=$alg "$SRC"
	compressible 200000 >"$SRC/$alg"
	sync
	set -- $(first_extent "$SRC/$alg")
	[ "${2:-}" = $alg ] || _fail "encio list: no $alg extent: $("$ENCIO" list "$SRC/$alg")"
	off=$1
	params=$(timeout 30 "$ENCIO" read -o "$off" -O "$TEST_TMP/ext" "$SRC/$alg") || _fail "read $alg at $off"
	echo "$params"
	[ "$(value "$params" compression)" = $alg ] ||
		_fail "encio read printed $(value "$params" compression), encio list $alg"
	json=$(timeout 30 "$ENCIO" read --format=json -o "$off" "$SRC/$alg" 2>&1 >/dev/null) ||
		_fail "read --format=json"
	echo "$json" | grep -q "\"compression_name\": *\"$alg\"" || _fail "JSON compression_name: $json"

	_log "$alg: write takes the printed name back"
	for name in $alg $([ $alg = lzo ] && echo lzo4k); do
		dst=$SRC/$alg-$name
		run_check timeout 30 "$ENCIO" write -o "$off" -c "$name" \
			-u "$(value "$params" unencoded_len)" -U "$(value "$params" unencoded_offset)" \
			-l "$(value "$params" len)" "$dst" <"$TEST_TMP/ext"
		cmp -i "$off" -n "$(value "$params" len)" "$SRC/$alg" "$dst" || _fail "$name: data differs"
		[ "$(first_extent "$dst")" = "$off $alg" ] || _fail "$name: written as $(first_extent "$dst")"
	done
done
exit 0
