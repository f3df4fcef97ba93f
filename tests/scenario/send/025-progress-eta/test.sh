#!/bin/bash
# The time left on send's and receive's progress lines: --:-- until the
# pace is one to go by (the first line, and any before a MiB, or a
# hundredth of a smaller stream, is done), never an ETA made of a pace not
# yet known; at the end, all done, 0:00, not --:--.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v python3 >/dev/null || _not_run "needs python3"

make_btrfs src 1G compress=zstd
SRC=$MNT
make_btrfs dst 1G
DST=$MNT
T=$TEST_TMP
run_check btrfs -q subvolume create "$SRC/v"
for i in $(seq 1 40); do random_bytes 150000 "r$i" >"$SRC/v/rand$i"; done
compressible 3000000 >"$SRC/v/text"
run_check btrfs -q subvolume snapshot -r "$SRC/v" "$SRC/s1"

# check NAME FILE: FILE's progress lines ("DONE of TOTAL[ read], ...,
# ETA E") keep the rules above
check()
{
	python3 - "$1" "$2" <<'PY' || _fail "$1: $(tr '\r' '\n' <"$2" | cat -v)"
import re, sys
name, path = sys.argv[1], sys.argv[2]
units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
def size(s):
    m = re.match(r"([0-9.]+)([KMG]?i?B)$", s)
    return float(m.group(1)) * units[m.group(2)]
lines = []
first = None
for l in re.split(r"[\r\n]", open(path, "rb").read().decode().replace("\x1b[K", "")):
    l = l.strip()
    if first is None and re.search(r"/s(, ETA \S+)?$", l):
        first = l
    m = re.match(r"([0-9.]+[KMG]?i?B) of ([0-9.]+[KMG]?i?B)(?: read)?, .*ETA (\S+)$", l)
    if m:
        lines.append((size(m.group(1)), size(m.group(2)), m.group(3)))
assert len(lines) >= 3, (name, "too few progress lines", lines)
# a receiver learns the total from the sender's estimate, which may come
# later in the stream: its first lines then have no total and no ETA
assert first is not None and (first == first.split(", ETA")[0] or first.endswith("ETA --:--")), (name, "an ETA on the first line", first)
for done, total, eta in lines:
    if eta not in ("--:--", "0:00"):
        assert done >= min(1 << 20, total / 100), (name, "an ETA before a pace", lines)
done, total, eta = lines[-1]
assert done == total and eta == "0:00", (name, "the last line is not all done in 0:00", lines[-1])
print(name, len(lines), "lines, last", lines[-1])
PY
}

# a slow link: a few seconds of lines
"$ENCIO" send --progress "$SRC/s1" 2>"$T/send.err" |
	python3 "$TOP_SRCDIR/tests/throttle.py" 2500000 >"$T/stream" || _fail "send failed"
check send "$T/send.err"
# receive from a slow link, of that stream: it carries the sender's
# estimate, made while the sender waited on the link (a send to a file
# may outrun it, as the estimate yields the processor for its first
# second)
mkdir "$DST/r"
python3 "$TOP_SRCDIR/tests/throttle.py" 2500000 <"$T/stream" |
	"$ENCIO" receive --progress "$DST/r" 2>"$T/recv.err" || _fail "receive failed"
check receive "$T/recv.err"
echo "PASS: $TEST_NAME"
