#!/bin/bash
# Set up everything and show encio at work on loopback btrfs images it makes
# in tmpfs: a compressed source, a plain destination, encio copy against cp.
# Needs root. Everything it mounts is unmounted and detached on exit.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash scripts/deps.sh || exit 1
bash scripts/build.sh build || exit 1
ENCIO=$top/build/encio

[ "$(id -u)" = 0 ] || { echo "the demo needs root (loop devices, mounts)" >&2; exit 1; }
source "$top/scripts/loopback.sh"
loopback_init encio-demo
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
timed()
{
	local label=$1 t0 t1
	shift
	sync
	echo 3 >/proc/sys/vm/drop_caches
	t0=$(date +%s.%N)
	"$@" >/dev/null || exit 1
	sync
	t1=$(date +%s.%N)
	awk -v l="$label" -v a="$t0" -v b="$t1" 'BEGIN { printf "  %-34s %6.3f s\n", l, b - a }'
}

loopback_image src 3G compress-force=zstd
loopback_image dst 3G
SRC=$work/src DST=$work/dst

step "Building a corpus on a compress-force=zstd btrfs image"
tar -cf "$SRC/corpus.tar" -C / usr/share usr/include 2>/dev/null
truncate -s 2G "$SRC/vm.img"
head -c 200M "$SRC/corpus.tar" | dd of="$SRC/vm.img" bs=1M seek=512 conv=notrunc status=none
sync
ls -lhs "$SRC"
"$ENCIO" list "$SRC/corpus.tar" "$SRC/vm.img" | sed -n '/^Processed/,$p'

step "encio -v copy: compressed extents moved encoded"
"$ENCIO" -v copy "$SRC/corpus.tar" "$SRC/vm.img" "$DST/" || exit 1
cmp "$SRC/corpus.tar" "$DST/corpus.tar" && cmp "$SRC/vm.img" "$DST/vm.img" &&
	echo "  content identical (cmp)"
"$ENCIO" list "$DST/corpus.tar" "$DST/vm.img" | sed -n '/^Processed/,$p'

step "Time, caches dropped, into a plain btrfs (the same filesystem for each)"
rm -f "$DST"/*
timed "cp (kernel compresses nothing)" cp "$SRC/corpus.tar" "$DST/cp.tar"
timed "encio --io=ioctl copy" "$ENCIO" --io=ioctl copy "$SRC/corpus.tar" "$DST/ioctl.tar"
timed "encio copy (auto)" "$ENCIO" copy "$SRC/corpus.tar" "$DST/auto.tar"
for f in "$DST"/*.tar; do
	printf '  %-12s on disk: %s\n' "$(basename "$f")" "$("$ENCIO" list "$f" | awk '$1 == "TOTAL" {print $3}')"
done
# measured: their room is the later steps' (cp's copy alone is the
# corpus's whole size, and the corpus grows with what /usr holds)
rm -f "$DST"/*.tar

step "encio copy -r: a whole tree, compressed extents kept encoded"
mkdir "$SRC/tree"
cp -a /usr/share/doc /usr/include "$SRC/tree/" 2>/dev/null
sync
"$ENCIO" copy -r "$SRC/tree" "$DST/tree" || exit 1
diff -r --no-dereference "$SRC/tree" "$DST/tree" && echo "  trees identical (diff -r --no-dereference)"

step "btrfs send --compressed-data | encio receive"
btrfs -q subvolume create "$SRC/vol"
cp -a "$SRC/corpus.tar" "$SRC/vol/"
btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/snap"
btrfs -q send --compressed-data "$SRC/snap" | "$ENCIO" receive "$DST" || exit 1
cmp "$SRC/snap/corpus.tar" "$DST/snap/corpus.tar" && echo "  received content identical (cmp)"
btrfs subvolume show "$DST/snap" | grep -E "Received UUID|Flags" | sed 's/^[[:space:]]*/  /'
"$ENCIO" list "$DST/snap/corpus.tar" | awk '$1 == "zstd" || $1 == "TOTAL"' | sed 's/^/  /'

step "encio send | encio receive: a subvolume as a btrfs send stream"
btrfs -q subvolume create "$SRC/tree-vol"
cp -a "$SRC/tree/." "$SRC/tree-vol/"
mkdir "$DST/recv"
"$ENCIO" send --snapshot "$SRC/tree-vol" | "$ENCIO" receive "$DST/recv" || exit 1
diff -r --no-dereference "$SRC/tree-vol" "$DST/recv/tree-vol" && echo "  trees identical (diff -r --no-dereference)"

step "Summary"
"$ENCIO" copy "$SRC/corpus.tar" "$SRC/vm.img" "$DST/"
