#!/bin/bash
# A move of a subvolume whose root directory is nocow (+C), then btrfs send
# -p | btrfs receive of a later snapshot where a copy-on-write file was
# cloned into a new one. btrfs receive makes each new file in the
# subvolume's root first (oINO-GEN-N): under a nocow root the file is nocow,
# and the kernel refuses a clone from a copy-on-write file (Invalid
# argument). copy --subvolumes and receive keep the root's +C as SRC has it,
# and with --no-root-nocow leave it off (encio-copy(8), encio-receive(8)):
# btrfs receive then takes the difference, every other flag kept.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v lsattr >/dev/null || _not_run "needs lsattr (e2fsprogs)"

make_btrfs src 512M
SRC=$MNT
# one filesystem each: btrfs receive takes the first parent of the UUID
make_btrfs keep 512M
KEEP=$MNT
make_btrfs copy 512M
COPY=$MNT
make_btrfs recv 512M
RECV=$MNT

# tree_flags DIR: the chattr flags of every file and directory below DIR
tree_flags()
{
	(cd "$1" && find . -mindepth 1 \( -type f -o -type d \) -print0 |
		LC_ALL=C sort -z | xargs -0r lsattr -d -- |
		awk '{ print $2, $1 }')
}

root_flags()
{
	lsattr -d "$1" | cut -d' ' -f1 | tr -d -
}

run_check btrfs -q subvolume create "$SRC/sv"
V=$SRC/sv
mkdir "$V/d" "$V/nocow"
random_bytes 300000 cow >"$V/d/cow"
chattr +C "$V" "$V/nocow"
random_bytes 70000 nc >"$V/nocow/f"
random_bytes 50000 rf >"$V/rootfile"
[ "$(root_flags "$V")" = C ] || _fail "SRC: the root did not take +C"
[ "$(root_flags "$V/rootfile")" = C ] || _fail "SRC: a file in the root is not nocow"
[ -z "$(root_flags "$V/d/cow")" ] || _fail "SRC: the file made before +C is nocow"
sync
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s1"

_log "copy --subvolumes keeps the root's +C by default"
run_check "$ENCIO" -q copy -rT --subvolumes "$SRC" "$KEEP"
[ "$(root_flags "$KEEP/s1")" = C ] || _fail "the root lost +C"
_log "copy --subvolumes --no-root-nocow"
run_check "$ENCIO" -q copy -rT --subvolumes --no-root-nocow "$SRC" "$COPY"
_log "encio send | encio receive --no-root-nocow"
"$ENCIO" -q send "$SRC/s1" | "$ENCIO" -q receive --no-root-nocow "$RECV" ||
	_fail "encio send | encio receive --no-root-nocow"

# in SRC, a copy-on-write directory: the clone is taken
run_check cp --reflink=always "$V/d/cow" "$V/d/new"
sync
run_check btrfs -q subvolume snapshot -r "$V" "$SRC/s2"
btrfs send -q -p "$SRC/s1" "$SRC/s2" >"$TEST_TMP/diff" ||
	_fail "btrfs send -p"

# progs_diff DIR: btrfs receive of the difference s1 -> s2 into DIR
progs_diff()
{
	echo "+ btrfs receive $1 < s1..s2"
	btrfs receive "$1" <"$TEST_TMP/diff"
}

_log "btrfs receive into the move whose root kept +C refuses the clone"
progs_diff "$KEEP" || echo "(refused: the reason for --no-root-nocow)"
[ -e "$KEEP/s2" ] && run_check btrfs -q subvolume delete "$KEEP/s2"
# encio receive takes it: the new file's inherited nocow goes while empty
"$ENCIO" -q receive "$KEEP" <"$TEST_TMP/diff" ||
	_fail "encio receive into the move whose root kept +C"
diff -r "$V" "$KEEP/s2" || _fail "$KEEP/s2: content differs"

_log "btrfs receive into the move made with --no-root-nocow"
for s in sv s1; do
	[ -z "$(root_flags "$COPY/$s")" ] || _fail "$COPY/$s: the root kept +C"
done
progs_diff "$COPY" || _fail "btrfs receive into the move"
# btrfs receive drops flags: only content compared for s2 here
diff -r "$V" "$COPY/s2" || _fail "$COPY/s2: content differs"
[ "$(tree_flags "$SRC/s1")" = "$(tree_flags "$COPY/s1")" ] ||
	_fail "$COPY/s1: flags differ"

_log "btrfs receive into what receive --no-root-nocow made"
[ -z "$(root_flags "$RECV/s1")" ] || _fail "$RECV/s1: the root kept +C"
[ "$(tree_flags "$SRC/s1")" = "$(tree_flags "$RECV/s1")" ] ||
	_fail "$RECV/s1: flags differ"
progs_diff "$RECV" || _fail "btrfs receive into the received snapshot"
diff -r "$V" "$RECV/s2" || _fail "$RECV/s2: content differs"
