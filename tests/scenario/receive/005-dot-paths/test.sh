#!/bin/bash
# Stream paths with '.' components and repeated slashes name what the
# kernel resolves them to: encio receive gives the tree btrfs receive gives
# for the same streams, also where a directory is renamed and a new one
# made at its old name, under spellings that differ.
source "$(dirname "$0")/../../../common.sh"
require_root
require_stream_gen

make_btrfs dst 256M
DST=$MNT

# tree DIR: every entry (type, mode, size, links) and every file's content.
tree()
{
	(cd "$1" && find . -printf '%P %y %m %s %n\n' | LC_ALL=C sort &&
		find . -type f -print0 | LC_ALL=C sort -z | xargs -0r md5sum)
}

# same_as_btrfs NAME: the stream on stdin, received by both, trees equal.
# btrfs receive keeps the file it wrote last open by its path, across
# renames: the streams write another file before writing a new file at the
# path of one written before a rename.
same_as_btrfs()
{
	local name=$1
	_log "$name"
	"$GEN" >"$TEST_TMP/$name.stream" || _fail "stream-gen $name"
	mkdir "$DST/btrfs-$name" "$DST/encio-$name"
	run_check btrfs receive -q -f "$TEST_TMP/$name.stream" "$DST/btrfs-$name"
	run_check "$ENCIO" -q receive -f "$TEST_TMP/$name.stream" "$DST/encio-$name"
	tree "$DST/btrfs-$name/vol" >"$TEST_TMP/$name.btrfs"
	tree "$DST/encio-$name/vol" >"$TEST_TMP/$name.encio"
	diff -u "$TEST_TMP/$name.btrfs" "$TEST_TMP/$name.encio" ||
		_fail "$name: encio receive's tree is not btrfs receive's"
	cat "$TEST_TMP/$name.encio"
}

same_as_btrfs dot-rename <<END
subvol vol
mkdir a
mkfile a/f1
rename ./a b
mkdir a
mkfile a/f2
end
END
grep -q '^a/f2 f' "$TEST_TMP/dot-rename.encio" || _fail "dot-rename: a/f2 missing"

same_as_btrfs dot-components <<END
subvol vol
mkdir p
mkdir p/./q
mkfile p/./q/./g
write ./p/q/g 0 hello
rename p/q ./r
mkdir ./p/q/
mkfile p/q/h
write p/./q/h 0 there
rename r/./g r//g2
write r/g2 5 _again
end
END

same_as_btrfs double-slashes <<END
subvol vol
mkdir d
mkdir d//e
mkfile d//e//x
write d/e/x 0 first
rename d//e d/e2
mkdir d/e
mkfile d/e///x
mkfile d/other
write d/other 0 other
write d/e/x 0 second
link d/./e/y d//e2/x
unlink ./d/e2/./x
rename d/e2 ./moved
chmod ./moved/ 0750
chmod ./ 0755
end
END

same_as_btrfs removed-and-remade <<END
subvol vol
mkdir a
mkdir a/sub
mkfile a/sub/f
unlink ./a//sub/f
rmdir a/./sub
mkdir a/sub
mkfile ./a/sub/f
write a/sub/f 0 remade
rename a//sub ./a/sub2
mkfile a/sub
end
END
exit 0
