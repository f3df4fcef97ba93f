#!/bin/bash
# What a cut says. After a receive -s cut short, the hint is commands one
# can paste: run on the sending host, the token read on the receiving one
# (RECEIVER standing for its name), no [-p PARENT] template; pasted (ssh
# a local stand-in), each resumes the receive whole. A plain receive cut
# short says that nothing is kept and suggests -s. The sender, its
# receiver gone, says the receiver stopped and that it says how to
# resume, not only "Broken pipe".
source "$(dirname "$0")/../../../common.sh"
require_root
HERE=$TOP_SRCDIR/tests

make_btrfs src 512M
SRC=$MNT
make_btrfs dst 512M
DST=$MNT
run_check btrfs -q subvolume create "$SRC/v"
for i in $(seq 1 30); do random_bytes 200000 "f$i" >"$SRC/v/f$i"; done
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"
for i in $(seq 1 20); do random_bytes 200000 "g$i" >"$SRC/v/g$i"; done
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s2"
size=$("$ENCIO" -q send "$SRC/s1" | wc -c)
T=$TEST_TMP
# what the pasted commands run: this encio, and ssh to this same host
mkdir "$T/bin"
ln -s "$ENCIO" "$T/bin/encio"
cat >"$T/bin/ssh" <<'SH'
#!/bin/bash
shift
exec bash -c "$*"
SH
chmod +x "$T/bin/ssh"

# paste LINE: the hint's command LINE run as a user would paste it
paste_line()
{
	PATH=$T/bin:$PATH bash -c "$1" 2>"$T/paste.err" || _fail "pasted: $1: $(cat "$T/paste.err")"
}

# a DEST with what a shell takes apart
for d in "a b'c" b; do mkdir "$DST/$d"; done
run_check "$ENCIO" -q receive -f <("$ENCIO" -q send "$SRC/s1") "$DST/b"

_log "receive -s cut: the hint"
"$ENCIO" -q send "$SRC/s1" | head -c $((size / 2)) |
	"$ENCIO" receive -s "$DST/a b'c" 2>"$T/a.err" && _fail "a cut stream received"
cat "$T/a.err"
grep -q "on the sending host" "$T/a.err" || _fail "does not say where to run it"
grep -q "RECEIVER" "$T/a.err" || _fail "no placeholder for the receiving host"
grep -qF "[-p PARENT]" "$T/a.err" && _fail "a template"
grep -qF "[PATH]" "$T/a.err" && _fail "a template"
remote=$(grep -F "ssh RECEIVER" "$T/a.err" | sed 's/^ *//')
here=$(grep -A1 "where both run on this host" "$T/a.err" | tail -1 | sed 's/^ *//')
grep -qF "ssh RECEIVER encio receive --resume-token " <<<"$remote" ||
	_fail "the token is not read on the receiving host: $remote"
paste_line "$remote"
diff -r "$SRC/s1" "$DST/a b'c/s1" || _fail "s1 differs after the pasted resume"

_log "an incremental receive -s cut: the same line resumes it"
"$ENCIO" -q send -p "$SRC/s1" "$SRC/s2" | head -c $((size / 2)) |
	"$ENCIO" receive -s "$DST/b" 2>"$T/b.err" && _fail "a cut stream received"
here=$(grep -A1 "where both run on this host" "$T/b.err" | tail -1 | sed 's/^ *//')
[ -n "$here" ] || _fail "no command for one host: $(cat "$T/b.err")"
paste_line "$here"
diff -r "$SRC/s2" "$DST/b/s2" || _fail "s2 differs after the pasted resume"

_log "a plain receive cut"
mkdir "$DST/c"
"$ENCIO" -q send "$SRC/s1" | head -c $((size / 2)) |
	"$ENCIO" receive "$DST/c" 2>"$T/c.err" && _fail "a cut stream received"
cat "$T/c.err"
grep -q "nothing is kept" "$T/c.err" || _fail "does not say nothing is kept"
grep -q "with -s" "$T/c.err" || _fail "does not suggest -s"
grep -q "resume-token" "$T/c.err" && _fail "a hint to resume what is not kept"

_log "the sender, its receiver gone"
"$ENCIO" -q send "$SRC/s1" 2>"$T/send.err" | head -c 1000 >/dev/null
cat "$T/send.err"
grep -q "the receiver stopped" "$T/send.err" || _fail "the sender does not say the receiver stopped"
grep -q "how to resume" "$T/send.err" || _fail "the sender does not point to the receiver's hint"
exit 0
