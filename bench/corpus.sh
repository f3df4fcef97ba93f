# SPDX-License-Identifier: GPL-2.0
# Sourced by the benchmarks: two compress-force=zstd loopback images in
# /dev/shm (SRC, DST), removed on exit, and the two corpora as read-only
# snapshots SRC/many-snap and SRC/big-snap:
#   many: copies of /usr/share, /usr/bin and /usr/lib/x86_64-linux-gnu
#   big:  a tar of that and a 3 GiB sparse file holding 200 MiB of data
# Also manifest() and disk_usage(), which the scripts check results with,
# and churn(), the changes between the snapshots of a history.
# Expects $ENCIO and $top; drop and now come from scripts/loopback.sh.
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 1; }
[ -x "$ENCIO" ] || { echo "no encio at $ENCIO (bash scripts/build.sh build)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }

source "$top/scripts/loopback.sh"

# CORPUS_MB=N (environment, optional) makes "many" a sample of about N MiB
# of those trees, for trying a script out quickly: every directory and
# symlink, and files picked evenly through the trees until their sizes
# add up to N MiB (never more); "big" is then a tar of that sample.
[ -z "${CORPUS_MB:-}" ] || [[ $CORPUS_MB =~ ^[1-9][0-9]*$ ]] ||
	{ echo "CORPUS_MB must be a number of MiB" >&2; exit 2; }
corpus_sample()
{
	local to=$1 want=$(($2 * 1048576)) trees="usr/share usr/bin usr/lib/x86_64-linux-gnu" total

	# shellcheck disable=SC2086 # the trees are one word each
	total=$(cd / && find $trees -type f -printf '%s\n' | awk '{ t += $1 } END { print t + 0 }')
	# shellcheck disable=SC2086
	(cd / && find $trees -printf '%y %s %p\n') |
		awk -v want="$want" -v total="$total" '
			{ t = $1; s = $2; sub(/^[^ ]+ [^ ]+ /, "") }
			t != "f" { print; next }
			{ seen += s; if (kept + s <= want * seen / total) { kept += s; print } }' >"$work/corpus.list"
	(cd / && tar -cf - --no-recursion --verbatim-files-from -T "$work/corpus.list") | tar -xf - -C "$to"
}

# DIR: its entries (type, mode, owner, link count, size, symlink target,
# path; directories without size and link count) and the CRC-32 and size
# of each regular file, sorted.
manifest()
{
	(
		cd "$1" || exit 1
		find . ! -type d -printf '%y %m %U:%G %n %s %P -> %l\n'
		find . -type d -printf 'd %m %U:%G %P\n'
		find . -type f -print0 | xargs -0r -n 256 -P 2 cksum
	) | LC_ALL=C sort
}

# churn DIR STEP: about 2% of the files, a fixed pseudo-random choice per
# step (awk's generator seeded with STEP)
churn()
{
	local dir=$1 list=$work/churn.files n k i=0 f size

	(cd "$dir" && find usr -type f -size +0) |
		awk -v seed="$2" 'BEGIN { srand(seed) } { printf "%.9f\t%s\n", rand(), $0 }' |
		LC_ALL=C sort | cut -f2- >"$list"
	n=$(wc -l <"$list")
	k=$((n / 1000))
	((k > 0)) || k=1
	while read -r f; do
		if ((i < 5 * k)); then
			size=$(stat -c %s "$dir/$f")
			dd if=/dev/urandom of="$dir/$f" bs=4096 count=1 seek=$((size / 8192)) conv=notrunc status=none
		elif ((i < 10 * k)); then
			yes "appended line $i, step $2" | head -c 20000 >>"$dir/$f"
		elif ((i < 14 * k)); then
			mv "$dir/$f" "$dir/$f.r$2"
		elif ((i < 18 * k)); then
			rm "$dir/$f"
		elif ((i < 20 * k)); then
			yes "new file $i, step $2" | head -c $((i % 50000 + 100)) >"$dir/$f.n$2"
		else
			break
		fi
		i=$((i + 1))
	done <"$list"
	sync
}

# compsize's Disk Usage TOTAL of the paths, in bytes (empty if none)
disk_usage() { compsize -b "$@" 2>/dev/null | awk '$1 == "TOTAL" { print $3 }'; }

RSS=()
loopback_init encio-bench
loopback_image src 12G compress-force=zstd
loopback_image dst 12G compress-force=zstd
SRC=$work/src DST=$work/dst

echo "== building the corpora"
btrfs -q subvolume create "$SRC/many" >/dev/null
if [ -n "${CORPUS_MB:-}" ]; then
	corpus_sample "$SRC/many" "$CORPUS_MB"
else
	mkdir -p "$SRC/many/usr/lib"
	cp -a /usr/share /usr/bin "$SRC/many/usr/"
	cp -a /usr/lib/x86_64-linux-gnu "$SRC/many/usr/lib/"
fi
btrfs -q subvolume create "$SRC/big" >/dev/null
tar -cf "$SRC/big/corpus.tar" -C "$SRC/many" usr 2>/dev/null
truncate -s 3G "$SRC/big/sparse.img"
head -c 200M "$SRC/big/corpus.tar" | dd of="$SRC/big/sparse.img" bs=1M seek=1024 conv=notrunc status=none
sync
for c in many big; do
	btrfs -q subvolume snapshot -r "$SRC/$c" "$SRC/$c-snap" >/dev/null
	printf '  %-5s %s files, %s logical, %s on disk\n' "$c" \
		"$(find "$SRC/$c" -type f | wc -l)" "$(du -sh --apparent-size "$SRC/$c" | cut -f1)" \
		"$("$ENCIO" list -r "$SRC/$c" 2>/dev/null | awk '$1 == "TOTAL" {print $2}')"
done
sync

