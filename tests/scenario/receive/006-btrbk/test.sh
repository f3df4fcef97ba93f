#!/bin/bash
# Debian's btrbk backs up through encio: its btrfs-progs-btrbk backend runs
# btrfs-send and btrfs-receive as programs, and both are links to encio
# (run under those names, encio is encio send and encio receive). Five
# runs with changes between them: every backup is exact, and every run
# after the first is incremental (btrbk passes -p; the backup has a parent).
#
# Everything btrbk runs comes from a make install into a prefix first in
# PATH. The sending side is $BTRBK_SEND: "encio" (default) or "btrfs", which runs
# 'btrfs send --compressed-data' (btrfs-progs sending to encio receive).
source "$(dirname "$0")/../../../common.sh"
require_root
command -v btrbk >/dev/null || _not_run "needs btrbk (scripts/deps.sh installs it)"
BTRBK_SEND=${BTRBK_SEND:-encio}

make_btrfs src 256M compress-force=zstd
SRC=$MNT
make_btrfs dst 256M
DST=$MNT
run_check btrfs -q subvolume create "$SRC/data"
mkdir "$SRC/snapshots" "$DST/backups"

# The programs btrbk's btrfs-progs-btrbk backend runs, from a make install
# into a prefix of its own: encio and its btrfs-send and btrfs-receive
# links, and the btrfs subcommands Debian's btrfs-progs does not ship as
# programs (what --enable-btrfs-progs-links adds to make install).
INST=$TEST_TMP/inst
make -s -C "$TOP_BUILDDIR" install install-btrfs-progs-links prefix="$INST" >"$TEST_TMP/install.log" 2>&1 ||
	_fail "make install: $(tail -5 "$TEST_TMP/install.log")"
BIN=$INST/bin
for prog in btrfs-send btrfs-receive btrfs-subvolume-list btrfs-subvolume-show \
	btrfs-subvolume-snapshot btrfs-subvolume-delete btrfs-filesystem-usage btrfs-qgroup-destroy; do
	[ -x "$BIN/$prog" ] || _fail "make install made no $prog"
done
[ -f "$INST/share/doc/encio/btrbk.conf.example" ] || _fail "no btrbk.conf.example installed"
if [ "$BTRBK_SEND" = btrfs ]; then
	rm "$BIN/btrfs-send"
	printf '#!/bin/sh\nexec btrfs send --compressed-data "$@"\n' >"$BIN/btrfs-send"
	chmod +x "$BIN/btrfs-send"
fi
export PATH=$BIN:$PATH

cat >"$TEST_TMP/btrbk.conf" <<END
backend btrfs-progs-btrbk
timestamp_format long-iso
snapshot_preserve_min all
target_preserve_min all
lockfile $TEST_TMP/btrbk.lock
transaction_log $TEST_TMP/btrbk.tlog
volume $SRC
  snapshot_dir snapshots
  subvolume data
    target $DST/backups
END

# churn RUN: change the source between runs.
churn()
{
	local d=$SRC/data
	case $1 in
	1)
		compressible 400000 >"$d/text"
		random_bytes 300000 "r1" >"$d/random"
		mkdir -p "$d/dir/sub"
		echo one >"$d/dir/sub/f"
		ln -s dir/sub/f "$d/link"
		setfattr -n user.run -v 1 "$d/dir/sub/f"
		mkfifo "$d/fifo"
		;;
	2)
		compressible 100000 >>"$d/text"
		cp --reflink=always "$d/random" "$d/dir/random-clone"
		echo two >>"$d/dir/sub/f"
		mv "$d/link" "$d/dir/link"
		setfattr -n user.run -v 2 "$d/dir/sub/f"
		;;
	3)
		rm "$d/random"
		mv "$d/dir/sub" "$d/moved"
		dd if=/dev/zero of="$d/text" bs=4096 seek=10 count=3 conv=notrunc status=none
		truncate -s 1000000 "$d/sparse"
		chmod 0600 "$d/text"
		;;
	4)
		random_bytes 200000 "r4" >"$d/dir/random-clone"
		ln "$d/text" "$d/hardlink"
		setfattr -x user.run "$d/moved/f"
		rmdir "$d/dir/sub" 2>/dev/null
		for i in $(seq 1 50); do echo "$i" >"$d/dir/n$i"; done
		;;
	esac
	sync
}

for run in 1 2 3 4 5; do
	churn $run
	_log "btrbk run $run"
	btrbk -c "$TEST_TMP/btrbk.conf" -l debug run >"$TEST_TMP/run$run.log" 2>&1
	rc=$?
	cat "$TEST_TMP/run$run.log" | grep -v '^\[' | tail -20
	[ $rc -eq 0 ] || {
		cat "$TEST_TMP/run$run.log"
		_fail "btrbk run $run: exit $rc"
	}
	grep -q "btrfs-receive" "$TEST_TMP/run$run.log" || _fail "run $run: btrfs-receive not run"
	snaps=$(ls "$SRC/snapshots" | wc -l)
	backups=$(ls "$DST/backups" | wc -l)
	[ "$snaps" = $run ] && [ "$backups" = $run ] ||
		_fail "run $run: $snaps snapshots, $backups backups"
	if [ $run -gt 1 ]; then
		grep -E "btrfs-send.* -p " "$TEST_TMP/run$run.log" >/dev/null ||
			_fail "run $run: btrbk did not send incrementally"
	fi
done

_log "every backup is exact, every one after the first incremental"
first=
for snap in $(ls "$SRC/snapshots"); do
	b=$DST/backups/$snap
	[ -d "$b" ] || _fail "no backup of $snap"
	# (diff cannot compare fifos: tree_stat below covers them.)
	diff -r --no-dereference -x fifo "$SRC/snapshots/$snap" "$b" || _fail "$snap: backup differs"
	[ "$(tree_stat "$SRC/snapshots/$snap")" = "$(tree_stat "$b")" ] ||
		_fail "$snap: backup metadata differs"
	[ "$(tree_xattrs "$SRC/snapshots/$snap")" = "$(tree_xattrs "$b")" ] ||
		_fail "$snap: backup xattrs differ"
	show=$(btrfs subvolume show "$b")
	echo "$show" | grep -qE 'Flags:.*readonly' || _fail "$snap: backup not read-only"
	echo "$show" | grep -qE 'Received UUID:[[:space:]]+[0-9a-f-]{36}' || _fail "$snap: backup not received"
	parent=$(echo "$show" | sed -n 's/^[[:space:]]*Parent UUID:[[:space:]]*//p')
	if [ -z "$first" ]; then
		first=$snap
		[ "$parent" = - ] || _fail "$snap: the first backup has a parent"
	else
		[ "$parent" != - ] || _fail "$snap: received in full, not incrementally"
	fi
done
[ "$(ls "$SRC/snapshots" | wc -l)" = 5 ] || _fail "not 5 snapshots"
# The destination is mounted without compression: zstd extents in the
# backups were written encoded by the receiver.
if command -v compsize >/dev/null; then
	compsize "$DST/backups/$first/text" | grep -q '^zstd' ||
		_fail "the backup's extents were not written encoded"
fi
