#!/bin/bash
# A single-file copy keeps what copy -r keeps: user xattrs, the POSIX
# access ACL (its mask, so the owning group's effective rights stay),
# file capabilities, mode and owner; into a directory with a default ACL,
# the copy takes none of it.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v getfacl >/dev/null || _not_run "needs getfacl (acl)"
command -v getfattr >/dev/null || _not_run "needs getfattr (attr)"

make_btrfs src 512M compress=zstd
SRC=$MNT
make_btrfs dst 512M
DST=$MNT

head -c 300000 /usr/bin/bash >"$SRC/f"
setfattr -n user.note -v "kept" "$SRC/f"
setfattr -n user.big -v "$(head -c 300 /dev/zero | tr '\0' x)" "$SRC/f"
setfacl -m u:1005:rw,g::r-x,m::r-x "$SRC/f"
chmod 4750 "$SRC/f"
chown 1001:1002 "$SRC/f"
caps=0
if command -v setcap >/dev/null && setcap cap_net_raw+ep "$SRC/f" 2>/dev/null; then
	caps=1
	chmod 0750 "$SRC/f"
fi
mkdir "$DST/inherit"
setfacl -d -m u:1006:rwx,g::rwx "$DST/inherit"

# what copy -r and cp -a keep, compared as getfattr dumps them
meta_of()
{
	stat -c '%a %u %g %s' "$1"
	getfattr -h -d -m - -e hex "$1" 2>/dev/null | grep -v '^# file'
}

for into in "$DST/f" "$DST/inherit/f"; do
	run_check "$ENCIO" -q copy "$SRC/f" "$into"
	cmp "$SRC/f" "$into" || _fail "$into: content differs"
	diff <(meta_of "$SRC/f") <(meta_of "$into") || _fail "$into: metadata differs from the source's"
done
[ "$caps" = 0 ] || getfattr -n security.capability "$DST/f" >/dev/null 2>&1 ||
	_fail "the file capability was lost"
