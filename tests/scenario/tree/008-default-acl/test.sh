#!/bin/bash
# encio copy -r into a directory with a default ACL gives every entry the
# source's mode and ACLs, as cp -a does: the default ACL of DEST neither
# masks the modes of what is made nor leaves ACLs the source lacks, in a
# new tree, in an existing one, and on a rerun.
source "$(dirname "$0")/../../../common.sh"
require_root
command -v setfacl >/dev/null || _not_run "needs setfacl (acl)"

make_btrfs src 512M compress-force=zstd
SRC=$MNT
make_btrfs dst 512M
DST=$MNT

S=$SRC/S
mkdir -p "$S/d/e" "$S/acl-dir"
compressible 100000 >"$S/f644"
chmod 0644 "$S/f644"
echo x >"$S/f755"
chmod 0755 "$S/f755"
echo y >"$S/d/g640"
chmod 0640 "$S/d/g640"
echo z >"$S/d/e/h604"
chmod 0604 "$S/d/e/h604"
chmod 0755 "$S/d"
chmod 0750 "$S/d/e"
mkfifo -m 0644 "$S/fifo"
echo a >"$S/acl-file"
setfacl -m u:1234:rw,g:2345:r "$S/acl-file"
setfacl -m u:1234:rx "$S/acl-dir"
setfacl -d -m u:1234:rwx "$S/acl-dir"
echo b >"$S/acl-dir/inner"
chmod 0644 "$S/acl-dir/inner"

# acls DIR: mode and ACLs of every entry below DIR, by relative path.
acls()
{
	(cd "$1" && find . -printf '%P\n' | LC_ALL=C sort | while read -r p; do
		[ -z "$p" ] && p=.
		stat -c '%n %a' -- "$p"
		getfacl -P -p -- "$p" 2>/dev/null
	done)
}

check_like_source()
{
	local copy=$1
	diff <(acls "$S") <(acls "$copy") || _fail "$copy: modes or ACLs differ from SRC"
}

# DEST's default ACLs: one masking group and other, one naming a user
# (which gives everything made inside an ACL of its own)
mkdir "$DST/masking" "$DST/naming"
setfacl -d -m u::rwx,g::---,o::--- "$DST/masking"
setfacl -d -m u::rwx,u:4321:rwx,g::---,o::--- "$DST/naming"

for dest in masking naming; do
	_log "a new tree in $dest"
	run_check timeout 120 "$ENCIO" -q copy -r "$S" "$DST/$dest/"
	check_like_source "$DST/$dest/S"
	_log "cp -a agrees"
	cp -a "$S" "$DST/$dest/cp"
	check_like_source "$DST/$dest/cp"

	_log "into an existing tree, changed files again (-T)"
	mkdir "$DST/$dest/existing"
	run_check timeout 120 "$ENCIO" -q copy -r -T "$S" "$DST/$dest/existing"
	check_like_source "$DST/$dest/existing"
	touch -d 2012-01-01 "$S/f644" "$S/d/e/h604" "$S/fifo"
	run_check timeout 120 "$ENCIO" -q copy -r -T "$S" "$DST/$dest/existing"
	check_like_source "$DST/$dest/existing"
	_log "the copy of the root alone (no directory of its own)"
	run_check timeout 120 "$ENCIO" -q copy -r "$S/f644" "$S/fifo" "$DST/$dest/"
	for f in f644 fifo; do
		diff <(cd "$S" && stat -c '%n %a' $f && getfacl -P -p $f) \
			<(cd "$DST/$dest" && stat -c '%n %a' $f && getfacl -P -p $f) ||
			_fail "$dest/$f: mode or ACLs differ"
	done
done
_log "PASS"
