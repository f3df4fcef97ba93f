#!/bin/bash
# With -E 0, a stream of several subvolumes (one END, as btrfs send -e
# writes it) in which a command of the first fails: that subvolume stays
# writable and without a received UUID (btrbk would take it for a backup),
# the next one is received whole, and the receive exits 1.
source "$(dirname "$0")/../../../common.sh"
require_root
require_stream_gen

make_btrfs dst 256M
DST=$MNT

"$GEN" >"$TEST_TMP/two" <<END || _fail "stream-gen"
subvol first 0x41 10
mkfile f
write f 0 hello
chmod missing 644
subvol second 0x42 11
mkfile g
write g 0 world
end
END
run_mustfail "a failed command" "$ENCIO" -q receive -E 0 -f "$TEST_TMP/two" "$DST"
[ "$(cat "$DST/first/f")" = hello ] || _fail "first/f not written"
[ "$(cat "$DST/second/g")" = world ] || _fail "second/g not written"
[ "$(btrfs property get -ts "$DST/first" ro)" = ro=false ] || _fail "first made read-only"
[ "$(uuid_of "$DST/first" Received)" = - ] || _fail "first marked received: $(uuid_of "$DST/first" Received)"
[ "$(btrfs property get -ts "$DST/second" ro)" = ro=true ] || _fail "second not read-only"
[ "$(uuid_of "$DST/second" Received)" != - ] || _fail "second not marked received"
