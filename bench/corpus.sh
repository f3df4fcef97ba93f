# SPDX-License-Identifier: GPL-2.0
# Sourced by the benchmarks: two compress-force=zstd loopback images in
# /dev/shm (SRC, DST), removed on exit, and the two corpora of the tree
# issue as read-only snapshots SRC/many-snap and SRC/big-snap:
#   many: copies of /usr/share, /usr/bin and /usr/lib/x86_64-linux-gnu
#   big:  a tar of that and a 3 GiB sparse file holding 200 MiB of data
# Expects $ENCIO and $top; drop and now come from scripts/loopback.sh.
# Also the timing of the runs: run_start before one, run_end KEY after it
# (sync included) adds its time and busy CPU time to TIMES[KEY] and
# CPUS[KEY] and leaves them in RUN_T and RUN_C; med LIST is their median.

[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 1; }
[ -x "$ENCIO" ] || { echo "no encio at $ENCIO (bash scripts/build.sh build)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }

source "$top/scripts/loopback.sh"

declare -A TIMES CPUS
RSS=()

run_start()
{
	loopback_reformat dst
	drop
	_run_c0=$(cpu_busy)
	_run_t0=$(now)
}

run_end()
{
	sync
	RUN_T=$(awk -v a="$_run_t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
	RUN_C=$(awk -v a="$_run_c0" -v b="$(cpu_busy)" 'BEGIN { printf "%.2f", b - a }')
	TIMES[$1]+="$RUN_T "
	CPUS[$1]+="$RUN_C "
}

med() { echo $1 | tr ' ' '\n' | median; }
loopback_init encio-bench
loopback_image src 12G compress-force=zstd
loopback_image dst 12G compress-force=zstd
SRC=$work/src DST=$work/dst

echo "== building the corpora"
btrfs -q subvolume create "$SRC/many" >/dev/null
mkdir -p "$SRC/many/usr/lib"
cp -a /usr/share /usr/bin "$SRC/many/usr/"
cp -a /usr/lib/x86_64-linux-gnu "$SRC/many/usr/lib/"
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

