#!/bin/bash
# A resumed stream (encio send -t) given to btrfs receive is refused before
# any write: full and incremental. btrfs receive skips a command it does
# not know, so a resumed stream that began as a plain one applied the rest
# against no subvolume, its paths taken from /. Here btrfs receive runs
# with / a tmpfs of the test's (a private mount namespace and chroot, no
# -C), canary files at the stream's paths there: they, / itself and DEST
# stay as they were, and the exit status is not 0. encio receive -s still
# takes both streams, and encio dump shows what they are.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v unshare >/dev/null && command -v chroot >/dev/null ||
	_not_run "needs unshare and chroot (util-linux, coreutils)"

make_btrfs src 1G
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
make_tmpfs root 64M
ROOT=$MNT
T=$TEST_TMP

run_check btrfs -q subvolume create "$SRC/v"
mkdir -p "$SRC/v/srv/d"
random_bytes 8000000 big >"$SRC/v/srv/big"
for i in 1 2 3; do echo "file $i" >"$SRC/v/srv/d/f$i"; done
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
random_bytes 4000000 big2 | dd of="$SRC/v/srv/big" bs=1M seek=2 conv=notrunc status=none
echo more >>"$SRC/v/srv/d/f1"
echo new >"$SRC/v/srv/d/f4"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s2"

# resumed RESUMED DEST SEND_ARGS...: the stream cut at half into
# receive -s DEST, and send -t's rest into RESUMED
resumed()
{
	local out=$1 dest=$2 whole
	shift 2
	whole=$("$ENCIO" -q send "$@" | wc -c)
	"$ENCIO" -q send "$@" 2>/dev/null | head -c $((whole / 2)) |
		"$ENCIO" -q receive -s --checkpoint 256K "$dest" 2>/dev/null &&
		_fail "a cut stream received"
	tok=$("$ENCIO" receive --resume-token "$dest/${!###*/}") || _fail "no token"
	"$ENCIO" -q send -t "$tok" >"$out" || _fail "send -t $*"
	_log "$* resumed: $(stat -c %s "$out") B of $whole B"
}

mkdir "$DST/full" "$DST/incr"
resumed "$T/full.resumed" "$DST/full" "$SRC/s1"
run_check "$ENCIO" -q receive -f <("$ENCIO" -q send "$SRC/s1") "$DST/incr"
resumed "$T/incr.resumed" "$DST/incr" -p "$SRC/s1" "$SRC/s2"

# / for btrfs receive: the system's /usr and /etc read-only, the rest
# the test's own
mkdir -p "$ROOT/usr" "$ROOT/etc" "$ROOT/proc" "$ROOT/dest" "$ROOT/srv/d"
for l in bin sbin lib lib64; do [ -e "/$l" ] && ln -s "usr/$l" "$ROOT/$l"; done
for f in big d/f1 d/f2 d/f3 d/f4; do echo canary >"$ROOT/srv/$f"; done
chmod 0711 "$ROOT"
touch -d '2001-02-03 04:05:06' "$ROOT" "$ROOT/srv" "$ROOT/srv/d" "$ROOT"/srv/d/* "$ROOT/srv/big"
canaries()
{
	# ctime: any change at all (reads move atime, the canaries' own)
	stat -c '%n %a %u %g %s %Y %Z' "$ROOT" "$ROOT/srv" "$ROOT/srv/d" "$ROOT"/srv/d/* "$ROOT/srv/big"
	md5sum "$ROOT/srv/big" "$ROOT"/srv/d/*
	ls -A "$ROOT"
}
canaries >"$T/canaries.before"

for kind in full incr; do
	_log "btrfs receive of the $kind stream resumed"
	mkdir "$DST/btrfs-$kind"
	unshare -m --propagation private /bin/bash -c '
		set -e
		R=$1 D=$2 S=$3
		for d in usr etc; do
			mount --rbind "/$d" "$R/$d"
			mount -o remount,bind,ro "$R/$d"
		done
		mount -t proc proc "$R/proc"
		mount --bind "$D" "$R/dest"
		set +e
		chroot "$R" btrfs receive /dest <"$S"
		echo "exit $?"
	' - "$ROOT" "$DST/btrfs-$kind" "$T/$kind.resumed" >"$T/$kind.out" 2>&1
	cat "$T/$kind.out"
	grep -q '^exit [1-9]' "$T/$kind.out" || _fail "btrfs receive took the $kind stream resumed"
	canaries >"$T/canaries.after"
	diff "$T/canaries.before" "$T/canaries.after" ||
		_fail "btrfs receive of the $kind stream resumed wrote outside DEST"
	[ -z "$(ls -A "$DST/btrfs-$kind")" ] ||
		_fail "btrfs receive of the $kind stream resumed wrote in DEST: $(ls -A "$DST/btrfs-$kind")"
done

_log "encio dump and encio receive -s take them"
"$ENCIO" dump -f "$T/incr.resumed" >"$T/incr.dump" || _fail "encio dump of the resumed stream"
head -1 "$T/incr.dump"
grep -q '^encio_resume .* version=2$' "$T/incr.dump" || _fail "encio dump: $(head -1 "$T/incr.dump")"
run_check "$ENCIO" -q receive -s -f "$T/full.resumed" "$DST/full"
run_check "$ENCIO" -q receive -s -f "$T/incr.resumed" "$DST/incr"
diff -r "$SRC/s1" "$DST/full/s1" || _fail "s1 resumed differs"
diff -r "$SRC/s2" "$DST/incr/s2" || _fail "s2 resumed differs"
