#!/bin/bash
# Run as btrfs-send and btrfs-receive (links to encio, as btrbk's
# btrfs-progs-btrbk backend runs them), encio prints what btrfs send and
# btrfs receive print, on the same streams: "At subvol PATH" from send on
# stderr, "At subvol NAME" from receive on stderr and "At snapshot NAME" on
# stdout, nothing with -q, no summary of its own unless -v; --version
# answers. Under its own name, encio receive prints nothing on stdout but
# "At snapshot", its summary going to stderr.
source "$(dirname "$0")/../../../common.sh"
require_root

make_btrfs src 512M compress
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
mkdir "$TEST_TMP/bin"
ln -s "$ENCIO" "$TEST_TMP/bin/btrfs-send"
ln -s "$ENCIO" "$TEST_TMP/bin/btrfs-receive"

run_check btrfs -q subvolume create "$SRC/vol"
run_check head -c 300K /dev/urandom >"$SRC/vol/f"
run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/s1"
run_check head -c 100K /dev/urandom >"$SRC/vol/g"
run_check btrfs -q subvolume snapshot -r "$SRC/vol" "$SRC/s2"

# One send and one receive of each stream, by both tools; the messages of
# each (stdout of receive, stderr of both) are kept under $TEST_TMP/TOOL.
round()
{
	local tool=$1 opt=$2 out=$TEST_TMP/$1$2 send recv
	if [ $tool = btrfs ]; then
		send=(btrfs send ${opt:+"$opt"}) recv=(btrfs receive ${opt:+"$opt"})
	else
		send=("$TEST_TMP/bin/btrfs-send" ${opt:+"$opt"})
		recv=("$TEST_TMP/bin/btrfs-receive" ${opt:+"$opt"})
	fi
	mkdir "$out" "$DST/$tool$opt"
	"${send[@]}" "$SRC/s1" >"$out/full" 2>"$out/send-full.err" || _fail "$tool send s1"
	"${send[@]}" -p "$SRC/s1" "$SRC/s2" >"$out/incr" 2>"$out/send-incr.err" || _fail "$tool send -p"
	"${recv[@]}" -f "$out/full" "$DST/$tool$opt" >"$out/recv-full.out" 2>"$out/recv-full.err" ||
		_fail "$tool receive s1: $(cat "$out/recv-full.err")"
	"${recv[@]}" -f "$out/incr" "$DST/$tool$opt" >"$out/recv-incr.out" 2>"$out/recv-incr.err" ||
		_fail "$tool receive s2: $(cat "$out/recv-incr.err")"
	diff -r "$SRC/s2" "$DST/$tool$opt/s2" || _fail "$tool$opt: s2 differs"
}

for opt in "" -q; do
	round btrfs "$opt"
	round encio "$opt"
	for f in send-full.err send-incr.err recv-full.out recv-full.err recv-incr.out recv-incr.err; do
		echo "== $f ($opt): $(cat "$TEST_TMP/btrfs$opt/$f")"
		cmp -s "$TEST_TMP/btrfs$opt/$f" "$TEST_TMP/encio$opt/$f" ||
			_fail "$f ($opt) differs: btrfs '$(cat "$TEST_TMP/btrfs$opt/$f")', encio '$(cat "$TEST_TMP/encio$opt/$f")'"
	done
done
[ "$(cat "$TEST_TMP/encio/recv-incr.out")" = "At snapshot s2" ] || _fail "no 'At snapshot s2' on stdout"

# -v: encio's summary too, on stderr
mkdir "$DST/v"
"$TEST_TMP/bin/btrfs-send" -v "$SRC/s1" 2>"$TEST_TMP/v.err" |
	"$TEST_TMP/bin/btrfs-receive" -v "$DST/v" >"$TEST_TMP/v.out" 2>"$TEST_TMP/vr.err" || _fail "-v send | receive"
grep -q '^sent 1 files' "$TEST_TMP/v.err" || _fail "btrfs-send -v: no summary: $(cat "$TEST_TMP/v.err")"
grep -q '^received 1 subvolume' "$TEST_TMP/vr.err" || _fail "btrfs-receive -v: no summary: $(cat "$TEST_TMP/vr.err")"
[ ! -s "$TEST_TMP/v.out" ] || _fail "btrfs-receive -v printed on stdout: $(cat "$TEST_TMP/v.out")"

for p in btrfs-send btrfs-receive; do
	V=$("$TEST_TMP/bin/$p" --version) || _fail "$p --version failed"
	echo "$V" | grep -q "^$p (encio " || _fail "$p --version: '$V'"
done

# encio receive under its own name: stdout as btrfs receive's
mkdir "$DST/own"
"$ENCIO" receive -f "$TEST_TMP/encio/full" "$DST/own" >"$TEST_TMP/own.out" 2>"$TEST_TMP/own.err" || _fail "encio receive"
"$ENCIO" receive -f "$TEST_TMP/encio/incr" "$DST/own" >>"$TEST_TMP/own.out" 2>>"$TEST_TMP/own.err" || _fail "encio receive -p"
[ "$(cat "$TEST_TMP/own.out")" = "At snapshot s2" ] || _fail "encio receive's stdout: $(cat "$TEST_TMP/own.out")"
[ "$(grep -c '^received 1 subvolume' "$TEST_TMP/own.err")" = 2 ] || _fail "encio receive's summaries: $(cat "$TEST_TMP/own.err")"
