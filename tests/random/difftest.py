#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Randomized differential tester of encio send / receive (and copy -r),
with btrfs-progs' send | receive as the oracle.

Each seed builds, on a loopback btrfs image, a subvolume and a history of
read-only snapshots with random operations between them, then carries the
history with each check method into a fresh filesystem of its own (first
snapshot full, then each with -p of the one before, sometimes -c of an
older one) and compares every received snapshot with its source.

    difftest.py [--seed N | --seeds A-B] [--methods a,b,c,d,i,copy,sub,h] [--keep] [-v]
                [--budget S [--min-seeds N]] [--no-hostile]
    difftest.py op OP ARGS...      one operation of a replay script
    difftest.py compare A B [--no-flags] [--copy]   two trees, as the checks do
    difftest.py nsreceive ROOT MNT REL STREAM       (method a's chroot; internal)

A hostile user (uid 4242; --no-hostile leaves it out, and the histories
are those of before it) takes part in every seed. In SRC it owns a
directory, copies root's readable files into it with cp --reflink, writes
its files and plants FIFOs, symlinks and hard links there, while root's
files it copied grow (its shell lines, setpriv, are in the history). Its
acts in DEST are method h's.

Methods: d the control (btrfs send --compressed-data | btrfs receive), a
encio send | btrfs receive, run in a private mount namespace chrooted into
a tmpfs with a canary file at "/" + every path the stream names (btrfs
receive 6.2 skips a command it does not know and then resolves paths
against "/"): a changed or new file there fails, b encio send | encio
receive, c btrfs send
--compressed-data | encio receive, i b with one step interrupted (SIGINT or
SIGKILL of a side, or the pipe closed) and received again, copy encio copy
-r of each snapshot, sub encio copy -rT --subvolumes of the whole source
filesystem onto a fresh one's root (in some seeds a first run stopped by
SIGINT, SIGKILL or a full DEST, then run again; then changes to the live
subvolume and those in it, the same command again, and one more snapshot
sent by btrfs send -p into the moved copy, received by encio receive and
by btrfs receive), pipe encio send --subvolumes | encio receive of the
whole source filesystem onto a fresh one's root, then changes to the live
subvolumes and a second run with encio receive --state's output, h encio
send | encio receive -s into a directory of
DEST the user owns, one step cut at a random byte and resumed with encio
send -t, whose stream goes to btrfs receive as a's does first (it must
refuse it before any write), and encio copy -rT of each snapshot over a
snapshot of the copy of the one before: before each step the user plants
FIFOs, symlinks (to a root file outside DEST), hard links, files and
directories at names like encio's working names (.NAME.encio-*,
.encio-receive.*, of this snapshot and the next), renames root's received
snapshots onto them, makes a subvolume with a received UUID forged from
root's copy of the parent (BTRFS_IOC_SET_RECEIVED_SUBVOL, its owner's
right), reads DEST, and rewrites its copies with its marker bytes, their
times put back; while encio runs it reads DEST and makes FIFOs. Besides
the result, h checks that the user's names (but those at the working names
of the snapshot received, which encio may replace), root's received
subvolumes and the file behind the symlinks are as they were, that no file
not the user's holds its marker, that nothing hangs, that a resume after
acts beside encio's names is taken, and that a refusal after acts on them
is safe (after clearing them the receive works). The seed's line says what
the user did; the reproducer has its acts. Each step's stream is made once
per sender (saved:
encio's may not be larger than btrfs send's, FILEATTR and FALLOCATE
commands left out of both: they carry flags of new inodes and preallocated
ranges, which btrfs send does not send; in one seed of two encio send
draws progress, and its stream carries its estimated size, 12 bytes left
out too) and fed through a pipe.

What is compared: type, content, size, symlink target, device numbers,
hard-link group, mode, owner, mtime (atime never, ctime cannot be kept),
every xattr (ACLs and btrfs.compression included) and the C, c, A, i, a,
d, S and m flags (an m the copy has and the source has not is let pass
where the copy compresses: btrfs sets it by itself where compressing did
not pay). Before half the snapshots a few files and directories get
i, a, A, d or S; after it an append-only file may grow, then i and a are
lifted and the inode or an entry of the directory is changed, as a user
would, so the next incremental must get past the flags the backup keeps.
Where the source cannot be the measure, and only there:
- a nested subvolume shows in a snapshot as an empty directory (inode 2)
  that btrfs send leaves out: it is left out of what a stream must give
  (copy -r keeps it; its times and flags are made up when looked up);
- where the control differs from the source (btrfs receive makes new
  inodes in the subvolume's root: they inherit its default ACL, and the
  root's mtime is that of the receive), encio must give the source or what
  the control gives; a time the control gets wrong is not checked, nor
  anything of method a btrfs receive itself gets wrong;
- inode flags: b, i and copy must give the source's; a and c, whose
  streams cannot carry them all (the kernel sends FILEATTR only for flags
  changed since the parent, btrfs receive applies none), must give no flag
  that neither the source nor the control has.

Exit status: 0 all seeds equal, 1 a mismatch (seed, method, snapshot, path,
expected and got, and the replayable history are printed), 77 cannot run.
"""

import argparse
import atexit
import collections
import ctypes
import fcntl
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SELF = os.path.abspath(__file__)
# a python the unprivileged user of the hostile acts can run
USER_PY = shutil.which("python3", path="/usr/bin:/bin") or sys.executable


_user_t = []


def user_t():
    """This script where the unprivileged user can run it too (a build
    tree may sit in a directory of root's only, as make distcheck's and
    CI's do): a copy in /dev/shm, gone at exit."""
    if not _user_t:
        d = tempfile.mkdtemp(prefix="difftest-user-", dir="/dev/shm")
        os.chmod(d, 0o755)
        copy = os.path.join(d, "difftest.py")
        shutil.copyfile(SELF, copy)
        os.chmod(copy, 0o644)
        atexit.register(shutil.rmtree, d, True)
        _user_t.append(USER_PY + " " + copy)
    return _user_t[0]

# Mount options of the source filesystem; btrfs chooses extents, inline
# data and compression from them, which is what send has to reproduce.
MOUNT_OPTS = ["", "compress=zstd", "compress-force=zstd", "compress=lzo",
              "compress-force=zlib:3", "compress=zstd:1", "compress-force=lzo",
              "compress=zlib", "compress-force=zstd,max_inline=0"]
# Without no-holes the kernel keeps explicit hole extents, which a send
# walks differently.
MKFS_OPTS = [[], [], ["-O", "^no-holes"]]

FS_IOC_GETFLAGS = 0x80086601
FL_NOCOW = 0x00800000
FL_COMPR = 0x00000004
FL_NOATIME = 0x00000080
FL_NOCOMP = 0x00000400
FL_SYNC = 0x00000008
FL_IMMUTABLE = 0x00000010
FL_APPEND = 0x00000020
FL_NODUMP = 0x00000040
FL_DIRSYNC = 0x00010000
FLAG_LETTERS = ((FL_NOCOW, "C"), (FL_COMPR, "c"), (FL_NOATIME, "A"), (FL_IMMUTABLE, "i"),
                (FL_APPEND, "a"), (FL_NODUMP, "d"), (FL_SYNC, "S"), (FL_NOCOMP, "m"))
FICLONERANGE = 0x4020940d
FIDEDUPERANGE = 0xC0189436
RENAME_EXCHANGE = 2
FALLOC_FL_KEEP_SIZE = 1
FALLOC_FL_PUNCH_HOLE = 2
EMPTY_SUBVOL_DIR_INO = 2   # a nested subvolume as a snapshot of its parent shows it

libc = ctypes.CDLL(None, use_errno=True)


class Skip(Exception):
    pass


# ---------------------------------------------------------------------------
# Operations that have no plain shell command: the replay script runs them
# as "$T op NAME ARGS", through the same functions the generator called.

def data(kind, dseed, n):
    """Deterministic bytes of a kind: compressible or not, as extents see them."""
    r = random.Random(dseed)
    if kind == "zero":
        return bytes(n)
    if kind == "byte":
        return bytes([r.randrange(256)]) * n
    if kind == "text":
        line = ("line %d of the quick brown fox, seed %d\n" % (r.randrange(1000), dseed)).encode()
        return (line * (n // len(line) + 1))[:n]
    if kind == "random":
        return r.randbytes(n)
    # mixed: runs of text and random, 4 KiB to 64 KiB each
    out = bytearray()
    while len(out) < n:
        k = r.randrange(4096, 65537)
        out += data(r.choice(["text", "random", "zero"]), r.randrange(1 << 30), k)
    return bytes(out[:n])


def op_write(path, off, n, kind, dseed):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data(kind, int(dseed), int(n)), int(off))
    finally:
        os.close(fd)


def op_clone(src, soff, n, dst, doff):
    d = os.open(dst, os.O_RDWR)
    s = d if src == dst else os.open(src, os.O_RDONLY)
    try:
        fcntl.ioctl(d, FICLONERANGE, struct.pack("qQQQ", s, int(soff), int(n), int(doff)))
    finally:
        os.close(d)
        if s != d:
            os.close(s)


def op_dedupe(src, soff, n, dst, doff):
    """Write SRC's bytes at DST's offset, then deduplicate the two ranges."""
    soff, n, doff = int(soff), int(n), int(doff)
    s = os.open(src, os.O_RDONLY)
    d = os.open(dst, os.O_RDWR)
    try:
        buf = os.pread(s, n, soff)
        os.pwrite(d, buf, doff)
        arg = bytearray(struct.pack("QQHHI", soff, len(buf), 1, 0, 0) +
                        struct.pack("qQQiI", d, doff, 0, 0, 0))
        fcntl.ioctl(s, FIDEDUPERANGE, arg)
        status = struct.unpack_from("i", arg, 24 + 24)[0]
        if status < 0:
            raise OSError(-status, "dedupe status %d" % status)
    finally:
        os.close(s)
        os.close(d)


def op_exchange(a, b):
    if libc.renameat2(-100, a.encode(), -100, b.encode(), RENAME_EXCHANGE) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), a)


def op_xattr(path, name, n, dseed):
    os.setxattr(path, name, data("mixed", int(dseed), int(n)), follow_symlinks=False)


OPS = {"write": op_write, "clone": op_clone, "dedupe": op_dedupe,
       "exchange": op_exchange, "xattr": op_xattr}


# ---------------------------------------------------------------------------
# Trees: what a snapshot holds, as the checks compare it.

def file_flags(path, st):
    """The C, c, A, i, a, d, S and m flags; and whether btrfs marked the inode
    nocompress, which it does by itself where compressing did not pay
    (at writeback, also after a snapshot was taken, so a tree can change
    its flags while nothing writes it): GETFLAGS then shows no c, whatever
    the inode has, and c cannot be told."""
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        return "", False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return "?", False
    try:
        buf = fcntl.ioctl(fd, FS_IOC_GETFLAGS, b"\0" * 8)
        v = struct.unpack("I", buf[:4])[0]
        return "".join(c for bit, c in FLAG_LETTERS if v & bit), bool(v & FL_NOCOMP)
    except OSError:
        return "?", False
    finally:
        os.close(fd)


def file_hash(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()[:16]


# set by encio receive on the root of a subvolume it received
RECEIVED_MARK = "trusted.encio.received"


def xattrs_of(path):
    out = {}
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return out
    for nm in names:
        if nm == RECEIVED_MARK:
            continue
        try:
            v = os.getxattr(path, nm, follow_symlinks=False)
        except OSError as e:
            v = "error %d" % e.errno
        else:
            v = v.hex() if len(v) <= 48 else "%d bytes sha %s" % (len(v), hashlib.sha256(v).hexdigest()[:12])
        out[nm] = v
    return out


def tree(root, nested=True):
    """{relative path: {attribute: value}}, with the inode numbers kept
    aside to make hard-link groups and to see nested subvolumes; with
    nested False, a nested subvolume's root is not entered."""
    entries = {}
    inos = {}
    stack = ["."]
    while stack:
        rel = stack.pop()
        p = root if rel == "." else os.path.join(root, rel)
        st = os.lstat(p)
        a = {"type": stat.S_IFMT(st.st_mode) >> 12, "mode": "%o" % stat.S_IMODE(st.st_mode),
             "owner": "%d:%d" % (st.st_uid, st.st_gid), "mtime": st.st_mtime_ns}
        if stat.S_ISREG(st.st_mode):
            a["size"] = st.st_size
            a["content"] = file_hash(p)
        elif stat.S_ISLNK(st.st_mode):
            a["target"] = os.readlink(p)
        elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
            a["rdev"] = "%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
        a["xattrs"] = xattrs_of(p)
        a["flags"], a["_nocomp"] = file_flags(p, st)
        a["_ino"] = st.st_ino
        entries[rel] = a
        if not stat.S_ISDIR(st.st_mode):
            inos.setdefault(st.st_ino, []).append(rel)
        elif rel == "." or (st.st_ino != EMPTY_SUBVOL_DIR_INO and (nested or st.st_ino != 256)):
            for e in sorted(os.listdir(p)):
                stack.append(e if rel == "." else os.path.join(rel, e))
    for rel, a in entries.items():
        if a["type"] != stat.S_IFDIR >> 12:
            a["links"] = tuple(sorted(inos[a["_ino"]]))
    return entries


# copy --subvolumes' bases, and send --subvolumes' (another DEST's)
BASE_SUFFIXES = (".encio-base", ".encio-send-base")


def base_suffix(name):
    """The base suffix @name ends with, or None."""
    return next((x for x in BASE_SUFFIXES if name.endswith(x)), None)


def is_base(rel, st):
    """Whether @rel (lstat @st) is where encio copy --subvolumes (or send
    --subvolumes) keeps the snapshot a writable subvolume's copy holds,
    for the next run."""
    return base_suffix(os.path.basename(rel)) is not None and st.st_ino == 256


def without_bases(entries):
    """A tree() without the bases kept in it (is_base())."""
    bases = [r for r, a in entries.items() if r != "." and
             base_suffix(os.path.basename(r)) and a["_ino"] == 256]
    return {r: a for r, a in entries.items()
            if not any(r == b or r.startswith(b + "/") for b in bases)}


def disk_usage(path):
    """The bytes on disk of the extents the files under @path use, each
    once (compsize), or None without compsize."""
    try:
        out = subprocess.run(["compsize", "-b", path], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True).stdout
    except FileNotFoundError:
        return None
    for line in out.splitlines():
        if line.startswith("TOTAL"):
            return int(line.split()[2])
    return 0


def disk_usage_by_owner(path):
    """disk_usage() of the regular files under @path of each owner, added
    up, a file that group or others may write on its own, uncompressed (a
    part of a compressed extent that is not cloned is written plain): what
    a copy takes at most where a file is cloned from another only if no
    one but root and its owner can write the other (encio-copy(8), SHARED
    DATA), or None without compsize."""
    owners = {}
    for top, dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(top, f)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                key = p if st.st_mode & 0o022 else st.st_uid
                owners.setdefault(key, []).append(p)
    total = 0
    for paths in owners.values():
        for i in range(0, len(paths), 500):
            try:
                out = subprocess.run(["compsize", "-b"] + paths[i:i + 500],
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL,
                                     text=True).stdout
            except FileNotFoundError:
                return None
            for line in out.splitlines():
                if line.startswith("TOTAL"):
                    total += int(line.split()[3])
    return total


def is_placeholder(a):
    return a["type"] == stat.S_IFDIR >> 12 and a["_ino"] == EMPTY_SUBVOL_DIR_INO


def short(v):
    s = repr(v)
    return s if len(s) <= 300 else s[:300] + "..."


def first_diff(a, b):
    try:
        with open(a, "rb") as fa, open(b, "rb") as fb:
            off = 0
            while True:
                x, y = fa.read(65536), fb.read(65536)
                if x != y:
                    for i in range(min(len(x), len(y))):
                        if x[i] != y[i]:
                            return off + i
                    return off + min(len(x), len(y))
                if not x:
                    return None
                off += len(x)
    except OSError:
        return None


ATTRS = ("type", "mode", "owner", "mtime", "size", "content", "target", "rdev",
         "xattrs", "links", "flags")


def compress_unmakeable(e, g):
    """e and g without the compress flag and property, where e has the flag
    but not the property: btrfs can pass a directory's flag on to a new
    inode without its property, and no call makes that state (chattr +c
    adds the property; removing the property clears the flag). The flag
    with a property, or neither, is then right."""
    prop = "btrfs.compression"
    ex, gx = e.get("xattrs") or {}, g.get("xattrs") or {}
    if "c" not in (e.get("flags") or "") or prop in ex:
        return e, g
    g_c = "c" in (g.get("flags") or "")
    if g_c != (prop in gx):
        return e, g
    e, g = dict(e), dict(g)
    e["flags"] = e["flags"].replace("c", "")
    g["flags"] = (g.get("flags") or "").replace("c", "")
    g["xattrs"] = {k: v for k, v in gx.items() if k != prop}
    return e, g


def diff_trees(exp, got, skip=()):
    """[(path, attribute, expected, got)] for every difference."""
    out = []
    for rel in sorted(set(exp) | set(got)):
        e, g = exp.get(rel), got.get(rel)
        if e is None or g is None:
            out.append((rel, "exists", e is not None, g is not None))
            continue
        if "flags" not in skip:
            e, g = compress_unmakeable(e, g)
            if e.get("_nocomp") or g.get("_nocomp"):
                e, g = dict(e), dict(g)
                e["flags"] = (e.get("flags") or "").replace("c", "")
                g["flags"] = (g.get("flags") or "").replace("c", "")
            if "m" in (g.get("flags") or "") and "m" not in (e.get("flags") or "") and \
               "C" not in g["flags"]:
                # btrfs marks an inode m by itself where compressing its
                # data did not pay: where the copy compressed, it may
                g = dict(g)
                g["flags"] = g["flags"].replace("m", "")
        for k in ATTRS:
            if k in skip:
                continue
            if e.get(k) != g.get(k):
                out.append((rel, k, e.get(k), g.get(k)))
    return out


def source_view(src):
    """The source snapshot as a send must carry it: btrfs send leaves out
    the empty directory a nested subvolume shows as."""
    return {r: a for r, a in src.items() if not is_placeholder(a)}


# ---------------------------------------------------------------------------
# Filesystems and processes, all undone by Env.cleanup.

class Env:
    def __init__(self, base, keep, verbose):
        self.dir = tempfile.mkdtemp(prefix="difftest.", dir=base)
        os.chmod(self.dir, 0o755)       # the hostile user reaches SRC and DEST
        self.keep = keep
        self.verbose = verbose
        self.mounts = []
        self.loops = []
        self.procs = []

    def log(self, msg):
        if self.verbose:
            print("   " + msg, flush=True)

    def run(self, cmd, **kw):
        """subprocess.run, its output kept; with a timeout, a command that
        runs past it is killed and its exit status is "hung"."""
        self.log("+ " + " ".join(shlex.quote(c) for c in cmd))
        try:
            return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(cmd, "hung", b"", b"killed after %d s" % kw["timeout"])

    def mkfs(self, name, size="512M", opts="", mkfs_opts=()):
        img = os.path.join(self.dir, name + ".img")
        with open(img, "wb") as f:
            f.truncate(int(size[:-1]) << 20)
        loop = subprocess.check_output(["losetup", "-f", "--show", img], text=True).strip()
        self.loops.append(loop)
        subprocess.run(["mkfs.btrfs", "-q", "-f", *mkfs_opts, loop], check=True,
                       stdout=subprocess.DEVNULL)
        mnt = os.path.join(self.dir, name)
        os.mkdir(mnt)
        self.mount(loop, mnt, opts)
        return loop, mnt

    def mount(self, loop, mnt, opts):
        subprocess.run(["mount"] + (["-o", opts] if opts else []) + [loop, mnt], check=True)
        if mnt not in self.mounts:
            self.mounts.append(mnt)

    def umount(self, mnt):
        subprocess.run(["umount", mnt], check=True)

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.procs = []
        if self.keep:
            print("kept: %s (mounted; loop devices %s)" % (self.dir, " ".join(self.loops)))
            return
        for m in reversed(self.mounts):
            if os.path.ismount(m):
                if subprocess.run(["umount", m], stderr=subprocess.DEVNULL).returncode:
                    subprocess.run(["umount", "-l", m])
        self.mounts = []
        for l in self.loops:
            subprocess.run(["losetup", "-d", l], stderr=subprocess.DEVNULL)
        self.loops = []
        subprocess.run(["rm", "-rf", self.dir])


# ---------------------------------------------------------------------------
# The history: random operations on the live subvolume, each logged as the
# shell line that does it.

def P(rel):
    return '"$V"' if rel == "." else '"$V"/' + shlex.quote(rel)


class History:
    def __init__(self, env, seed, rng, hostile=False):
        self.env = env
        self.seed = seed
        self.r = rng
        self.hostile = hostile
        self.shared = []      # files the user copied with cp --reflink
        self.opts = rng.choice(MOUNT_OPTS)
        self.mkfs_opts = rng.choice(MKFS_OPTS)
        self.nsnaps = rng.randint(3, 6)
        self.log = []
        self.created = []     # creation order, for removing the newest before a remount
        self.counter = 0

    # -- the live tree --
    def entries(self):
        """Sorted [(rel, lstat)] of the live subvolume, nested subvolumes
        named but not entered; the bases encio copy --subvolumes keeps
        beside a subvolume left out: encio's, not the history's."""
        out = []
        stack = ["."]
        while stack:
            rel = stack.pop()
            p = self.V if rel == "." else os.path.join(self.V, rel)
            st = os.lstat(p)
            if is_base(rel, st):
                continue
            out.append((rel, st))
            if stat.S_ISDIR(st.st_mode) and (rel == "." or st.st_ino != 256):
                for e in sorted(os.listdir(p), reverse=True):
                    stack.append(e if rel == "." else os.path.join(rel, e))
        return sorted(out)

    def pick(self, pred):
        c = [(r, s) for r, s in self.ents if pred(r, s)]
        return self.r.choice(c) if c else (None, None)

    def dirs(self):
        return lambda r, s: stat.S_ISDIR(s.st_mode) and (r == "." or s.st_ino != 256)

    def newname(self, d=None):
        """A name not in use in D (a random one otherwise): an op that
        writes to a name of a fifo would wait for a reader forever."""
        if d is None:
            d, _ = self.pick(self.dirs())
        while True:
            p = self.name_in(d)
            if not os.path.lexists(os.path.join(self.V, p)):
                return p

    def name_in(self, d):
        self.counter += 1
        roll = self.r.random()
        if roll < 0.03:
            base = "o%d-%d-0" % (self.r.randint(256, 300), self.r.randint(5, 12))  # like send's orphan names
        elif roll < 0.06:
            base = ("long%d-" % self.counter) + "x" * self.r.randint(100, 240)
        elif roll < 0.09:
            base = "sp ace %d" % self.counter
        else:
            base = "%s%d" % (self.r.choice("fdghkmnpqrstvwz"), self.counter)
        return base if d == "." else os.path.join(d, base)

    # -- running and logging --
    def sh(self, line):
        """Run one shell line with $V set, and log it."""
        rc = subprocess.run(["bash", "-c", line], env=dict(os.environ, V=self.V, T=user_t()),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.log.append(line if rc.returncode == 0 else line + "  # failed here too")
        self.env.log("$ " + line + ("" if rc.returncode == 0 else "  # rc %d: %s" % (rc.returncode, rc.stderr.decode(errors="replace").strip()[:200])))
        return rc.returncode == 0

    def op(self, name, *args):
        """Run one of OPS here, logged as "$T op NAME ARGS" (paths relative to $V)."""
        words = []
        real = []
        for a in args:
            if isinstance(a, tuple):          # ("path", rel)
                words.append(P(a[1]))
                real.append(self.V if a[1] == "." else os.path.join(self.V, a[1]))
            else:
                words.append(shlex.quote(str(a)))
                real.append(str(a))
        line = "$T op %s %s" % (name, " ".join(words))
        try:
            OPS[name](*real)
            ok = True
        except OSError as e:
            ok = False
            self.env.log("$ %s  # %s" % (line, e))
        self.log.append(line if ok else line + "  # failed here too")
        if ok:
            self.env.log("$ " + line)
        return ok

    # -- random choices --
    def size(self):
        x = self.r.random()
        if x < 0.30:
            return self.r.randint(0, 2048)          # inline
        if x < 0.60:
            return self.r.randint(2049, 65536)
        if x < 0.92:
            return self.r.randint(65537, 600000)
        return self.r.randint(600001, 2200000)

    def kind(self):
        return self.r.choice(["zero", "byte", "text", "text", "random", "mixed", "mixed"])

    def off(self, limit):
        o = self.r.randint(0, max(0, limit))
        return o & ~4095 if self.r.random() < 0.6 else o

    def reg(self, r, s):
        return stat.S_ISREG(s.st_mode)

    def do_op(self):
        r = self.r
        ops = [
            (10, self.o_create), (9, self.o_write), (3, self.o_append), (4, self.o_truncate),
            (4, self.o_punch), (5, self.o_falloc), (3, self.o_reflink), (7, self.o_clone),
            (3, self.o_dedupe), (5, self.o_rename), (2, self.o_exchange), (1, self.o_invert),
            (1, self.o_file_to_dir), (1, self.o_dir_to_file), (2, self.o_remake_dir),
            (4, self.o_mkdir), (3, self.o_link), (4, self.o_unlink), (3, self.o_special),
            (3, self.o_xattr), (2, self.o_acl), (3, self.o_chown), (3, self.o_chmod),
            (3, self.o_utime), (3, self.o_chattr), (1, self.o_property), (1, self.o_subvol),
            (1, self.o_sync), (2, self.o_tiny),
        ]
        if self.hostile:
            ops += [(4, self.u_copy), (2, self.u_write), (1, self.u_plant), (4, self.o_grow)]
        total = sum(w for w, _ in ops)
        x = r.uniform(0, total)
        for w, f in ops:
            x -= w
            if x <= 0:
                break
        self.ents = self.entries()
        f()

    def o_create(self):
        p = self.newname()
        if self.r.random() < 0.15:
            self.sh("touch %s" % P(p))
            self.sh("chattr +%s %s" % (self.r.choice("Cc"), P(p)))
        n = self.size()
        self.op("write", ("path", p), 0, n, self.kind(), self.r.randrange(1 << 30))
        self.created.append(p)

    def o_tiny(self):
        p, s = self.pick(lambda r, s: self.reg(r, s) and s.st_size <= 4096)
        if p is None or self.r.random() < 0.3:
            p = self.newname()
            self.created.append(p)
        self.op("write", ("path", p), self.r.randint(0, 1500), self.r.randint(1, 2048),
                self.kind(), self.r.randrange(1 << 30))

    def o_write(self):
        p, s = self.pick(self.reg)
        if p is None:
            return self.o_create()
        off = self.off(s.st_size + 65536)
        n = self.r.choice([1, 100, 4096, 8192, 65536, 131072, 200000, self.r.randint(1, 300000)])
        self.op("write", ("path", p), off, n, self.kind(), self.r.randrange(1 << 30))

    def o_append(self):
        p, s = self.pick(self.reg)
        if p is None:
            return self.o_create()
        self.op("write", ("path", p), s.st_size, self.r.randint(1, 200000), self.kind(),
                self.r.randrange(1 << 30))

    def o_truncate(self):
        p, s = self.pick(self.reg)
        if p is None:
            return
        n = self.off(s.st_size * 2 + 8192) if self.r.random() < 0.5 else self.off(s.st_size)
        self.sh("truncate -s %d %s" % (n, P(p)))

    def o_punch(self):
        p, s = self.pick(lambda r, s: self.reg(r, s) and s.st_size > 0)
        if p is None:
            return
        off = self.off(s.st_size)
        self.sh("fallocate -p -o %d -l %d %s" % (off, self.r.randint(1, max(1, s.st_size - off + 4096)), P(p)))

    def o_falloc(self):
        p, s = self.pick(self.reg)
        if p is None:
            return
        past = self.r.random() < 0.5
        off = s.st_size + self.off(65536) if past else self.off(s.st_size)
        keep = "-n " if self.r.random() < 0.5 else ""
        self.sh("fallocate %s-o %d -l %d %s" % (keep, off, self.r.randint(1, 300000), P(p)))

    def o_reflink(self):
        p, s = self.pick(self.reg)
        if p is None:
            return
        q = self.newname()
        self.sh("cp --reflink=always %s %s" % (P(p), P(q)))
        self.created.append(q)

    def o_clone(self):
        src, ss = self.pick(lambda r, s: self.reg(r, s) and s.st_size > 0)
        if src is None:
            return
        if self.r.random() < 0.25:
            dst, ds = src, ss
        else:
            dst, ds = self.pick(self.reg)
        soff = self.r.randint(0, (ss.st_size - 1) // 4096) * 4096
        if self.r.random() < 0.4:
            n = ss.st_size - soff            # to EOF: an unaligned length is allowed
        else:
            n = min(self.r.randint(1, 64) * 4096, (ss.st_size - soff + 4095) // 4096 * 4096)
        doff = self.r.randint(0, (ds.st_size + 4095) // 4096 + 2) * 4096
        if dst == src and abs(doff - soff) < n:
            doff = (soff + n + 4095) // 4096 * 4096
        self.op("clone", ("path", src), soff, n, ("path", dst), doff)

    def o_dedupe(self):
        src, ss = self.pick(lambda r, s: self.reg(r, s) and s.st_size >= 4096)
        if src is None:
            return
        dst, ds = self.pick(lambda r, s: self.reg(r, s) and r != src)
        if dst is None:
            return
        soff = self.r.randint(0, ss.st_size // 4096 - 1) * 4096
        n = min(self.r.randint(1, 64) * 4096, (ss.st_size - soff) // 4096 * 4096)
        doff = self.r.randint(0, ds.st_size // 4096) * 4096
        self.op("dedupe", ("path", src), soff, n, ("path", dst), doff)

    def movable(self):
        return lambda r, s: r != "." and not (stat.S_ISDIR(s.st_mode) and s.st_ino == 256)

    def under(self, a, b):
        return b == a or b.startswith(a + "/")

    def o_rename(self):
        a, s = self.pick(self.movable())
        if a is None:
            return
        if not stat.S_ISDIR(s.st_mode) and self.r.random() < 0.3:
            b, _ = self.pick(lambda r, t: self.movable()(r, t) and not stat.S_ISDIR(t.st_mode) and r != a)
            if b is not None:
                return self.sh("mv -T %s %s" % (P(a), P(b)))
        d, _ = self.pick(lambda r, t: self.dirs()(r, t) and not self.under(a, r))
        if d is None:
            return
        self.sh("mv -T %s %s" % (P(a), P(self.newname(d))))

    def o_exchange(self):
        a, _ = self.pick(self.movable())
        b, _ = self.pick(self.movable())
        if a is None or b is None or self.under(a, b) or self.under(b, a):
            return
        self.op("exchange", ("path", a), ("path", b))

    def o_invert(self):
        """A directory moved beneath what was its own subdirectory."""
        b, _ = self.pick(lambda r, s: self.dirs()(r, s) and "/" in r)
        if b is None:
            d = self.newname()
            self.sh("mkdir %s && mkdir %s && touch %s" % (P(d), P(d + "/in"), P(d + "/in/f")))
            return
        a = os.path.dirname(b)
        parent = os.path.dirname(a) or "."
        nb = self.newname(parent)
        self.sh("mv -T %s %s" % (P(b), P(nb)))
        self.sh("mv -T %s %s" % (P(a), P(os.path.join(nb, os.path.basename(a)))))

    def o_file_to_dir(self):
        p, _ = self.pick(lambda r, s: self.reg(r, s))
        if p is None:
            return
        self.sh("rm %s && mkdir %s" % (P(p), P(p)))
        if self.r.random() < 0.5:
            self.op("write", ("path", p + "/inside"), 0, self.size(), self.kind(), self.r.randrange(1 << 30))

    def o_dir_to_file(self):
        p, _ = self.pick(lambda r, s: self.dirs()(r, s) and r != ".")
        if p is None:
            return
        if self.sh("rm -rf %s" % P(p)):
            self.op("write", ("path", p), 0, self.size(), self.kind(), self.r.randrange(1 << 30))

    def o_remake_dir(self):
        p, _ = self.pick(lambda r, s: self.dirs()(r, s) and r != ".")
        if p is None:
            return self.o_mkdir()
        self.sh("rm -rf %s && mkdir %s" % (P(p), P(p)))
        if self.r.random() < 0.6:
            self.op("write", ("path", p + "/again"), 0, self.size(), self.kind(), self.r.randrange(1 << 30))

    def o_mkdir(self):
        p = self.newname()
        self.sh("mkdir %s" % P(p))
        self.created.append(p)

    def o_link(self):
        p, _ = self.pick(lambda r, s: self.movable()(r, s) and not stat.S_ISDIR(s.st_mode))
        if p is None:
            return
        q = self.newname()
        self.sh("ln -P %s %s" % (P(p), P(q)))
        self.created.append(q)

    def o_unlink(self):
        multi = self.r.random() < 0.5
        p, _ = self.pick(lambda r, s: self.movable()(r, s) and not stat.S_ISDIR(s.st_mode)
                         and (s.st_nlink > 1 or not multi))
        if p is not None:
            self.sh("rm %s" % P(p))

    def o_special(self):
        p = self.newname()
        k = self.r.randrange(4)
        if k == 0:
            n = self.r.choice([1, 10, 100, 255, 1000, 3000])
            t = "/".join("t%d" % i for i in range(n // 3 + 1))[:n] if n > 20 else self.r.choice(["../x", "target", "a/b/c", "/abs/path", "."])
            self.sh("ln -s %s %s" % (shlex.quote(t), P(p)))
        elif k == 1:
            self.sh("mkfifo %s" % P(p))
        else:
            self.sh("mknod %s %s %d %d" % (P(p), "cb"[k - 2], self.r.randint(1, 250), self.r.randint(0, 255)))
        self.created.append(p)

    def o_xattr(self):
        p, _ = self.pick(lambda r, s: not stat.S_ISLNK(s.st_mode) and (r == "." or s.st_ino != 256))
        if p is None:
            return
        name = "user.%s" % self.r.choice(["a", "b", "comment", "x" * 40])
        if self.r.random() < 0.2:
            self.sh("setfattr -x %s %s" % (name, P(p)))
            return
        n = self.r.choice([0, 1, 10, 200, 3000, self.r.randint(1, 16000), 60000])
        self.op("xattr", ("path", p), name, n, self.r.randrange(1 << 30))

    def o_acl(self):
        p, s = self.pick(lambda r, s: (self.reg(r, s) or self.dirs()(r, s)))
        if p is None:
            return
        x = self.r.random()
        if x < 0.2:
            self.sh("setfacl -b %s" % P(p))
        elif x < 0.45 and stat.S_ISDIR(s.st_mode):
            self.sh("setfacl -d -m u:%d:rx,g:%d:rwx %s" % (self.r.randint(1000, 1010), self.r.randint(100, 110), P(p)))
        else:
            self.sh("setfacl -m u:%d:rw,g:%d:r,m::rwx %s" % (self.r.randint(1000, 1010), self.r.randint(100, 110), P(p)))

    def o_chown(self):
        p, _ = self.pick(lambda r, s: r == "." or s.st_ino != 256)
        self.sh("chown -h %d:%d %s" % (self.r.choice([0, 1, 1000, 65534, 123456]),
                                       self.r.choice([0, 1, 100, 65534, 7777]), P(p)))

    def o_chmod(self):
        p, _ = self.pick(lambda r, s: not stat.S_ISLNK(s.st_mode) and (r == "." or s.st_ino != 256))
        m = self.r.choice([0o644, 0o600, 0o755, 0o700, 0o444, 0o000, 0o777, 0o4755, 0o2750, 0o1777,
                           self.r.randrange(0o7777)])
        self.sh("chmod %o %s" % (m, P(p)))

    def o_utime(self):
        p, _ = self.pick(lambda r, s: r == "." or s.st_ino != 256)
        t = self.r.randint(0, 2 ** 32)
        ns = self.r.choice([0, self.r.randrange(10 ** 9)])
        self.sh("touch -h -d @%d.%09d %s" % (t, ns, P(p)))

    def o_chattr(self):
        p, s = self.pick(lambda r, s: self.reg(r, s) or self.dirs()(r, s))
        if p is None:
            return
        self.sh("chattr %s%s %s" % (self.r.choice("+-"), self.r.choice("CcAm"), P(p)))

    def o_property(self):
        p, s = self.pick(lambda r, s: self.reg(r, s) or self.dirs()(r, s))
        if p is None:
            return
        v = self.r.choice(["zstd", "lzo", "zlib", ""])
        self.sh("btrfs property set %s compression %s" % (P(p), shlex.quote(v)))

    def o_subvol(self):
        p, _ = self.pick(lambda r, s: r != "." and stat.S_ISDIR(s.st_mode) and s.st_ino == 256)
        if p is not None and self.r.random() < 0.3:
            self.sh("btrfs -q subvolume delete %s" % P(p))
            return
        q = self.newname()
        if self.sh("btrfs -q subvolume create %s" % P(q)):
            self.op("write", ("path", q + "/in-nested"), 0, 5000, "text", 1)

    def o_sync(self):
        self.sh('sync -f "$V"')

    # -- the hostile user's own acts in SRC (see HostileMethod) --
    def users(self):
        return lambda r, s: self.dirs()(r, s) and s.st_uid == USER

    def u_copy(self):
        """The user copies a file it can read into a directory of its own,
        sharing its extents (cp --reflink, as coreutils >= 9 does)."""
        p, s = self.pick(lambda r, s: self.reg(r, s) and s.st_uid != USER and s.st_mode & 0o004)
        d, _ = self.pick(self.users())
        if p is None or d is None:
            return
        q = self.newname(d)
        if self.sh(as_user_cmd("cp --reflink=always %s %s" % (P(p), P(q)))):
            self.shared.append(p)
        self.created.append(q)

    def o_grow(self):
        """Root appends to a file of its that the user copied (a log): the
        next copy -r rerun copies it again, and the user's copy, unchanged,
        shares its extents."""
        live = {r: s for r, s in self.ents}
        c = [p for p in self.shared if p in live and self.reg(p, live[p]) and live[p].st_uid != USER]
        if not c:
            return
        p = self.r.choice(c)
        self.op("write", ("path", p), live[p].st_size, self.r.randint(1, 70000), self.kind(), self.r.randrange(1 << 30))

    def u_write(self):
        p, s = self.pick(lambda r, s: self.reg(r, s) and s.st_uid == USER)
        if p is None:
            return
        self.sh(as_user_cmd("$T op write %s %d %d %s %d" % (
            P(p), self.off(s.st_size), self.size() // 4, self.kind(), self.r.randrange(1 << 30))))

    def u_plant(self):
        d, _ = self.pick(self.users())
        p, s = self.pick(lambda r, s: r != "." and not self.dirs()(r, s))
        if d is None:
            return
        q = self.newname(d)
        how = self.r.choice(["mkfifo %s" % P(q), "mkdir %s" % P(q)] +
                            (["ln -s %s %s" % (shlex.quote(os.path.join(self.V, p)), P(q))] if p else []) +
                            (["ln %s %s" % (P(p), P(q))] if p and s.st_uid == USER else []))
        self.sh(as_user_cmd(how))
        self.created.append(q)

    # -- the whole history --
    def build(self):
        env = self.env
        self.loop, self.mnt = env.mkfs("src", opts=self.opts, mkfs_opts=self.mkfs_opts)
        self.V = os.path.join(self.mnt, "vol")
        self.S = os.path.join(self.mnt, "snaps")
        os.mkdir(self.S)
        self.log.append('btrfs -q subvolume create "$V"')
        subprocess.run(["btrfs", "-q", "subvolume", "create", self.V], check=True)
        if self.hostile:
            self.sh('mkdir "$V"/u%d && chown %d:%d "$V"/u%d' % (USER, USER, USER, USER))
        self.snaps = []
        for k in range(1, self.nsnaps + 1):
            nops = self.r.randint(8, 40) if k > 1 else self.r.randint(15, 50)
            for _ in range(nops):
                self.do_op()
            held = self.hold_flags() if self.r.random() < 0.5 else []
            name = "s%d" % k
            self.log.append('btrfs -q subvolume snapshot -r "$V" "$S"/%s' % name)
            subprocess.run(["btrfs", "-q", "subvolume", "snapshot", "-r", self.V,
                            os.path.join(self.S, name)], check=True)
            self.snaps.append(name)
            if k < self.nsnaps:
                self.change_held(held)
            if k < self.nsnaps and self.r.random() < 0.5:
                # the newest inode gone before a remount: its number comes back
                # with a new generation
                self.ents = self.entries()
                live = [p for p in self.created if any(p == r for r, _ in self.ents)]
                if live and self.r.random() < 0.7:
                    self.sh("rm -rf %s" % P(live[-1]))
                self.remount()

    def hold_flags(self):
        """Give a few inodes flags a backup must keep and the next
        incremental must get past: i and a, which make a command on the
        inode or entries in the directory fail, and A, d, S."""
        self.ents = self.entries()
        held = []
        for _ in range(self.r.randint(1, 3)):
            p, s = self.pick(lambda r, s: r != "." and (self.reg(r, s) or self.dirs()(r, s)))
            if p is None or p in (h for h, _ in held):
                continue
            f = "".join(self.r.sample("iaAdS", self.r.randint(1, 2)))
            if self.sh("chattr +%s %s" % (f, P(p))):
                held.append((p, stat.S_ISDIR(s.st_mode)))
        return held

    def change_held(self, held):
        """As a user would, change what the flags held: grow an append-only
        file, lift i and a, change the inode or its directory, and now and
        then set a flag again and lift it before the snapshot."""
        for p, isdir in held:
            full = os.path.join(self.V, p)
            if not os.path.lexists(full):
                continue        # in a directory held before it, removed
            if not isdir and self.r.random() < 0.5:
                # appending is what a (only) append-only file lets through
                self.sh("head -c %d /dev/urandom >> %s" % (self.r.randint(1, 9000), P(p)))
            self.sh("chattr -i -a %s" % P(p))
            if isdir:
                q = self.newname(p)
                self.op("write", ("path", q), 0, self.size(), self.kind(), self.r.randrange(1 << 30))
                self.created.append(q)
                olds = sorted(os.listdir(full))
                if olds and self.r.random() < 0.5:
                    self.sh("rm -rf %s" % P(os.path.join(p, self.r.choice(olds))))
            else:
                n = os.lstat(full).st_size
                how = self.r.random()
                if how < 0.4:
                    self.op("write", ("path", p), self.r.randint(0, n), self.r.randint(1, 70000),
                            self.kind(), self.r.randrange(1 << 30))
                elif how < 0.6:
                    self.sh("touch -d @%d %s" % (self.r.randint(0, 2 ** 31), P(p)))
                elif how < 0.75:
                    q = self.newname()
                    if self.sh("mv %s %s" % (P(p), P(q))):
                        p = q
                elif how < 0.85:
                    self.sh("ln %s %s" % (P(p), P(self.newname())))
                elif how < 0.95:
                    self.sh("setfattr -n user.held -v %d %s" % (self.r.randint(0, 99), P(p)))
            if self.r.random() < 0.2:
                self.sh("chattr +%s %s" % (self.r.choice("ia"), P(p)))
                self.sh("chattr -i -a %s" % P(p))

    def remount(self):
        self.log.append('umount "$MNT" && mount ${OPTS:+-o "$OPTS"} "$LOOP" "$MNT"')
        self.env.umount(self.mnt)
        self.env.mount(self.loop, self.mnt, self.opts)

    def script(self):
        hdr = """#!/bin/bash
# difftest seed %(seed)d: the source history, replayable outside python.
#   bash THIS_SCRIPT [WORKDIR]   (root; leaves WORKDIR/src mounted on $LOOP)
set -u
T=${T:-"%(py)s %(self)s"}
W=${1:-$(mktemp -d /dev/shm/difftest-replay.XXXXXX)}
OPTS=%(opts)s
umask 022
truncate -s 512M "$W/src.img"
LOOP=$(losetup -f --show "$W/src.img")
mkfs.btrfs -q -f %(mkfs)s "$LOOP" >/dev/null
MNT=$W/src
mkdir -p "$MNT"
mount ${OPTS:+-o "$OPTS"} "$LOOP" "$MNT"
V=$MNT/vol
S=$MNT/snaps
mkdir "$S"
""" % {"seed": self.seed, "self": SELF, "py": USER_PY, "opts": shlex.quote(self.opts),
           "mkfs": " ".join(self.mkfs_opts)}
        return hdr + "\n".join(self.log) + '\necho "history in $S (loop $LOOP)"\n'


# ---------------------------------------------------------------------------
# Check methods. Each carries the history into a fresh filesystem of its
# own; a new way to carry it (encio copy -rT --subvolumes, ...) is one more
# class in METHODS.

def send_args(step):
    a = []
    if step["parent"]:
        a += ["-p", step["parent"]]
    for c in step["clones"]:
        a += ["-c", c]
    return a


SEND_C_SUBVOL = 1
SEND_C_SNAPSHOT = 2
SEND_C_UTIMES = 20
SEND_C_FALLOCATE = 23
SEND_C_FILEATTR = 24
SEND_C_TRUNCATE = 17
SEND_A_SIZE = 4
SEND_A_INO = 3


def total_attr_bytes(data, pos, length):
    """The bytes of what encio send adds at the end of a SUBVOL, SNAPSHOT or
    UTIMES command, which btrfs send has not: a walked tree's layout (a u64
    INO, in SUBVOL) and, last, the estimate of the stream (a u64 SIZE)."""
    end, attrs = pos + 10 + length, []
    p = pos + 10
    while p + 4 <= end:
        t, n = struct.unpack_from("<HH", data, p)
        attrs.append((t, n))
        p += 4 + n
    if p != end:
        return 0
    total = 0
    if attrs and attrs[-1] == (SEND_A_SIZE, 8):
        total += 12
        attrs.pop()
    if attrs and attrs[-1] == (SEND_A_INO, 8):
        total += 12
    return total


def shape_bytes(path):
    """The bytes of a send stream's FALLOCATE and FILEATTR commands, and of
    the stream's size and layout encio send puts in it (in SUBVOL or
    SNAPSHOT, or the size in a UTIMES where its estimate came later)."""
    total = 0
    with open(path, "rb") as f:
        data = f.read()
    pos = 17  # "btrfs-stream\0" and the version
    while pos + 10 <= len(data):
        if data[pos:pos + 13] == b"btrfs-stream\0":
            pos += 17
            continue
        length, cmd = struct.unpack_from("<IH", data, pos)
        if cmd in (SEND_C_FALLOCATE, SEND_C_FILEATTR):
            total += 10 + length
        elif cmd in (SEND_C_SUBVOL, SEND_C_SNAPSHOT, SEND_C_UTIMES):
            total += total_attr_bytes(data, pos, length)
        pos += 10 + length
    return total


def truncates(path):
    """The TRUNCATE commands of a send stream, by their attributes, with
    their sizes (a multiset)."""
    found = collections.Counter()
    with open(path, "rb") as f:
        data = f.read()
    pos = 17
    while pos + 10 <= len(data):
        if data[pos:pos + 13] == b"btrfs-stream\0":
            pos += 17
            continue
        length, cmd = struct.unpack_from("<IH", data, pos)
        if cmd == SEND_C_TRUNCATE:
            found[data[pos + 10:pos + 10 + length]] += 1
        pos += 10 + length
    return found


def fixed_truncate_bytes(fe, fb):
    """The bytes of the TRUNCATEs encio's stream has and btrfs send's has
    not: those encio send adds where the kernel sends none (the size of a
    file whose compressed inline data ends before it)."""
    extra = truncates(fe) - truncates(fb)
    return sum((10 + len(k)) * n for k, n in extra.items())


def send_args_sh(step):
    """send_args(step) and the snapshot, as the replay script names them."""
    return " ".join(('"$S"/' + shlex.quote(os.path.basename(a))) if a.startswith("/") else a
                    for a in send_args(step) + [step["path"]])


class Streams:
    """Each step's stream from each sender, made once and saved (its size
    is checked), then fed to the receivers through a pipe."""

    def __init__(self, ck):
        self.ck = ck
        self.files = {}
        self.results = {}

    def get(self, sender, k):
        key = (sender, k)
        if key not in self.files:
            step = self.ck.steps[k]
            f = os.path.join(self.ck.env.dir, "stream-%s-%d" % (sender, k))
            if sender == "btrfs":
                cmd = ["btrfs", "send", "-q", "--compressed-data"] + send_args(step) + ["-f", f, step["path"]]
            elif self.ck.send_total:
                # the estimate in the stream, as a send that draws progress puts it
                cmd = [self.ck.encio, "send", "--progress", "--format=json"] + send_args(step) + \
                    ["-f", f, step["path"]]
            else:
                cmd = [self.ck.encio, "send", "-q"] + send_args(step) + ["-f", f, step["path"]]
            p = self.ck.env.run(cmd)
            if sender != "btrfs" and self.ck.send_total and p.returncode == 0:
                self.note_estimate(step, p.stdout)
            self.files[key] = f
            self.results[key] = (p.returncode, p.stderr.decode(errors="replace"), cmd)
        return self.files[key], self.results[key]


    def note_estimate(self, step, out):
        """With ESTIMATE_LOG set, a line for send --progress's estimate of
        the stream against its size (send_args and the seed with it)."""
        path = os.environ.get("ESTIMATE_LOG")
        if not path:
            return
        try:
            j = json.loads(out.decode())
        except ValueError:
            return
        with open(path, "a") as f:
            f.write("%d %s %d %d %s\n" % (self.ck.seed, step["name"], j.get("estimated_bytes", 0),
                                         j.get("stream_bytes", 0), "incremental" if send_args(step) else "full"))


class Method:
    name = "?"
    sender = None
    receiver = None
    flags_kept = False      # the inode flags reach the result (FILEATTR sent and applied)
    desc = ""

    def __init__(self, ck):
        self.ck = ck

    def receive_cmd(self, dest):
        if self.receiver == "btrfs":
            return ["btrfs", "receive", dest]
        return [self.ck.encio, "receive", "-q", dest]

    def shell(self, step, dest):
        """The commands of one step, for the reproducer."""
        snd = ("btrfs send --compressed-data" if self.sender == "btrfs" else
               "$ENCIO send --progress" if self.ck.send_total else "$ENCIO send")
        rcv = ("btrfs receive" if self.receiver == "btrfs" else "$ENCIO receive")
        return "%s %s | %s %s" % (snd, send_args_sh(step), rcv, dest)

    def setup(self):
        _, self.mnt = self.ck.env.mkfs("dst-" + self.name)

    def step(self, k):
        """Carry step k; returns (ok, error text, path of the result)."""
        f, (rc, err, cmd) = self.ck.streams.get(self.sender, k)
        if rc != 0:
            return False, "%s exited %d: %s" % (" ".join(cmd), rc, err.strip()[-2000:]), None
        cat = subprocess.Popen(["cat", f], stdout=subprocess.PIPE)
        cmd = self.receive_cmd(self.mnt)
        self.ck.env.log("+ cat %s | %s" % (f, " ".join(cmd)))
        p = subprocess.run(cmd, stdin=cat.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        cat.stdout.close()
        cat.wait()
        if p.returncode != 0:
            return False, "%s exited %d: %s" % (" ".join(cmd), p.returncode,
                                                 p.stderr.decode(errors="replace").strip()[-2000:]), None
        return True, "", os.path.join(self.mnt, self.ck.steps[k]["name"])


class ControlMethod(Method):
    name, sender, receiver = "d", "btrfs", "btrfs"
    desc = "control: btrfs send --compressed-data | btrfs receive"


class MethodA(Method):
    name, sender, receiver = "a", "encio", "btrfs"
    desc = "encio send | btrfs receive (chrooted, canaries at the stream's paths)"

    def step(self, k):
        f, (rc, err, cmd) = self.ck.streams.get(self.sender, k)
        if rc != 0:
            return False, "%s exited %d: %s" % (" ".join(cmd), rc, err.strip()[-2000:]), None
        rc, err, changed = ns_receive(self.ck.env, f, self.mnt, "")
        if changed:
            return False, "btrfs receive of encio send's stream wrote outside DEST (exit %s): %s" % (
                rc, " ".join("/" + c for c in changed[:10])), None
        if rc != 0:
            return False, "btrfs receive exited %s: %s" % (rc, err.strip()[-2000:]), None
        return True, "", os.path.join(self.mnt, self.ck.steps[k]["name"])


class MethodB(Method):
    name, sender, receiver = "b", "encio", "encio"
    flags_kept = True
    desc = "encio send | encio receive"


class MethodC(Method):
    name, sender, receiver = "c", "btrfs", "encio"
    desc = "btrfs send --compressed-data | encio receive"


class CopyMethod(Method):
    """encio copy -r of each snapshot into a plain directory."""
    name = "copy"
    flags_kept = True
    desc = "encio copy -r SNAPSHOT DIR"
    copy = True

    def shell(self, step, dest):
        return "$ENCIO copy -r \"$S\"/%s %s/%s" % (step["name"], dest, step["name"])

    def step(self, k):
        st = self.ck.steps[k]
        dest = os.path.join(self.mnt, st["name"])
        p = self.ck.env.run([self.ck.encio, "-q", "copy", "-r", st["path"], dest])
        if p.returncode != 0:
            return False, "encio copy -r exited %d: %s" % (p.returncode, p.stderr.decode(errors="replace").strip()[-2000:]), None
        # what the snapshot shares keeps shared: the copy takes no more
        # room than its source, or than btrfs receive's copy where that
        # is larger: over 2% (and 64 KiB) fails
        subprocess.run(["sync", "-f", dest])
        src_du, dst_du = disk_usage(st["path"]), disk_usage(dest)
        if src_du is not None and dst_du is not None and dst_du > src_du:
            # files of different users share through root's files only
            src_du = max(src_du, disk_usage_by_owner(st["path"]) or 0)
            ctl = next((m for m in self.ck.methods if m.name == "d"), None)
            if ctl is not None and os.path.isdir(os.path.join(ctl.mnt, st["name"])):
                src_du = max(src_du, disk_usage(os.path.join(ctl.mnt, st["name"])) or 0)
        if src_du is not None and dst_du is not None and dst_du > src_du * 1.02 + 65536:
            return False, "the copy takes %d bytes on disk, its source %d (+%.1f%%)" % (
                dst_du, src_du, 100.0 * (dst_du - src_du) / max(src_du, 1)), None
        return True, "", dest


class InterruptMethod(Method):
    """encio send | encio receive, one step interrupted first (SIGINT or
    SIGKILL of either side, or the pipe closed) at a random byte of the
    stream, then received again from scratch."""
    name, sender, receiver = "i", "encio", "encio"
    flags_kept = True
    desc = "encio send | encio receive, interrupted once, then retried"

    def setup(self):
        super().setup()
        r = random.Random("%d-interrupt" % self.ck.seed)
        self.at = r.randrange(len(self.ck.steps))
        self.how = r.choice(["sigint-send", "sigkill-send", "sigint-recv", "sigkill-recv", "close"])
        self.frac = r.random()
        self.note = ""

    def pipe(self, k, stop_at=None):
        st = self.ck.steps[k]
        env = self.ck.env
        scmd = [self.ck.encio, "send", "-q"] + send_args(st) + [st["path"]]
        rcmd = [self.ck.encio, "receive", "-q", self.mnt]
        env.log("+ %s | %s%s" % (" ".join(scmd), " ".join(rcmd),
                                 "  (%s at byte %s)" % (self.how, stop_at) if stop_at is not None else ""))
        snd = subprocess.Popen(scmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        rcv = subprocess.Popen(rcmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        env.procs += [snd, rcv]
        errs = {}

        def drain(name, f):
            errs[name] = f.read()
        ts = [threading.Thread(target=drain, args=(n, f)) for n, f in
              (("send", snd.stderr), ("recv", rcv.stderr), ("recvout", rcv.stdout))]
        for t in ts:
            t.start()
        n = 0
        acted = False
        try:
            while True:
                want = 65536 if stop_at is None or acted else max(1, min(65536, stop_at - n))
                b = snd.stdout.read1(want)
                if not b:
                    break
                rcv.stdin.write(b)
                n += len(b)
                if stop_at is not None and not acted and n >= stop_at:
                    acted = True
                    if self.how == "close":
                        break
                    target = snd if self.how.endswith("send") else rcv
                    target.send_signal(signal.SIGINT if self.how.startswith("sigint") else signal.SIGKILL)
        except (BrokenPipeError, OSError):
            pass
        for f in (snd.stdout, rcv.stdin):
            try:
                f.close()
            except OSError:
                pass
        rcs = []
        for p in (snd, rcv):
            try:
                rcs.append(p.wait(timeout=120))
            except subprocess.TimeoutExpired:
                p.kill()
                rcs.append("hung")
        for t in ts:
            t.join()
        return rcs, errs, n

    def step(self, k):
        st = self.ck.steps[k]
        dest = os.path.join(self.mnt, st["name"])
        if k == self.at:
            size = os.path.getsize(self.ck.streams.get("encio", k)[0])
            stop = max(1, int(size * self.frac))
            rcs, errs, n = self.pipe(k, stop)
            self.note = "%s at byte %d of %d: exit %s" % (self.how, n, size, rcs)
            if "hung" in rcs:
                return False, "interrupted send | receive hung (%s)" % self.note, None
            if rcs[1] != 0 and os.path.lexists(dest):
                ro = subprocess.run(["btrfs", "property", "get", "-ts", dest, "ro"],
                                    stdout=subprocess.PIPE, text=True).stdout.strip()
                if ro != "ro=true":
                    d = self.ck.env.run(["btrfs", "-q", "subvolume", "delete", dest])
                    if d.returncode:
                        return False, "cannot delete %s: %s" % (dest, d.stderr.decode()), None
                elif not (self.how.endswith("recv") and self.received(dest)):
                    # only a receiver signalled after its END may leave
                    # its subvolume done and then fail
                    return False, "a failed receive left %s read-only (%s)" % (dest, self.note), None
            if not os.path.lexists(dest):
                rcs, errs, n = self.pipe(k)
                if rcs != [0, 0]:
                    return False, "retry after %s: exit %s: %s %s" % (
                        self.note, rcs, errs.get("send", b"").decode(errors="replace")[-1000:],
                        errs.get("recv", b"").decode(errors="replace")[-1000:]), None
            left = self.leftovers()
            if left and self.how == "sigkill-recv" and all(
                    os.path.basename(os.path.dirname(os.path.relpath(f, self.mnt))).startswith(".encio-receive.")
                    or os.path.basename(f).startswith(".encio-receive.") for f in left):
                # killed as it ended: the directory it received in, or the
                # private one, stays until the next receive into DEST
                self.left_after_kill = left
                left = []
            if left:
                return False, "after %s and a retry, left behind: %s" % (self.note, " ".join(left[:20])), None
            return True, "", dest
        rcs, errs, n = self.pipe(k)
        if rcs != [0, 0]:
            return False, "encio send | encio receive: exit %s: %s %s" % (
                rcs, errs.get("send", b"").decode(errors="replace")[-1000:],
                errs.get("recv", b"").decode(errors="replace")[-1000:]), None
        if getattr(self, "left_after_kill", None):
            left = self.leftovers()
            if left:
                return False, "after %s, the next receive left behind: %s" % (
                    self.note, " ".join(left[:20])), None
            self.left_after_kill = None
        return True, "", dest

    def received(self, dest):
        out = subprocess.run(["btrfs", "subvolume", "show", dest], stdout=subprocess.PIPE, text=True).stdout
        for line in out.splitlines():
            if line.strip().startswith("Received UUID:"):
                return line.split()[-1] != "-"
        return False

    def leftovers(self):
        out = []
        for m in (self.mnt, self.ck.hist.mnt):
            p = subprocess.run(["find", m, "-path", "*encio*"], stdout=subprocess.PIPE, text=True)
            out += p.stdout.split()
        return out


class SubvolumesMethod(Method):
    """encio copy -rT --subvolumes of the whole source filesystem (the live
    subvolume, its nested subvolumes and every snapshot) onto a fresh
    filesystem's root: each snapshot arrives read-only, through the relay of
    the kernel's differences, with its flags; nothing named *encio* is left
    on either side but the base kept beside each writable subvolume in SRC
    (a read-only snapshot of it), and the move takes no more room than
    SRC (2%, compsize). In some seeds a first run is stopped
    (SIGINT, SIGKILL, or DEST full) and the command run again. Then
    (finish) the live subvolume and those in it change, the same command
    runs again (with --final in one seed of two, which leaves no base) and
    must bring them over, and one more snapshot, sent with btrfs send -p
    into the moved filesystem by btrfs receive, must come as on the
    control."""
    name, receiver = "sub", "encio"
    flags_kept = True
    desc = "encio copy -rT --subvolumes SRC DEST"

    def setup(self):
        super().setup()
        self.r = random.Random("%d-sub" % self.ck.seed)
        self.how = self.r.choice(["sigint", "sigkill", "enospc", None, None, None])
        self.tag = ""           # said on the seed's line
        # small checkpoints: a difference stopped in flight is gone on with
        # from one (by default they come after 1 GiB or 10 s only)
        self.checkpoint = self.r.choice([None, "64K", "1M"])
        self.note = ""
        self.hung = False
        self.after = []         # the commands of finish(), for the reproducer

    def copy_cmd(self):
        ckpt = ["--checkpoint", self.checkpoint] if self.checkpoint else []
        return [self.ck.encio, "-q", "copy", "-rT", "--subvolumes"] + ckpt + [self.ck.hist.mnt, self.mnt]

    def shell(self, step, dest):
        if step is self.ck.steps[0]:
            lines = []
            if self.note:
                lines.append("# first run stopped: %s" % self.note)
            ckpt = " --checkpoint %s" % self.checkpoint if self.checkpoint else ""
            lines.append("$ENCIO copy -rT --subvolumes%s \"$MNT\" %s" % (ckpt, dest))
            return "\n# ".join(lines + self.after)
        return "# (%s came with the first command)" % step["name"]

    def interrupted_run(self):
        """A first run stopped as self.how says, which the next run takes up."""
        env = self.ck.env
        if self.how == "enospc":
            src, dst = os.statvfs(self.ck.hist.mnt), os.statvfs(self.mnt)
            used = (src.f_blocks - src.f_bfree) * src.f_frsize
            room = int(used * self.r.uniform(0.05, 0.9))
            ballast = os.path.join(self.mnt, "ballast")
            size = max(0, dst.f_bavail * dst.f_frsize - room) // 4096 * 4096
            env.run(["fallocate", "-l", str(size), ballast])
            subprocess.run(["sync", "-f", self.mnt])
            p = env.run(self.copy_cmd())
            os.unlink(ballast)
            subprocess.run(["sync", "-f", self.mnt])
            self.note = "DEST with %d bytes free: exit %d %s" % (
                room, p.returncode, p.stderr.decode(errors="replace").strip()[-300:])
            return
        delay = self.r.uniform(0, 0.8)
        env.log("+ %s  (%s after %.3f s)" % (" ".join(self.copy_cmd()), self.how, delay))
        p = subprocess.Popen(self.copy_cmd(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        env.procs.append(p)
        time.sleep(delay)
        p.send_signal(signal.SIGINT if self.how == "sigint" else signal.SIGKILL)
        try:
            _, err = p.communicate(timeout=120)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            p.kill()
            err, rc = b"", "hung"
        self.hung = rc == "hung"
        self.note = "%s after %.3f s: exit %s %s" % (self.how, delay, rc,
                                                      err.decode(errors="replace").strip()[-300:])

    def run_copy(self, final=False):
        p = self.ck.env.run(self.copy_cmd() + ["--format=json"] + (["--final"] if final else []))
        if p.returncode != 0:
            return "encio copy -rT --subvolumes exited %d: %s" % (
                p.returncode, p.stderr.decode(errors="replace").strip()[-2000:])
        self.summary = json.loads(p.stdout)
        if self.summary.get("subvolumes_resumed") and not self.tag:
            self.tag = "sub: %d in flight gone on with after %s" % (
                self.summary["subvolumes_resumed"], self.how)
        # SRC keeps a base beside each writable subvolume copied (but with
        # --final); send --subvolumes (method pipe) keeps its own
        left = self.left_behind(lambda f, kind: kind == "beside" and (
            not final or f.endswith(BASE_SUFFIXES[1])))
        if left:
            return "left behind: %s" % " ".join(left[:20])
        return ""

    def shape_check(self):
        """The moved filesystem takes no more room than SRC (compsize of
        all its subvolumes, each extent once): over 2% (and 64 KiB)
        fails."""
        for m in (self.ck.hist.mnt, self.mnt):
            subprocess.run(["sync", "-f", m])
        src_du, dst_du = disk_usage(self.ck.hist.mnt), disk_usage(self.mnt)
        if src_du is None or dst_du is None or dst_du <= src_du * 1.02 + 65536:
            return ""
        src_du = max(src_du, disk_usage_by_owner(self.ck.hist.mnt) or 0)
        if dst_du > src_du * 1.02 + 65536:
            return "the move takes %d bytes on disk, SRC %d (+%.1f%%)" % (
                dst_du, src_du, 100.0 * (dst_du - src_du) / max(src_du, 1))
        return ""

    def left_behind(self, base_ok):
        """What is named *encio* in SRC or DEST and may not be: in DEST, a
        base whose subvolume went (copied as any subvolume) may; in SRC, the
        empty directories standing for bases in later snapshots (inode 2),
        orphan bases, and bases beside their subvolume where
        @base_ok(path, kind) says."""
        left = []
        for m in (self.ck.hist.mnt, self.mnt):
            found = subprocess.run(["find", m, "-name", "*encio*", "-print0"],
                                   stdout=subprocess.PIPE, text=True).stdout.split("\0")
            for f in filter(None, found):
                if m == self.mnt:
                    rel = os.path.relpath(f, m)
                    ok = self.base_kind(os.path.join(self.ck.hist.mnt, rel)) == "orphan"
                else:
                    kind = self.base_kind(f)
                    ok = (os.lstat(f).st_ino == EMPTY_SUBVOL_DIR_INO or kind == "orphan"
                          or base_ok(f, kind))
                if not ok:
                    left.append(f)
        return left

    def base_kind(self, path):
        """What @path is of a base as encio keeps one, a read-only snapshot
        of a writable subvolume named for it: "beside" it, an "orphan" (no
        such subvolume beside it now: it was removed or renamed), or None
        (not a base)."""
        name = os.path.basename(path)
        suffix = base_suffix(name)
        if not (name.startswith(".") and suffix):
            return None

        def show(p):
            out = subprocess.run(["btrfs", "subvolume", "show", p], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True).stdout
            return {k.strip(): v.strip() for k, _, v in
                    (l.partition(":") for l in out.splitlines()) if v}

        b = show(path)
        if "readonly" not in b.get("Flags", ""):
            return None
        s = show(os.path.join(os.path.dirname(path), name[1:-len(suffix)]))
        if s.get("UUID") and b.get("Parent UUID") == s["UUID"] and "readonly" not in s.get("Flags", "x"):
            return "beside"
        return "orphan"

    def step(self, k):
        if k == 0:
            if self.how:
                self.interrupted_run()
                if self.hung:
                    return False, "the stopped copy hung (%s)" % self.note, None
            err = self.run_copy() or self.shape_check()
            if err:
                return False, err, None
        dest = os.path.join(self.mnt, os.path.relpath(self.ck.steps[k]["path"], self.ck.hist.mnt))
        ro = subprocess.run(["btrfs", "property", "get", "-ts", dest, "ro"],
                            stdout=subprocess.PIPE, text=True).stdout.strip()
        if ro != "ro=true":
            return False, "%s is not a read-only subvolume (%s)" % (dest, ro or "not a subvolume"), None
        return True, "", dest

    def after_ops(self):
        """Random changes to the live subvolume and those nested in it, run
        and logged as the history's are, but kept out of its log (they come
        after the copy)."""
        h = self.ck.hist
        keep_r, keep_len = h.r, len(h.log)
        h.r = self.r
        try:
            for _ in range(self.r.randint(3, 15)):
                h.do_op()
            for rel, st in h.entries():
                if rel != "." and stat.S_ISDIR(st.st_mode) and st.st_ino == 256 and self.r.random() < 0.5:
                    h.op("write", ("path", rel + "/in-nested"), self.r.randrange(8192),
                         self.r.randrange(1, 20000), "text", self.r.randrange(1 << 30))
        finally:
            self.after += h.log[keep_len:]
            del h.log[keep_len:]
            h.r = keep_r

    def compare_live(self, ctl):
        """The live subvolume against its copy (where the kernel's stream
        gets it wrong, what btrfs receive made of the same difference,
        @ctl, is the measure), and each nested in it exactly."""
        h = self.ck.hist
        top = os.path.join(self.mnt, "vol")
        live = without_bases(tree(h.V, nested=False))
        d = self.ck.compare(self, live, ctl, without_bases(tree(top, nested=False)))
        if d:
            return ".", d
        stack = [r for r, a in live.items()
                 if r != "." and a["type"] == stat.S_IFDIR >> 12 and a["_ino"] == 256]
        while stack:
            rel = stack.pop()
            src, got = os.path.join(h.V, rel), os.path.join(top, rel)
            if not os.path.isdir(got):
                return rel, [(".", "exists", True, False)]
            exp_t = without_bases(tree(src, nested=False))
            for r, a in exp_t.items():
                if r != "." and a["type"] == stat.S_IFDIR >> 12 and a["_ino"] == 256:
                    stack.append(os.path.join(rel, r))
            d = diff_trees(exp_t, without_bases(tree(got, nested=False)))
            if d:
                return rel, d
        return None, []

    def snapshot(self, name):
        h = self.ck.hist
        subprocess.run(["btrfs", "-q", "subvolume", "snapshot", "-r", h.V, os.path.join(h.S, name)],
                       check=True)
        self.after.append('btrfs -q subvolume snapshot -r "$V" "$S"/%s' % name)
        return os.path.join(h.S, name)

    def control(self, ctl, parent, snap):
        """btrfs send -p @parent @snap received by btrfs receive on the
        control: the stream's file, or None if either failed."""
        stream = os.path.join(self.ck.env.dir, "stream-" + os.path.basename(snap))
        p = self.ck.env.run(["btrfs", "send", "-q", "-p", parent, "-f", stream, snap])
        if p.returncode != 0:
            return None
        p = self.ck.env.run(["btrfs", "receive", "-q", "-f", stream, ctl.mnt])
        return stream if p.returncode == 0 else None

    def rerun_prepare(self, name):
        """Changes to the live subvolumes and a new snapshot @name, which
        the rerun copies; the control receives the kernel's difference to
        it, the measure where that is wrong. (control, the snapshot, the
        control's tree of it), or None where there is no control."""
        ctl = next((m for m in self.ck.methods if m.name == "d"), None)
        if ctl is None or not self.ck.ctrl_ok:
            return None
        last = self.ck.steps[-1]["path"]
        self.after_ops()
        mid = self.snapshot(name)
        if not self.control(ctl, last, mid):
            return None
        subprocess.run(["sync", "-f", self.ck.hist.mnt])
        return ctl, mid, tree(os.path.join(ctl.mnt, name))

    def finish(self):
        """(what, diffs) of the first check that fails, or None."""
        prep = self.rerun_prepare("at-rerun")
        if prep is None:
            return None
        ctl, mid, ctl_t = prep
        final = self.r.random() < 0.5
        self.after.append("$ENCIO copy -rT --subvolumes%s \"$MNT\" $D   # again, after the changes above" % (
            " --final" if final else ""))
        err = self.run_copy(final)
        if err:
            return "the rerun after changes to the live subvolume: " + err, []
        rel, d = self.compare_live(ctl_t)
        if d:
            return "the rerun after changes: vol/%s differs from its copy" % rel, d
        # each copy updated is the difference from its base, and the new
        # snapshot from its family's copies
        s = self.summary
        if s["subvolumes_incremental"] < s["subvolumes_replaced"] + 1:
            return "the rerun after changes: %d copies updated, %d of them and the new snapshot as differences" % (
                s["subvolumes_replaced"], s["subvolumes_incremental"]), []
        d = self.ck.compare(self, tree(mid), ctl_t, tree(os.path.join(self.mnt, "snaps", "at-rerun")))
        if d:
            return "the rerun after changes: the new snapshot at-rerun differs from its copy", d
        snap = self.snapshot("after-copy")
        self.after.append('btrfs send -q -p "$S"/at-rerun "$S"/after-copy | $ENCIO receive $D/snaps   # and btrfs receive $D/by-btrfs-receive')
        stream = self.control(ctl, mid, snap)
        if not stream:
            return None
        ctl_t, src, prev = tree(os.path.join(ctl.mnt, "after-copy")), tree(snap), tree(mid)
        for rcv in ("encio", "btrfs"):
            where = os.path.join(self.mnt, "snaps" if rcv == "encio" else "by-btrfs-receive")
            os.makedirs(where, exist_ok=True)
            cmd = ([self.ck.encio, "receive", "-q"] if rcv == "encio" else ["btrfs", "receive", "-q"])
            p = self.ck.env.run(cmd + ["-f", stream, where])
            err = p.stderr.decode(errors="replace").strip()
            if p.returncode != 0 and rcv == "btrfs" and re.search(
                    r"btrfs\.compression=\S+ failed: Invalid argument", err):
                # btrfs receive gives no flags, and sets a compression
                # property on a new file made in a nocow directory (the
                # copy has SRC's flags; what btrfs receive made has none)
                self.ck.notes.append("btrfs receive into the moved filesystem: %s" % err[-200:])
                continue
            if p.returncode != 0 and rcv == "btrfs" and held_refused(os.path.join(where, "after-copy"), err):
                # the move keeps SRC's i and a, which btrfs receive does not
                # lift (btrfs receive's own copies have none): encio
                # receive, which does, took the same stream above
                self.ck.notes.append("btrfs receive into the moved filesystem: %s" % err[-200:])
                continue
            if p.returncode != 0:
                return "%s receive of btrfs send -p at-rerun into the moved filesystem exited %d: %s" % (
                    rcv, p.returncode, err[-1000:]), []
            out = []
            for x in self.ck.compare(AfterCopy[rcv], src, ctl_t, tree(os.path.join(where, "after-copy"))):
                if x[1] == "flags":
                    # btrfs send carries no flag changes: the parent's copy
                    # keeps the flags the parent had (the control's had none);
                    # btrfs receive applies none, and a new inode takes
                    # those of the copy's directories
                    if rcv == "btrfs" or set(x[3] or "") <= set(x[2] or "") | set(
                            ctl_t.get(x[0], {}).get("flags") or "") | set(prev.get(x[0], {}).get("flags") or ""):
                        continue
                out.append(x)
            if out:
                return "btrfs send -p at-rerun | %s receive into the moved filesystem differs" % rcv, out
        return None


def held_refused(top, err):
    """Whether btrfs receive's error @err is EPERM on a path below @top
    that is immutable or append-only, or in a directory that is."""
    m = re.search(r"ERROR: \S+ (.+?)(?: -> .+)? failed: Operation not permitted", err)
    if not m:
        return False
    p = os.path.join(top, m.group(1))
    for q in (p, os.path.dirname(p)):
        st = os.lstat(q) if os.path.lexists(q) else None
        if st and set(file_flags(q, st)[0]) & set("ia"):
            return True
    return False


class PipeMethod(SubvolumesMethod):
    """encio send --subvolumes | encio receive of the whole source
    filesystem onto a fresh filesystem's root, checked as sub's first run:
    each snapshot read-only with its flags, no more room than SRC (2%,
    compsize), and nothing named *encio* left on either side (the send's
    snapshots of the writable subvolumes go at its end)."""
    name, receiver = "pipe", "encio"
    desc = "encio send --subvolumes SRC | encio receive DEST"

    def setup(self):
        super().setup()
        self.r = random.Random("%d-pipe" % self.ck.seed)
        # a first run killed (its sender or its receiver) or its stream
        # cut at a random byte, which a run with the receiver's state then
        # completes; with receive -s (always for a cut), resuming the
        # subvolume in flight where the state names its partial
        self.how = self.r.choice(["send", "receive", "cut", None, None])
        self.resumable = self.how == "cut" or (self.how is not None and self.r.random() < 0.5)
        self.checkpoint = self.r.choice([None, "64K", "1M"]) if self.resumable else None
        self.cut_at = None
        self.resumed = None     # the state named a partial: was it resumed

    def receive_opts(self):
        if not self.resumable:
            return ""
        return "-s " + ("--checkpoint %s " % self.checkpoint if self.checkpoint else "")

    def pipe_cmd(self, state=None, json_out=False):
        q = shlex.quote
        cmd = "%s -q send --subvolumes %s| %s -q receive %s%s%s" % (
            q(self.ck.encio), "--state %s %s " % (q(state), q(self.ck.hist.mnt)) if state
            else q(self.ck.hist.mnt) + " ", q(self.ck.encio), self.receive_opts(),
            "--format=json " if json_out else "", q(self.mnt))
        if state:
            cmd = "%s receive --state %s > %s && %s" % (q(self.ck.encio), q(self.mnt), q(state), cmd)
        return cmd

    def cut_run(self):
        """A first run whose stream stops at a random byte (a link that
        dropped): sent to a file, its head received with -s."""
        q = shlex.quote
        stream = os.path.join(self.ck.env.dir, "pipe-stream")
        p = self.ck.env.run([self.ck.encio, "-q", "send", "--subvolumes", "-f", stream, self.ck.hist.mnt])
        if p.returncode != 0:
            self.note = "its send to a file failed: %s" % p.stderr.decode(errors="replace").strip()[-300:]
            return
        self.cut_at = int(os.path.getsize(stream) * self.r.uniform(0.02, 0.98))
        p = self.ck.env.run(["bash", "-c", "head -c %d %s | %s -q receive %s%s" % (
            self.cut_at, q(stream), q(self.ck.encio), self.receive_opts(), q(self.mnt))])
        os.unlink(stream)
        self.note = "its stream cut at byte %d: exit %d %s" % (
            self.cut_at, p.returncode, p.stderr.decode(errors="replace").strip()[-300:])
        if not self.tag:
            self.tag = "pipe: first run's stream cut"

    def interrupted_run(self):
        """A first run whose sender or receiver is killed (SIGKILL), or
        whose stream is cut."""
        if self.how == "cut":
            self.cut_run()
            self.hung = False
            return
        delay = self.r.uniform(0, 0.5)
        self.ck.env.log("+ %s  (its %s killed after %.3f s)" % (self.pipe_cmd(), self.how, delay))
        p = subprocess.Popen(["bash", "-c", self.pipe_cmd()], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        self.ck.env.procs.append(p)
        time.sleep(delay)
        subprocess.run(["pkill", "-KILL", "-f", "%s -q send --subvolumes %s" % (
            self.ck.encio, self.ck.hist.mnt) if self.how == "send" else
                        "%s -q receive %s%s" % (self.ck.encio, self.receive_opts(), self.mnt)])
        try:
            _, err = p.communicate(timeout=120)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            p.kill()
            err, rc = b"", "hung"
        self.hung = rc == "hung"
        self.note = "its %s killed after %.3f s: exit %s %s" % (
            self.how, delay, rc, err.decode(errors="replace").strip()[-300:])
        if not self.tag:
            self.tag = "pipe: first run's %s killed" % self.how

    def shell(self, step, dest):
        if step is self.ck.steps[0]:
            lines = []
            if self.note:
                rcv = "$ENCIO receive %s" % self.receive_opts()
                if self.cut_at is not None:
                    lines.append("$ENCIO send --subvolumes -f stream \"$MNT\"; head -c %d stream | %s%s" % (
                        self.cut_at, rcv, dest))
                lines.append("# first run (%s)" % self.note)
                lines.append("$ENCIO receive --state %s > state" % dest)
                lines.append("$ENCIO send --subvolumes --state state \"$MNT\" | %s%s" % (rcv, dest))
            else:
                lines.append("$ENCIO send --subvolumes \"$MNT\" | $ENCIO receive %s" % dest)
            return "\n# ".join(lines + self.after)
        return "# (%s came with the first command)" % step["name"]

    def run_copy(self, final=False):
        state = os.path.join(self.ck.env.dir, "pipe-state") if self.how else None
        p = self.ck.env.run(["bash", "-o", "pipefail", "-c", self.pipe_cmd(state, json_out=True)])
        if p.returncode != 0:
            return "encio send --subvolumes | encio receive exited %d: %s" % (
                p.returncode, p.stderr.decode(errors="replace").strip()[-2000:])
        try:
            summary = json.loads(p.stdout)
        except ValueError:
            return "the receive's JSON summary: %r" % p.stdout[-300:]
        if state and self.resumed is None:
            with open(state) as f:
                named = [l.split(" ")[2] for l in f.read().splitlines() if l.startswith("resume ")]
            if named:
                self.resumed = summary["resumed"] == 1
                self.ck.notes.append("pipe: the state named the partial of %s: %s" % (
                    named[0], "resumed" if self.resumed else "sent again"))
                if self.resumed:
                    self.tag = "pipe: the partial of %s resumed" % named[0]
        # the bases it and other methods keep in SRC
        left = self.left_behind(lambda f, kind: kind == "beside")
        if left:
            return "left behind: %s" % " ".join(left[:20])
        return ""

    def dest_edit(self):
        """In one seed of two, someone changes a file in the live
        subvolume's copy in DEST (the writable copy the next run would
        build on): the second run must still make it SRC's."""
        if self.r.random() >= 0.5:
            return
        top = os.path.join(self.mnt, "vol")
        files = []
        for d, dirs, names in os.walk(top):
            dirs[:] = [x for x in dirs if os.lstat(os.path.join(d, x)).st_ino != 256]
            files += [os.path.join(d, n) for n in names if stat.S_ISREG(os.lstat(os.path.join(d, n)).st_mode)]
        if not files:
            return
        f = sorted(files)[self.r.randrange(len(files))]
        try:
            with open(f, "ab") as out:
                out.write(b"changed in DEST\n")
        except OSError:
            return
        subprocess.run(["sync", "-f", self.mnt])
        self.after.append("echo 'changed in DEST' >> $D/%s   # someone in DEST" % shlex.quote(os.path.relpath(f, self.mnt)))

    def finish(self):
        """The live subvolume and those in it changed and a new snapshot
        taken (and, in one seed of two, a file of its copy in DEST), a
        second run with the receiver's state (receive --state, send
        --subvolumes --state) must bring them over, and take no more room
        than SRC."""
        prep = self.rerun_prepare("pipe-rerun")
        if prep is None:
            return None
        _, mid, ctl_t = prep
        self.dest_edit()
        state = os.path.join(self.ck.env.dir, "pipe-state")
        self.after.append("$ENCIO receive --state $D > state; $ENCIO send --subvolumes --state state \"$MNT\" | $ENCIO receive $D   # again, after the changes above")
        p = self.ck.env.run(["bash", "-o", "pipefail", "-c", self.pipe_cmd(state)])
        if p.returncode != 0:
            return "the second run exited %d: %s" % (
                p.returncode, p.stderr.decode(errors="replace").strip()[-2000:]), []
        rel, d = self.compare_live(ctl_t)
        if d:
            return "the second run: vol/%s differs from its copy" % rel, d
        d = self.ck.compare(self, tree(mid), ctl_t, tree(os.path.join(self.mnt, "snaps", "pipe-rerun")))
        if d:
            return "the second run: the new snapshot pipe-rerun differs from its copy", d
        err = self.shape_check()
        if err:
            return "the second run: " + err, []
        return None


class AfterCopyReceive:
    """A receive of a btrfs send -p stream into the moved filesystem,
    compared as method c's."""
    sender, flags_kept = "btrfs", False

    def __init__(self, receiver):
        self.name, self.receiver = "sub", receiver


AfterCopy = {r: AfterCopyReceive(r) for r in ("encio", "btrfs")}


# ---------------------------------------------------------------------------
# btrfs receive of a stream encio wrote, where a write outside DEST shows:
# btrfs-progs 6.2 skips a command it does not know and, with no subvolume
# open, resolves the paths of the commands after it against "/". The
# receive runs in a private mount namespace, chrooted into a tmpfs that
# holds a canary file at "/" + every path the stream names, the system's
# directories bound read-only, and DEST's filesystem at /encio-dest.

SEND_A_PATH, SEND_A_PATH_TO, SEND_A_DATA, SEND_A_CLONE_PATH = 15, 16, 19, 22
NS_SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "dev", "proc")
NS_DEST = "encio-dest"


def stream_paths(path):
    """Every path a stream's commands name (PATH, PATH_TO, CLONE_PATH),
    whatever the command: one btrfs receive does not know included."""
    with open(path, "rb") as f:
        data = f.read()
    out = set()
    pos = 0
    while pos + 17 <= len(data) and data[pos:pos + 13] == b"btrfs-stream\0":
        version = struct.unpack_from("<I", data, pos + 13)[0]
        pos += 17
        while pos + 10 <= len(data):
            if data[pos:pos + 13] == b"btrfs-stream\0":
                break
            length = struct.unpack_from("<I", data, pos)[0]
            end = min(len(data), pos + 10 + length)
            p = pos + 10
            while p + 4 <= end:
                t, n = struct.unpack_from("<HH", data, p)
                if t == SEND_A_DATA and version >= 2:
                    break
                if t in (SEND_A_PATH, SEND_A_PATH_TO, SEND_A_CLONE_PATH):
                    out.add(data[p + 4:p + 4 + n].decode(errors="replace"))
                p += 4 + n
            pos = end
    return sorted(p for p in out if p and "\0" not in p)


def ns_tree(root):
    """{path: (type, size, sha)} of what the chroot's own tmpfs holds."""
    dev = os.lstat(root).st_dev
    out = {}
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if os.lstat(os.path.join(d, x)).st_dev == dev]
        for x in dirs + files:
            p = os.path.join(d, x)
            st = os.lstat(p)
            if st.st_dev != dev:
                continue
            v = (stat.S_IFMT(st.st_mode), st.st_size)
            if stat.S_ISREG(st.st_mode):
                v += (file_hash(p),)
            elif stat.S_ISLNK(st.st_mode):
                v += (os.readlink(p),)
            out[os.path.relpath(p, root)] = v
    return out


def ns_receive_main(argv):
    """difftest.py nsreceive ROOT MNT REL STREAM: run by ns_receive() in a
    private mount namespace; prints a JSON verdict."""
    root, mnt, rel, stream = argv
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=755", "difftest-ns", root], check=True)
    for d in NS_SYSTEM:
        h = "/" + d
        if os.path.islink(h):
            os.symlink(os.readlink(h), os.path.join(root, d))
        elif os.path.isdir(h):
            os.mkdir(os.path.join(root, d))
            if d == "proc":
                subprocess.run(["mount", "-t", "proc", "proc", os.path.join(root, d)], check=True)
                continue
            subprocess.run(["mount", "--rbind", h, os.path.join(root, d)], check=True)
            subprocess.run(["mount", "-o", "remount,bind,ro", os.path.join(root, d)], check=True)
    os.mkdir(os.path.join(root, NS_DEST))
    subprocess.run(["mount", "--bind", mnt, os.path.join(root, NS_DEST)], check=True)
    paths = stream_paths(stream)
    dirs = {os.path.dirname(p) for p in paths}
    for p in paths:
        first = p.split("/")[0]
        if first in NS_SYSTEM or first == NS_DEST or ".." in p.split("/"):
            continue
        parts = p.split("/")
        for i in range(1, len(parts)):
            os.makedirs(os.path.join(root, *parts[:i]), exist_ok=True)
        full = os.path.join(root, p)
        if p in dirs or any(x.startswith(p + "/") for x in dirs):
            os.makedirs(full, exist_ok=True)
        elif not os.path.lexists(full):
            with open(full, "wb") as f:
                f.write(b"canary outside DEST: /" + p.encode() + b"\n")
    before = ns_tree(root)
    try:
        p = subprocess.run(["btrfs", "receive", os.path.join("/", NS_DEST, rel)], stdin=open(stream, "rb"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                           preexec_fn=lambda: (os.chroot(root), os.chdir("/")))
        rc, err = p.returncode, p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired:
        rc, err = "hung", ""
    after = ns_tree(root)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    print(json.dumps({"rc": rc, "stderr": err[-2000:], "canaries": len(before),
                      "changed": changed[:50]}))
    return 0


def ns_receive(env, stream, mnt, rel):
    """btrfs receive -f @stream into @mnt/@rel, chrooted as ns_receive_main
    says: (exit status or "hung", stderr, [paths outside DEST written])."""
    root = tempfile.mkdtemp(prefix="nsroot.", dir=env.dir)
    cmd = ["unshare", "-m", "--propagation", "private", sys.executable, SELF, "nsreceive",
           root, mnt, rel, stream]
    env.log("+ btrfs receive %s < %s  (chrooted, canaries at the stream's paths)" % (
        os.path.join(mnt, rel), stream))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    os.rmdir(root)
    try:
        v = json.loads(p.stdout)
    except ValueError:
        return "error", "nsreceive exited %d: %s" % (p.returncode, p.stderr.decode(errors="replace")[-1000:]), []
    return v["rc"], v["stderr"], v["changed"]


# ---------------------------------------------------------------------------
# A hostile unprivileged user: DEST is a directory it owns (a per-user
# backup directory), some of SRC is its own, and it acts between and during
# root's runs. Its acts are shell lines (setpriv), logged for the replay.

USER = 4242
HANG = 40       # seconds after which a command of a small history is hung
MARK = b"ENCIO-HOSTILE-4242-DEST"     # written by the user into its DEST files only
BTRFS_IOC_SET_RECEIVED_SUBVOL = 0xC0C89425
BTRFS_IOC_SUBVOL_SETFLAGS = 0x4008941A
BTRFS_SUBVOL_RDONLY = 2


def as_user_cmd(words):
    return "setpriv --reuid=%d --regid=%d --clear-groups %s" % (USER, USER, words)


def op_forge(path, uuid, stransid):
    """Give the subvolume at @path (its owner's) the received UUID @uuid
    and make it read-only: what any owner may do."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        arg = bytearray(200)
        arg[0:16] = bytes.fromhex(uuid.replace("-", ""))
        struct.pack_into("<Q", arg, 16, int(stransid))
        fcntl.ioctl(fd, BTRFS_IOC_SET_RECEIVED_SUBVOL, arg)
        fcntl.ioctl(fd, BTRFS_IOC_SUBVOL_SETFLAGS, struct.pack("<Q", BTRFS_SUBVOL_RDONLY))
    finally:
        os.close(fd)


def op_tamper(path, off):
    """Write MARK into @path at @off and put its times back: the edit a
    size and mtime check cannot see."""
    st = os.lstat(path)
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    try:
        n = min(len(MARK), max(0, st.st_size - int(off)))
        os.pwrite(fd, MARK[:n], int(off))
    finally:
        os.close(fd)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


OPS.update({"forge": op_forge, "tamper": op_tamper})


def encio_like_names(name, rng):
    """Names beside DEST/@name that look like encio's working names, in any
    layout: whoever owns such a name is not proven by it."""
    return [".%s.encio-receiving" % name, ".%s.encio-partial.%d" % (name, rng.randint(1, 3)),
            ".%s.encio-partial.resume" % name, ".%s.encio-partial.resume-new" % name,
            ".%s.encio-lock" % name, ".encio-receive.%06x" % rng.randrange(1 << 24),
            ".%s.encio-base" % name, "%s.encio-tmp" % name]


def first_command_end(data):
    """The offset after a stream's first command (its SUBVOL or SNAPSHOT)."""
    return 17 + 10 + struct.unpack_from("<I", data, 17)[0] if len(data) >= 27 else len(data)


def subvol_show(p):
    out = subprocess.run(["btrfs", "subvolume", "show", p], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout
    return {k.strip(): v.strip() for k, _, v in (l.partition(":") for l in out.splitlines()) if v}


def uuids_of(mnt):
    """{UUID: path} of every subvolume of @mnt's filesystem."""
    out = subprocess.run(["btrfs", "subvolume", "list", "-u", mnt], stdout=subprocess.PIPE,
                         text=True).stdout
    res = {}
    for l in out.splitlines():
        m = re.search(r"uuid (\S+) path (.*)$", l)
        if m:
            res[m.group(1)] = m.group(2)
    return res


def has_mark(path):
    """Whether the file @path holds MARK."""
    with open(path, "rb") as f:
        return MARK in f.read()


def marked_files(top, dev_only=True):
    """Regular files under @top not the user's whose bytes hold MARK."""
    p = subprocess.run(["grep", "-rlsF", "-D", "skip", "--null", MARK.decode(), top],
                       stdout=subprocess.PIPE)
    out = []
    for f in filter(None, p.stdout.split(b"\0")):
        f = f.decode(errors="replace")
        try:
            st = os.lstat(f)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_uid != USER:
            out.append(f)
    return out


class HostileMethod(Method):
    """encio send | encio receive -s --checkpoint 64K into DEST/u, a
    directory user 4242 owns, one step cut at a random byte and resumed
    (encio send -t; the resumed stream given to btrfs receive first, which
    must refuse it before any write, chrooted with canaries as for method
    a); and encio copy -rT of each snapshot over a writable snapshot of the
    copy of the one before (a rerun). Before each step the user plants
    FIFOs, symlinks, hard links, files and directories at names like
    encio's working names, renames root's received snapshots onto them,
    makes a subvolume with a received UUID forged from root's copy of the
    parent, rewrites its own copied files with their times put back, and
    reads DEST; while encio runs, it reads DEST (ls -lR, cat). Checks, on
    top of the result's: the user's plants that are not at a working name
    of the NAME being received, root's received subvolumes and the files
    symlinks point to are all as they were; no file not the user's holds
    the bytes it wrote; no command hangs; a resume after reads only or acts
    beside encio's names is taken."""
    name, sender, receiver = "h", "encio", "encio"
    flags_kept = True
    desc = "encio send | encio receive -s into a directory of user 4242, cut, resumed, with that user's acts"

    def setup(self):
        super().setup()
        self.r = random.Random("%d-hostile" % self.ck.seed)
        self.D = os.path.join(self.mnt, "u")
        os.mkdir(self.D)
        os.chown(self.D, USER, USER)
        self.C = os.path.join(self.mnt, "copies")
        os.mkdir(self.C)
        self.cut_at = self.r.randrange(len(self.ck.steps))
        self.frac = self.r.uniform(0.05, 0.95)
        self.acts = {}          # step: [shell lines]
        self.plants = {}        # path: what it was (lstat and content)
        self.received = {}      # UUID: name, of root's received subvolumes
        self.tampered = set()   # copies rewritten by the user (rel paths)
        self.canary = os.path.join(self.ck.env.dir, "host-canary")
        with open(self.canary, "wb") as f:
            f.write(b"root's file outside DEST\n")
        self.canary_sha = file_hash(self.canary)
        self.note = ""
        self.tag = ""
        self.did = []           # the user's acts before this step, in short
        self.did_all = []       # and before every step, for the seed's line

    def user(self, k, words, fatal=False):
        line = as_user_cmd(words)
        self.acts.setdefault(k, []).append(line)
        p = subprocess.run(["bash", "-c", line], env=dict(os.environ, T=user_t()),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)
        self.ck.env.log("$ %s%s" % (line, "" if p.returncode == 0 else "  # rc %d: %s" % (
            p.returncode, p.stderr.decode(errors="replace").strip()[:200])))
        return p.returncode == 0

    def on_own(self, name):
        """The user's plants at names of encio's working state for @name in
        the layout encio documented before it moved that state into a
        directory of its own: encio may replace these (never follow them)."""
        pre = "." + name + ".encio"
        return [p for p in self.plants if os.path.dirname(p) == self.D and os.path.basename(p).startswith(pre)]

    def remember(self, path):
        try:
            st = os.lstat(path)
        except OSError:
            return
        v = (stat.S_IFMT(st.st_mode), st.st_ino)
        if stat.S_ISREG(st.st_mode):
            v += (file_hash(path),)
        elif stat.S_ISLNK(st.st_mode):
            v += (os.readlink(path),)
        self.plants[path] = v

    def act(self, k):
        """The user's acts before step k, on DEST/u and on the copies."""
        r = self.r
        name = self.ck.steps[k]["name"]
        q = shlex.quote
        for _ in range(r.randint(1, 4)):
            what = r.choice(["plant", "plant", "plant", "rename", "forge", "read"])
            if what == "plant":
                own = r.random() < 0.7
                nm = r.choice(encio_like_names(name, r) if own else
                              encio_like_names(self.ck.steps[min(k + 1, len(self.ck.steps) - 1)]["name"], r) +
                              ["%s.tmp" % name, ".%s" % name, "%s~" % name])
                p = os.path.join(self.D, nm)
                if os.path.lexists(p):
                    continue
                kind = r.choice(["fifo", "symlink", "file", "hardlink", "dir"])
                mine = os.path.join(self.D, "mine")
                if kind == "fifo":
                    ok = self.user(k, "mkfifo %s" % q(p))
                elif kind == "symlink":
                    ok = self.user(k, "ln -s %s %s" % (q(self.canary), q(p)))
                elif kind == "file":
                    ok = self.user(k, "sh -c %s" % q("printf '%s %s' > %s" % (MARK.decode(), nm, q(p))))
                elif kind == "hardlink":
                    ok = self.user(k, "sh -c %s" % q("[ -e %s ] || printf %s > %s; ln %s %s" % (
                        q(mine), MARK.decode(), q(mine), q(mine), q(p))))
                    self.remember(mine)
                else:
                    ok = self.user(k, "mkdir %s" % q(p))
                if ok:
                    self.remember(p)
                    self.did.append(kind)
            elif what == "rename" and k > 0:
                # root's received snapshot onto a working name of this NAME
                olds = [s["name"] for s in self.ck.steps[:k] if os.path.isdir(os.path.join(self.D, s["name"]))]
                if not olds:
                    continue
                nm = r.choice(encio_like_names(name, r)[:3])
                p = os.path.join(self.D, nm)
                if not os.path.lexists(p) and self.user(k, "mv %s %s" % (q(os.path.join(self.D, r.choice(olds))), q(p))):
                    self.did.append("rename")
            elif what == "forge" and k > 0 and self.ck.steps[k]["parent"]:
                par = os.path.join(self.D, os.path.basename(self.ck.steps[k]["parent"]))
                info = subvol_show(par)
                if not info.get("Received UUID", "-").strip("-"):
                    continue
                p = os.path.join(self.D, "fake-%d" % k)
                if self.user(k, "btrfs -q subvolume create %s" % q(p)) and \
                   self.user(k, "sh -c %s" % q("printf %s > %s/HOSTILE" % (MARK.decode(), q(p)))) and \
                   self.user(k, "$T op forge %s %s %s" % (q(p), info["Received UUID"], info.get("Send transid", "0"))):
                    self.remember(p)
                    self.did.append("forge")
            elif what == "read":
                self.user(k, "sh -c %s" % q("ls -lRa %s >/dev/null 2>&1; find %s -type f -readable -exec cat {} + >/dev/null 2>&1; true" % (
                    q(self.D), q(self.D))))
                self.did.append("read")
        if k > 0:
            # its copies of the snapshot before, rewritten by copy_rerun()
            prev = os.path.join(self.C, self.ck.steps[k - 1]["name"])
            mine = []
            for d, dirs, files in os.walk(prev):
                for f in files:
                    fp = os.path.join(d, f)
                    st = os.lstat(fp)
                    if st.st_uid == USER and stat.S_ISREG(st.st_mode) and st.st_size > 0:
                        mine.append(os.path.relpath(fp, prev))
            if mine:
                self.tamper_next = sorted(mine)
                self.did.append("tamper")

    def reader(self):
        """The user while encio runs: it reads DEST (ls -lR, cat) and makes
        FIFOs at .encio-during.N, names of the kind encio's are; stopped by
        the caller, then check() wants every FIFO it made still there."""
        q = shlex.quote(self.D)
        line = as_user_cmd("sh -c %s" % shlex.quote(
            "n=$(ls -A %s | grep -c '^[.]encio-during[.]'); while :; do ls -lRa %s >/dev/null 2>&1; find %s -type f -readable -exec cat {} + >/dev/null 2>&1; "
            "[ $n -lt 40 ] && mkfifo %s/.encio-during.$n && n=$((n+1)); sleep 0.05; done" % (q, q, q, q)))
        p = subprocess.Popen(["bash", "-c", "exec " + line], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.ck.env.procs.append(p)
        return p

    def receive(self, data, stop=None, extra=()):
        """encio receive -s of @data (bytes), its input ended after @stop bytes."""
        cmd = [self.ck.encio, "receive", "-q", "-s", "--checkpoint", "64K"] + list(extra) + [self.D]
        self.ck.env.log("+ %s%s" % (" ".join(cmd), "  (input cut at byte %d)" % stop if stop else ""))
        rd = self.reader()
        try:
            p = subprocess.run(cmd, input=data if stop is None else data[:stop], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=HANG)
            rc, err = p.returncode, p.stderr.decode(errors="replace").strip()
        except subprocess.TimeoutExpired:
            rc, err = "hung", ""
        finally:
            rd.kill()
            rd.wait()
        return rc, err

    def recover(self, name):
        """Root clearing a partial it was refused to go on with, as a person
        would: the subvolumes and files named .NAME.encio* it owns and no
        user planted, and none of the received ones."""
        for e in os.listdir(self.D):
            p = os.path.join(self.D, e)
            if not (e.startswith("." + name + ".encio") or e.startswith(".encio-receive.")) or p in self.plants:
                continue
            st = os.lstat(p)
            info = subvol_show(p) if stat.S_ISDIR(st.st_mode) and st.st_ino == 256 else {}
            if info.get("UUID") in self.received:
                # root's backup the user renamed there: back to its name
                back = os.path.join(self.D, self.received[info["UUID"]])
                os.rename(p, back if not os.path.lexists(back) else back + ".moved-back")
                continue
            if st.st_uid != 0:
                continue
            if info:
                subprocess.run(["btrfs", "-q", "subvolume", "delete", p], stdout=subprocess.DEVNULL)
            elif stat.S_ISDIR(st.st_mode):
                subprocess.run(["rm", "-rf", p])
            else:
                os.unlink(p)

    def clear(self, name):
        """What root does after a refusal that the user's acts on encio's
        names caused: encio's leftovers, the user's plants at those names
        and its forged subvolumes go."""
        self.recover(name)
        for p in [p for p in self.plants if os.path.basename(p).startswith("fake-")]:
            subprocess.run(["btrfs", "-q", "subvolume", "delete", p], stdout=subprocess.DEVNULL)
            del self.plants[p]
        for p in self.on_own(name):
            subprocess.run(["rm", "-rf", p])
            del self.plants[p]

    def step(self, k):
        st = self.ck.steps[k]
        name = st["name"]
        self.tamper_next = []
        self.did = []
        self.act(k)
        self.did_all += ["%s:%s" % (name, "+".join(self.did))] if self.did else []
        self.tag = "h: %s cut at %d%%, user %s" % (self.ck.steps[self.cut_at]["name"], 100 * self.frac,
                                                 " ".join(self.did_all) or "idle")
        bad = self.copy_rerun(k)
        if bad:
            return False, bad, None
        f, (rc, err, cmd) = self.ck.streams.get("encio", k)
        if rc != 0:
            return False, "%s exited %d: %s" % (" ".join(cmd), rc, err.strip()[-2000:]), None
        with open(f, "rb") as fh:
            data = fh.read()
        # acts beside encio's names only: nothing may fail. A forged
        # subvolume may be refused as a parent or clone source, while any is
        benign = not self.on_own(name) and "rename" not in self.did and not any(
            os.path.basename(p).startswith("fake-") for p in self.plants)
        if k == self.cut_at:
            stop = max(1, int(len(data) * self.frac))
            rc, err = self.receive(data, stop)
            self.note = "input cut at byte %d of %d: exit %s" % (stop, len(data), rc)
            if rc == "hung":
                return False, "encio receive -s hung (%s)" % self.note, None
            bad = self.check(k)
            if bad:
                return False, "after the cut receive: " + bad, None
            if rc != 0 and stop < first_command_end(data):
                # cut before the subvolume was made: nothing to resume
                rc, err = self.receive(data)
                if rc != 0:
                    return False, "encio receive -s after a cut before its first command: exit %s: %s" % (
                        rc, err[-1000:]), None
            elif rc != 0:
                bad = self.resume(k, benign)
                if bad:
                    return False, bad, None
        else:
            rc, err = self.receive(data)
            if rc == "hung":
                return False, "encio receive -s of %s hung (user: %s)" % (name, ",".join(self.did)), None
            if rc != 0:
                bad = self.check(k)
                if bad:
                    return False, "after a failed receive (%s): %s" % (err.splitlines()[0] if err else "", bad), None
                if benign:
                    return False, "encio receive -s failed after acts beside its names (%s): %s" % (
                        ",".join(self.did), err[-1500:]), None
                # a refusal on its own names: safe if a second try after
                # clearing encio's leftovers (and the forgery) works
                self.clear(name)
                rc, err2 = self.receive(data)
                if rc != 0:
                    return False, "encio receive -s refused (%s), and again once the user's plants at its names were gone: %s" % (
                        err[-500:], err2[-1000:]), None
                self.ck.notes.append("%s: refused after the user's acts (%s): %s" % (
                    name, ",".join(self.did), err.splitlines()[0] if err else ""))
        bad = self.check(k)
        if bad:
            return False, bad, None
        res = os.path.join(self.D, name)
        self.received[subvol_show(res).get("UUID")] = name
        return True, "", res

    def resume(self, k, benign):
        st = self.ck.steps[k]
        env = self.ck.env
        p = env.run([self.ck.encio, "receive", "--resume-token", os.path.join(self.D, st["name"])], timeout=60)
        if p.returncode != 0:
            if benign:
                return "no resume (%s) after the user only read DEST or acted beside encio's names (%s): %s" % (
                    self.note, ",".join(self.did), p.stderr.decode(errors="replace").strip()[-500:])
            self.clear(st["name"])
            f = self.ck.streams.get("encio", k)[0]
            with open(f, "rb") as fh:
                rc, err = self.receive(fh.read())
            return "" if rc == 0 else "after a refused resume and its partial cleared, the receive failed: %s" % err[-1000:]
        tok = p.stdout.decode().strip()
        rs = os.path.join(env.dir, "stream-resumed-%d" % k)
        p = env.run([self.ck.encio, "send", "-q", "-t", tok] + send_args(st) + ["-f", rs, st["path"]], timeout=120)
        if p.returncode != 0:
            err = p.stderr.decode(errors="replace").strip()
            if "regenerated is not the one received" not in err:
                return "encio send -t exited %d (%s): %s" % (p.returncode, self.note, err[-1000:])
            # send -t regenerates the stream, and its choice of clone or
            # write follows the extent tree's references, which changes
            # in SRC (the user's reflinks, a live subvolume's writes) can
            # move since the cut: refused, as "send it whole again" says
            self.ck.notes.append("%s: send -t refused (SRC's sharing moved since the cut), sent whole again" % st["name"])
            self.clear(st["name"])
            f = self.ck.streams.get("encio", k)[0]
            with open(f, "rb") as fh:
                rc, err = self.receive(fh.read())
            return "" if rc == 0 else "after send -t was refused and the partial cleared, the receive failed: %s" % err[-1000:]
        before = sorted(os.listdir(self.D))
        rc, err, changed = ns_receive(env, rs, self.mnt, "u")
        after = sorted(os.listdir(self.D))
        if changed:
            return "btrfs receive of the resumed stream (encio send -t) wrote outside DEST, exit %s: %s (%s)" % (
                rc, " ".join("/" + c for c in changed[:10]), err.strip()[-300:])
        if rc == 0 or before != after:
            return "btrfs receive of the resumed stream (encio send -t) was not refused before any write: exit %s, DEST before %s, after %s" % (
                rc, before, after)
        with open(rs, "rb") as fh:
            rc, err = self.receive(fh.read())
        if rc != 0:
            return "the resumed receive (%s) exited %s: %s" % (self.note, rc, err[-1000:])
        return ""

    def check(self, k):
        """What the user's acts must not have changed."""
        gone = []
        own = self.on_own(self.ck.steps[k]["name"])
        for p, v in sorted(self.plants.items()):
            try:
                st = os.lstat(p)
                now = (stat.S_IFMT(st.st_mode), st.st_ino)
                if stat.S_ISREG(st.st_mode):
                    now += (file_hash(p),)
                elif stat.S_ISLNK(st.st_mode):
                    now += (os.readlink(p),)
            except OSError:
                now = None
            if now != v and p in own:
                del self.plants[p]      # replaced: what it pointed to is checked below
            elif now != v:
                gone.append("%s (%s)" % (os.path.relpath(p, self.mnt), "gone" if now is None else "changed"))
        if gone:
            return "the user's own names were deleted or changed: %s" % " ".join(gone[:10])
        during = sorted(int(e.rsplit(".", 1)[1]) for e in os.listdir(self.D) if e.startswith(".encio-during."))
        if during and (during != list(range(len(during))) or not all(
                stat.S_ISFIFO(os.lstat(os.path.join(self.D, ".encio-during.%d" % n)).st_mode) for n in during)):
            return "the FIFOs the user made while encio ran are not all there: %s" % during
        have = uuids_of(self.mnt)
        lost = [n for u, n in self.received.items() if u not in have]
        if lost:
            return "root's received subvolumes deleted (the user had renamed them): %s" % " ".join(lost)
        if file_hash(self.canary) != self.canary_sha:
            return "a file outside DEST, behind the user's symlink, changed"
        leak = marked_files(self.mnt) + marked_files(self.ck.hist.mnt)
        if leak:
            return "files not the user's hold the bytes it wrote into its own: %s" % " ".join(
                os.path.relpath(x, self.ck.env.dir) for x in leak[:10])
        return ""

    def copy_rerun(self, k):
        """encio copy -rT of snapshot k over a snapshot of the copy of the
        one before, which the user rewrote where it owns files."""
        st = self.ck.steps[k]
        dest = os.path.join(self.C, st["name"])
        env = self.ck.env
        if k:
            subprocess.run(["btrfs", "-q", "subvolume", "snapshot",
                            os.path.join(self.C, self.ck.steps[k - 1]["name"]), dest], check=True)
            # a rerun does not turn a directory into a file or back (it
            # fails): those names go first, as a person would remove them
            exp, got = tree(st["path"]), tree(dest, nested=False)
            isdir = stat.S_IFDIR >> 12
            for rel in sorted(set(exp) & set(got)):
                if rel != "." and (exp[rel]["type"] == isdir) != (got[rel]["type"] == isdir) and \
                   os.path.lexists(os.path.join(dest, rel)):
                    # append-only or immutable, there or on its directory,
                    # would refuse it: lifted first, as a person would
                    subprocess.run(["chattr", "-f", "-i", "-a", os.path.dirname(os.path.join(dest, rel))],
                                   stderr=subprocess.DEVNULL)
                    subprocess.run(["chattr", "-R", "-f", "-i", "-a", os.path.join(dest, rel)],
                                   stderr=subprocess.DEVNULL)
                    subprocess.run(["rm", "-rf", os.path.join(dest, rel)], check=True)
            for rel in self.tamper_next:
                if self.user(k, "$T op tamper %s %d" % (shlex.quote(os.path.join(dest, rel)), self.r.randrange(0, 4096))):
                    self.tampered.add(rel)
        else:
            subprocess.run(["btrfs", "-q", "subvolume", "create", dest], check=True)
        p = env.run([self.ck.encio, "-q", "copy", "-rT", st["path"], dest], timeout=300)
        if p.returncode != 0:
            return "encio copy -rT %s over the copy of the snapshot before exited %d: %s" % (
                st["name"], p.returncode, p.stderr.decode(errors="replace").strip()[-1000:])
        leak = marked_files(dest)
        if leak:
            return "encio copy -rT rerun: files not the user's hold the bytes it wrote into its own copies: %s" % " ".join(
                os.path.relpath(x, dest) for x in leak[:10])
        exp = tree(st["path"])
        got = tree(dest)
        out = []
        for rel, attr, e, g in self.ck.compare(CopyMethod(self.ck), exp, None, got):
            if attr == "exists" and not e:
                continue        # a rerun keeps what SRC no longer has
            if attr == "content" and got[rel]["owner"] == "%d:%d" % (USER, USER) and (
                    self.tampered.intersection((rel,) + got[rel].get("links", ())) or
                    has_mark(os.path.join(dest, rel))):
                continue        # the user's own copy, as it left it, by any of its names, or
                                # sharing a range with one (a clone source of its own files)
            if attr == "links" and isinstance(g, tuple):
                g = tuple(x for x in g if x in exp)      # and names it kept
                if e == g:
                    continue
            if rel == "." and attr == "mtime":
                continue
            out.append((rel, attr, e, g))
        if out:
            return "encio copy -rT rerun of %s differs from it at %s" % (st["name"], "; ".join(
                "%s: %s: %s vs %s" % (r, a, short(e), short(g)) for r, a, e, g in out[:5]))
        return ""

    def shell(self, step, dest):
        k = self.ck.steps.index(step)
        lines = ["# user %d: %s" % (USER, l.replace(self.mnt, dest).replace(self.ck.env.dir, "$W"))
                 for l in self.acts.get(k, [])]
        cut = "head -c %d | " % max(1, int(os.path.getsize(self.ck.streams.get("encio", k)[0]) * self.frac)) \
            if k == self.cut_at else ""
        lines.append("$ENCIO copy -rT \"$S\"/%s %s/copies/%s   # over a snapshot of the copy before" % (step["name"], dest, step["name"]))
        lines.append("$ENCIO send %s | %s$ENCIO receive -s --checkpoint 64K %s/u" % (send_args_sh(step), cut, dest))
        if cut:
            lines.append('$ENCIO send -t "$($ENCIO receive --resume-token %s/u/%s)" %s > resumed  # to btrfs receive (refused), then encio receive -s' % (
                dest, step["name"], send_args_sh(step)))
        return "\n".join(lines)



# ---------------------------------------------------------------------------
# encio diff against the kernel's difference: btrfs send --no-data -p
# replayed over the parent's tree, both put in one normal form.

SEND_CMD_TYPE = {3: "F", 4: "/", 6: "|", 7: "=", 8: "@"}      # MKFILE MKDIR MKFIFO MKSOCK SYMLINK
SEND_C_MKNOD, SEND_C_RENAME, SEND_C_LINK, SEND_C_UNLINK, SEND_C_RMDIR = 5, 9, 10, 11, 12
SEND_C_SET_XATTR, SEND_C_REMOVE_XATTR, SEND_C_WRITE, SEND_C_CLONE = 13, 14, 15, 16
SEND_C_CHMOD, SEND_C_CHOWN, SEND_C_UPDATE_EXTENT, SEND_C_ENCODED_WRITE = 18, 19, 22, 25
SEND_A_MODE, SEND_A_XATTR_NAME, SEND_A_PATH, SEND_A_PATH_TO = 5, 13, 15, 16
SEND_A_PATH_LINK, SEND_A_FILE_OFFSET, SEND_A_DATA, SEND_A_CLONE_LEN = 17, 18, 19, 24
SEND_A_UNENCODED_FILE_LEN = 27


def stream_commands(path):
    """[(command, {attr: bytes})] of a stream file (version 1 or 2)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:13] != b"btrfs-stream\0":
        raise ValueError("not a stream")
    version = struct.unpack_from("<I", data, 13)[0]
    pos, out = 17, []
    while pos + 10 <= len(data):
        length, cmd = struct.unpack_from("<IH", data, pos)
        end = pos + 10 + length
        attrs, p = {}, pos + 10
        while p + 4 <= end:
            t, n = struct.unpack_from("<HH", data, p)
            if t == SEND_A_DATA and version >= 2:
                attrs[t] = data[p + 2:end]
                break
            attrs[t] = data[p + 4:p + 4 + n]
            p += 4 + n
        out.append((cmd, attrs))
        pos = end
    return out


def type_char(mode):
    for test, c in ((stat.S_ISDIR, "/"), (stat.S_ISLNK, "@"), (stat.S_ISFIFO, "|"),
                    (stat.S_ISSOCK, "="), (stat.S_ISBLK, "B"), (stat.S_ISCHR, "C")):
        if test(mode):
            return c
    return "F"


class DiffObj:
    def __init__(self, new, ftype):
        self.new, self.type = new, ftype
        self.children = {}
        self.names = set()          # (parent DiffObj, name)
        self.pnames = {}            # the parent's: (parent, name) -> path
        self.touched = False
        self.data, self.meta, self.xattrs = [], set(), set()


def merged(ranges):
    out = []
    for o, n in sorted(ranges):
        if n <= 0:
            continue
        if out and o <= out[-1][0] + out[-1][1]:
            out[-1][1] = max(out[-1][1], o + n - out[-1][0])
        else:
            out.append([o, n])
    return ",".join("%d+%d" % (o, n) for o, n in out)


def kernel_diff_form(parent, stream):
    """The normal form of the kernel's difference: its commands replayed
    over the parent's tree (inodes by st_ino), each inode's changes."""
    root = DiffObj(False, "/")
    objs, by_ino = [root], {}

    def walk(d, obj, rel):
        for e in sorted(os.scandir(d), key=lambda e: e.name):
            st = e.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode) and st.st_ino in (2, 256):
                continue        # a nested subvolume: not in this tree
            o = by_ino.get(st.st_ino)
            if o is None:
                o = by_ino[st.st_ino] = DiffObj(False, type_char(st.st_mode))
                objs.append(o)
            name = e.name.encode(errors="surrogateescape")
            obj.children[name] = o
            o.names.add((obj, name))
            path = (rel + b"/" + name) if rel else name
            o.pnames[(obj, name)] = path
            if stat.S_ISDIR(st.st_mode):
                walk(e.path, o, path)
    walk(parent, root, b"")

    def resolve(path):
        o = root
        for c in path.split(b"/") if path else []:
            o = o.children[c]
        return o

    def split(path):
        d, _, n = path.rpartition(b"/")
        return resolve(d), n

    def attach(path, o):
        d, n = split(path)
        d.children[n] = o
        o.names.add((d, n))

    def detach(path):
        d, n = split(path)
        o = d.children.pop(n)
        o.names.discard((d, n))
        return o

    for cmd, a in stream_commands(stream):
        path = a.get(SEND_A_PATH)
        if cmd in (SEND_C_SUBVOL, SEND_C_SNAPSHOT):
            continue
        if cmd in SEND_CMD_TYPE or cmd == SEND_C_MKNOD:
            t = SEND_CMD_TYPE.get(cmd) or type_char(struct.unpack("<Q", a[SEND_A_MODE])[0])
            o = DiffObj(True, t)
            objs.append(o)
            attach(path, o)
            continue
        if cmd == SEND_C_RENAME:
            attach(a[SEND_A_PATH_TO], detach(path))
            continue
        if cmd == SEND_C_LINK:
            attach(path, resolve(a[SEND_A_PATH_LINK]))
            continue
        if cmd in (SEND_C_UNLINK, SEND_C_RMDIR):
            detach(path)
            continue
        if path is None:
            continue
        o = resolve(path)
        o.touched = True
        off = struct.unpack("<Q", a[SEND_A_FILE_OFFSET])[0] if SEND_A_FILE_OFFSET in a else 0
        if cmd == SEND_C_WRITE:
            o.data.append((off, len(a.get(SEND_A_DATA, b""))))
        elif cmd == SEND_C_CLONE:
            o.data.append((off, struct.unpack("<Q", a[SEND_A_CLONE_LEN])[0]))
        elif cmd == SEND_C_UPDATE_EXTENT:
            o.data.append((off, struct.unpack("<Q", a[SEND_A_SIZE])[0]))
        elif cmd == SEND_C_ENCODED_WRITE:
            o.data.append((off, struct.unpack("<Q", a[SEND_A_UNENCODED_FILE_LEN])[0]))
        elif cmd == SEND_C_CHMOD:
            o.meta.add("mode")
        elif cmd == SEND_C_CHOWN:
            o.meta.add("owner")
        elif cmd in (SEND_C_SET_XATTR, SEND_C_REMOVE_XATTR):
            o.xattrs.add(a[SEND_A_XATTR_NAME])

    def final_path(pair):
        d, n = pair
        parts = [n]
        while d is not root:
            (d, n), = d.names
            parts.append(n)
        return b"/".join(reversed(parts))

    lines = set()
    for o in objs:
        now = {pair: final_path(pair) for pair in o.names}
        if o is root:
            shown = b"."
        elif now:
            shown = min(now.values())
        if o.new:
            for p in now.values():
                lines.add("+ %s %s" % (o.type, p.decode(errors="replace")))
            if not now:
                continue
        else:
            gone = [o.pnames[k] for k in o.pnames if k not in now]
            added = [now[k] for k in now if k not in o.pnames]
            if not now and o is not root:
                for p in gone:
                    lines.add("- %s %s" % (o.type, p.decode(errors="replace")))
                continue
            if len(gone) == 1 and len(added) == 1:
                lines.add("R %s %s -> %s" % (o.type, gone[0].decode(errors="replace"),
                                             added[0].decode(errors="replace")))
            else:
                lines |= {"- %s %s" % (o.type, p.decode(errors="replace")) for p in gone}
                lines |= {"+ %s %s" % (o.type, p.decode(errors="replace")) for p in added}
            if not o.touched:
                continue
            lines.add("M %s %s" % (o.type, shown.decode(errors="replace")))
            if o.meta:
                lines.add("O %s %s" % (shown.decode(errors="replace"), ",".join(sorted(o.meta))))
        if o.data and merged(o.data):
            lines.add("D %s %s" % (shown.decode(errors="replace"), merged(o.data)))
        if o.xattrs:
            lines.add("X %s %s" % (shown.decode(errors="replace"),
                                   ",".join(sorted(x.decode(errors="replace") for x in o.xattrs))))
    return lines


def encio_diff_form(out):
    """The same normal form of encio diff --format=json's entries."""
    def raw(v):
        # encio writes a byte that is not UTF-8 as U+0080..U+00FF
        return v.encode("utf-8", "surrogateescape").decode(errors="replace")
    lines = set()
    for e in json.loads(out)["entries"]:
        path = raw(e["path"])
        if e["change"] == "R":
            lines.add("R %s %s -> %s" % (e["type"], raw(e["old_path"]), path))
            continue
        lines.add("%s %s %s" % (e["change"], e["type"], path))
        meta = sorted(set(e.get("what", [])) & {"mode", "owner"})
        if meta and e["change"] == "M":
            lines.add("O %s %s" % (path, ",".join(meta)))
        if e.get("data") and merged(e["data"]):
            lines.add("D %s %s" % (path, merged(e["data"])))
        if e.get("xattrs"):
            lines.add("X %s %s" % (path, ",".join(sorted(e["xattrs"]))))
    return lines


class DiffMethod(Method):
    """encio diff of each snapshot and the one before it (and of two
    further apart, both ways, in some seeds) against the kernel's
    difference, btrfs send --no-data -p, in one normal form."""
    name = "diff"
    desc = "encio diff against btrfs send --no-data -p"
    no_tree = True

    def setup(self):
        self.mnt = None

    def pairs(self, k):
        out = [(k - 1, k)] if k else []
        r = random.Random("%d-diff-%d" % (self.ck.seed, k))
        if k >= 2 and r.random() < 0.4:
            i = r.randrange(k - 1)
            out += [(i, k), (k, i)]
        return out

    def shell(self, step, dest):
        k = [s["name"] for s in self.ck.steps].index(step["name"])
        return "\n".join("python3 %s diff-compare $ENCIO %s %s" % (
            SELF, self.ck.steps[i]["path"], self.ck.steps[j]["path"]) for i, j in self.pairs(k))

    def step(self, k):
        r = random.Random("%d-diff-how-%d" % (self.ck.seed, k))
        for i, j in self.pairs(k):
            # in some steps the fallback too, and a balance during the diff
            how = [{}] + ([{"kernel": True}] if r.random() < 0.3 else []) + \
                ([{"balance": self.ck.hist.mnt}] if r.random() < 0.15 else [])
            for kw in how:
                bad = diff_compare(self.ck.env, self.ck.encio, self.ck.steps[i]["path"],
                                   self.ck.steps[j]["path"], **kw)
                if bad:
                    return False, bad, None
        return True, "", None


class CutMethod(Method):
    """encio send of each snapshot whole (a walked tree; in some steps with
    an earlier snapshot before it in one stream), the stream file cut at
    random bytes, encio stream-cut's token, and encio send -t's rest
    appended: the joined file must be the uncut stream byte for byte. Each
    cut is resumed twice: by the token, which goes to its anchor from the
    tree's names, and by the same point without its anchor (a version 2
    token), which skips every command before it by its shape."""
    name = "cut"
    desc = "encio send cut in its file, resumed by position (encio stream-cut, send -t >>)"
    no_tree = True

    def setup(self):
        self.mnt = None

    def paths(self, k):
        r = random.Random("%d-cut-paths-%d" % (self.ck.seed, k))
        first = [self.ck.steps[r.randrange(k)]["path"]] if k and r.random() < 0.4 else []
        return first + [self.ck.steps[k]["path"]]

    def shell(self, step, dest):
        k = [s["name"] for s in self.ck.steps].index(step["name"])
        return "python3 %s cut-compare $ENCIO %s %s" % (SELF, self.cuts_arg(k), " ".join(self.paths(k)))

    def cuts_arg(self, k):
        """Three cuts: one at a byte, two in a command picked among all
        (most are small: a byte's pick would seldom land after one)."""
        r = random.Random("%d-cut-at-%d" % (self.ck.seed, k))
        return "%.6f,c%.6f,c%.6f" % (r.random(), r.random(), r.random())

    def step(self, k):
        bad = cut_compare(self.ck.env, self.ck.encio, self.cuts_arg(k).split(","), self.paths(k))
        return (False, bad, None) if bad else (True, "", None)


def token_point(token):
    """A resume token's packed point (its crc32c checked off)."""
    return bytearray(bytes.fromhex(token[2:]))[:-4]


def token_of_point(raw):
    """The token of the packed point RAW, its version its first byte."""
    return "%d-" % raw[0] + (bytes(raw) + crc32c(bytes(raw)).to_bytes(4, "little")).hex()


def token_without_anchor(token):
    """The point of a version 3 token as version 2 wrote it: no anchor."""
    raw = token_point(token)
    fixed = 1 + 2 * (16 + 8) + 6 * 8 + 4 + 1
    raw = raw[:fixed + raw[fixed - 1]]
    raw[0] = 2
    return token_of_point(raw)


def crc32c(data):
    """The raw reflected update from 0, as send streams and tokens use it."""
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc


def stream_cmd_ends(data):
    """The offsets where the commands of the stream(s) in DATA end."""
    ends, pos = [], 0
    while pos + 10 <= len(data):
        if data[pos:pos + 13] == b"btrfs-stream\0":
            pos += 17
            continue
        length = struct.unpack_from("<I", data, pos)[0]
        pos += 10 + length
        ends.append(pos)
    return ends


def cut_compare(env, encio, cuts, paths):
    """None if the stream of encio send PATHS, cut in a file at each of
    CUTS and resumed there (encio stream-cut, encio send -t appended), by
    the token and by its point without an anchor, is the uncut stream byte
    for byte; else what differs. A cut is a fraction of the stream's
    bytes, or cFRACTION: one of its commands so picked, cut inside."""
    whole = os.path.join(env.dir, "cut-whole")
    with open(whole, "wb") as f:
        p = subprocess.run([encio, "send", "-q"] + paths, stdout=f, stderr=subprocess.PIPE, timeout=300)
    if p.returncode != 0:
        return "encio send %s exited %d: %s" % (" ".join(paths), p.returncode,
                                                p.stderr.decode(errors="replace").strip()[-1000:])
    with open(whole, "rb") as f:
        data = f.read()
    ends = stream_cmd_ends(data)
    for cut in cuts:
        if cut.startswith("c") and len(ends) > 1:
            i = min(int(float(cut[1:]) * (len(ends) - 1)), len(ends) - 2)
            at = ends[i] + 1 + int((ends[i + 1] - ends[i] - 1) * float(cut[1:]) * 7 % 1)
        else:
            at = max(1, int(len(data) * float(cut.lstrip("c"))))
        part = os.path.join(env.dir, "cut-part")
        with open(part, "wb") as f:
            f.write(data[:at])
        p = subprocess.run([encio, "stream-cut", part], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        if p.returncode != 0:
            err = p.stderr.decode(errors="replace").strip()
            if "no subvolume's first command is whole" in err:
                continue
            return "encio stream-cut at byte %d of %d exited %d: %s" % (at, len(data), p.returncode, err[-500:])
        token = p.stdout.decode().strip()
        with open(part, "rb") as f:
            head = f.read()
        env.log("cut at byte %d of %d, cut back to %d: %s" % (at, len(data), len(head), token[:40]))
        for how, tok in (("anchor", token), ("shape", token_without_anchor(token))):
            rest = os.path.join(env.dir, "cut-rest")
            with open(rest, "wb") as f:
                p = subprocess.run([encio, "send", "-q", "-t", tok] + paths, stdout=f,
                                   stderr=subprocess.PIPE, timeout=300)
            if p.returncode != 0:
                return "encio send -t (by %s) at byte %d of %d exited %d: %s" % (
                    how, len(head), len(data), p.returncode, p.stderr.decode(errors="replace").strip()[-1000:])
            with open(rest, "rb") as f:
                joined = head + f.read()
            if joined != data:
                diff_at = next((i for i in range(min(len(joined), len(data))) if joined[i] != data[i]),
                               min(len(joined), len(data)))
                return "resumed by %s at byte %d: the joined stream (%d bytes) differs from the uncut one (%d) from byte %d" % (
                    how, len(head), len(joined), len(data), diff_at)
    return None


def diff_compare(env, encio, parent, child, kernel=False, balance=None):
    """None if encio diff PARENT CHILD (with --kernel: its fallback, the
    kernel's difference) is the kernel's difference, else what differs.
    BALANCE, a mount point: a balance runs on it during encio diff."""
    cmd = [encio, "diff", "--format=json"] + (["--kernel"] if kernel else []) + [parent, child]
    bal = None
    if balance:
        bal = subprocess.Popen(["btrfs", "balance", "start", "--full-balance", balance],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.05)
    e = env.run(cmd)
    if bal:
        bal.wait()
    if e.returncode:
        return "%s exited %s: %s" % (" ".join(cmd), e.returncode, e.stderr.decode(errors="replace")[-500:])
    # the kernel's difference after: a balance moves blocks, not what they hold
    f = os.path.join(env.dir, "nodata-stream")
    p = env.run(["btrfs", "send", "-q", "--no-data", "-p", parent, "-f", f, child])
    if p.returncode:
        return "btrfs send --no-data -p failed: %s" % p.stderr.decode(errors="replace")[-500:]
    want = kernel_diff_form(parent, f)
    got = encio_diff_form(e.stdout.decode())
    if want == got:
        return None
    return "%s differs from the kernel's (- kernel only, + encio only): %s" % (
        " ".join(["encio diff"] + cmd[3:-2] + [os.path.basename(parent), os.path.basename(child)]),
        "; ".join(["- " + x for x in sorted(want - got)][:12] + ["+ " + x for x in sorted(got - want)][:12]))


def diff_compare_main(argv):
    """diff-compare ENCIO PARENT CHILD: the check, outside a seed."""
    env = Env(None, False, False)
    try:
        bad = diff_compare(env, argv[0], argv[1], argv[2])
    finally:
        env.cleanup()
    print(bad or "encio diff is the kernel's difference")
    return 1 if bad else 0


def cut_compare_main(argv):
    """cut-compare ENCIO CUTS PATH...: the check, outside a seed."""
    env = Env(None, False, False)
    try:
        bad = cut_compare(env, argv[0], argv[1].split(","), argv[2:])
    finally:
        env.cleanup()
    print(bad or "every resumed stream is the uncut one")
    return 1 if bad else 0


METHODS = {"d": ControlMethod, "a": MethodA, "b": MethodB, "c": MethodC,
           "i": InterruptMethod, "copy": CopyMethod, "sub": SubvolumesMethod, "pipe": PipeMethod, "h": HostileMethod,
           "diff": DiffMethod, "cut": CutMethod}
DEFAULT_METHODS = "d,a,b,c,i,copy,sub,pipe,h,diff,cut"


# ---------------------------------------------------------------------------

class Mismatch:
    def __init__(self, method, snap, what, diffs=()):
        self.method, self.snap, self.what, self.diffs = method, snap, what, list(diffs)


class Checker:
    def __init__(self, seed, args):
        self.seed = seed
        self.args = args
        self.env = Env(args.tmp, args.keep, args.verbose)
        try:
            self.encio = private_copy(args.encio, self.env.dir)
        except Skip:
            self.env.cleanup()
            raise
        self.mismatches = []
        self.notes = []
        # in one seed of two encio send draws progress, and so puts its
        # estimate of the stream in it, for the receivers to take or ignore
        self.send_total = random.Random("%d-total" % seed).random() < 0.5

    def run(self, replay=None):
        """Build the history (or replay one: a Replay) and check it; True if
        every method gave every snapshot back."""
        t0 = time.time()
        if replay is None:
            rng = random.Random(self.seed)
            self.hist = History(self.env, self.seed, rng, hostile=self.args.hostile)
            self.hist.build()
            self.clone_choice = {}
            for k, name in enumerate(self.hist.snaps):
                if k >= 2 and rng.random() < 0.3:
                    self.clone_choice[name] = [self.hist.snaps[rng.randrange(k - 1)]]
            wanted = self.args.methods.split(",")
            if not self.args.hostile and "h" in wanted:
                wanted.remove("h")
            if "i" in wanted and not self.args.all_methods and random.Random("%d-i" % self.seed).random() >= 0.4:
                wanted.remove("i")      # interruptions in some seeds only
        else:
            self.hist = replay
            replay.build(self.env)
            self.clone_choice = replay.clone_choice
            wanted = replay.methods
        S = self.hist.S
        self.steps = []
        for k, name in enumerate(self.hist.snaps):
            self.steps.append({"name": name, "path": os.path.join(S, name),
                               "parent": os.path.join(S, self.hist.snaps[k - 1]) if k else None,
                               "clones": [os.path.join(S, c) for c in self.clone_choice.get(name, [])
                                          if c in self.hist.snaps[:k]]})
        self.streams = Streams(self)
        self.methods = [METHODS[m](self) for m in wanted]
        self.env.log("history: %d snapshots, %d operations, mount -o '%s', mkfs %s (%.1f s)" % (
            len(self.steps), len(self.hist.log), self.hist.opts, " ".join(self.hist.mkfs_opts) or "-",
            time.time() - t0))
        srcs = [tree(st["path"]) for st in self.steps]
        ctrl = [None] * len(self.steps)
        self.ctrl_ok = True
        # the control first; pipe and sub last: their finish() changes the
        # source
        for m in sorted(self.methods, key=lambda m: (m.name != "d", m.name == "sub", m.name == "pipe")):
            m.setup()
            failed = False
            for k, st in enumerate(self.steps):
                ok, err, res = m.step(k)
                if m.name == "d":
                    if not ok:
                        self.notes.append("control failed at %s: %s (later steps not checked)" % (st["name"], err))
                        self.ctrl_ok = False
                        break
                    ctrl[k] = tree(res)
                    self.control_notes(k, srcs[k], ctrl[k])
                    continue
                if not self.ctrl_ok and k >= len([c for c in ctrl if c is not None]):
                    failed = True
                    break
                if not ok:
                    self.mismatches.append(Mismatch(m, st["name"], err))
                    failed = True
                    break
                if getattr(m, "no_tree", False):
                    continue
                diffs = self.compare(m, srcs[k], ctrl[k], tree(res))
                if diffs:
                    self.mismatches.append(Mismatch(m, st["name"], "trees differ", diffs))
                    failed = True
                    break
            if not failed and hasattr(m, "finish"):
                bad = m.finish()
                if bad:
                    mm = Mismatch(m, self.steps[-1]["name"], bad[0], bad[1])
                    mm.after = True
                    self.mismatches.append(mm)
        if any(m.sender == "encio" for m in self.methods):
            self.check_sizes()
        return not self.mismatches

    def control_notes(self, k, src, ctl):
        for rel, a in src.items():
            if is_placeholder(a):
                self.notes.append("%s: %s is a nested subvolume's directory: btrfs send leaves it out" % (
                    self.steps[k]["name"], rel))
        for d in diff_trees(source_view(src), ctl, skip=("flags",)):
            self.notes.append("%s: the control differs from the source at %s (%s: %s vs %s): encio compared with the control there" % (
                (self.steps[k]["name"],) + tuple(short(x) for x in d)))

    def compare(self, m, src, ctl, got):
        if getattr(m, "copy", False):
            # a copy of the tree has what the directory holds, the nested
            # subvolume's empty directory too; its times are made up when
            # it is looked up, so they say nothing
            exp = {r: dict(a) for r, a in src.items()}
            for r, a in exp.items():
                if is_placeholder(a) and r in got:
                    a["mtime"] = got[r]["mtime"]
                    a["flags"] = got[r]["flags"]   # FS_IOC_GETFLAGS fails on it
            return diff_trees(exp, got)
        srcv = source_view(src)
        diffs = diff_trees(srcv, got)
        if ctl is None:
            return diffs
        # Where btrfs receive itself does not give the source back, encio
        # must give the source or what btrfs receive gives; where btrfs
        # receive does the receiving (method a), its own deviation is not
        # encio's. A time btrfs receive gets wrong is one of its own making
        # (the kernel's stream has no utimes for a directory only orphans
        # passed through): no two receives make the same, so none is checked.
        dev = {(rel, attr): g for rel, attr, e, g in diff_trees(srcv, ctl)}
        out = []
        for rel, attr, e, g in diffs:
            if attr == "flags":
                # The kernel sends FILEATTR only for flags changed since the
                # parent, and btrfs receive applies none but takes what a
                # new inode inherits where it makes it: where the stream
                # cannot carry them all, a flag is wrong only where neither
                # the source nor the control has it (a NOCOW or compress
                # flag inherited in the wrong place).
                if not m.flags_kept and set(g) <= set(e) | set(ctl.get(rel, {}).get("flags", "")):
                    continue
            elif (rel, attr) in dev:
                if m.receiver == "btrfs" or attr == "mtime" or g == dev[(rel, attr)]:
                    continue
            out.append((rel, attr, e, g))
        return out

    def check_sizes(self):
        for k, st in enumerate(self.steps):
            fe, (rce, _, _) = self.streams.get("encio", k)
            fb, (rcb, _, _) = self.streams.get("btrfs", k)
            if rce or rcb:
                continue
            # FILEATTR (flags of new inodes) and FALLOCATE (preallocated
            # ranges) carry what btrfs send does not send at all: they
            # are not counted against encio's stream.
            se = os.path.getsize(fe) - shape_bytes(fe) - fixed_truncate_bytes(fe, fb)
            sb = os.path.getsize(fb) - shape_bytes(fb)
            if se > sb:
                m = MethodA(self)
                m.name, m.desc = "size", "the size of encio send's stream"
                self.mismatches.append(Mismatch(m, st["name"], "encio send's stream is %d bytes, btrfs send --compressed-data's %d" % (se, sb)))

    def report(self):
        h = self.hist
        os.makedirs(self.args.logdir, exist_ok=True)
        path = os.path.join(self.args.logdir, "difftest-seed-%d.sh" % self.seed)
        script = h.script()
        repro = []
        for mm in self.mismatches:
            m = mm.method
            if m.name == "size":
                k = [s["name"] for s in self.steps].index(mm.snap)
                st = self.steps[k]
                repro.append("# stream sizes of %s:" % mm.snap)
                repro.append("btrfs send -q --compressed-data %s | wc -c" % send_args_sh(st))
                repro.append("$ENCIO send %s %s | wc -c" % ("--progress" if self.send_total else "-q", send_args_sh(st)))
                continue
            repro.append("# method %s (%s), up to %s, into a fresh filesystem at $D:" % (m.name, m.desc, mm.snap))
            for st in self.steps:
                repro.append(m.shell(st, "$D"))
                if st["name"] == mm.snap:
                    break
            if getattr(mm, "after", False):
                repro.append("# then: %s" % mm.what)
                continue
            repro.append("python3 %s compare $S/%s $D/%s%s" % (SELF, mm.snap, mm.snap,
                                                             "" if m.flags_kept else " --no-flags"))
        script += "\n# Checks that failed (ENCIO=%s):\n" % self.args.encio + "\n".join("# " + l for l in repro) + "\n"
        with open(path, "w") as f:
            f.write(script)
        print("MISMATCH: seed %d, mount -o '%s', mkfs %s, %d snapshots" % (
            self.seed, h.opts, " ".join(h.mkfs_opts) or "-", len(self.steps)))
        for mm in self.mismatches:
            print("  method %s (%s), snapshot %s: %s" % (mm.method.name, mm.method.desc, mm.snap, mm.what))
            print("    signature: %s" % " ".join(map(str, signature(mm))))
            if getattr(mm.method, "note", ""):
                print("    interruption: %s" % mm.method.note)
            k = [s["name"] for s in self.steps].index(mm.snap)
            for rel, attr, e, g in mm.diffs[:25]:
                extra = ""
                if attr == "content" and not getattr(mm, "after", False):
                    res = os.path.join(mm.method.mnt, mm.snap, rel)
                    off = first_diff(os.path.join(self.steps[k]["path"], rel), res)
                    extra = " (first differing byte %s)" % off
                print("    %s: %s: expected %s, got %s%s" % (rel, attr, short(e), short(g), extra))
            if len(mm.diffs) > 25:
                print("    ... %d more differences" % (len(mm.diffs) - 25))
        for n in self.notes[:20]:
            print("  note: " + n)
        print("  history and reproducer: %s (%d operations); rerun: %s --seed %d -v --keep" % (
            path, len(h.log), SELF, self.seed))
        if not self.args.quiet_log:
            print("---- %s ----" % path)
            print(script)
            print("---- end of %s ----" % path)


class Replay:
    """A history given as its log (some lines left out), for the minimizer."""

    def __init__(self, seed, opts, mkfs_opts, lines, clone_choice, methods):
        self.seed, self.opts, self.mkfs_opts = seed, opts, mkfs_opts
        self.log = lines
        self.clone_choice = clone_choice
        self.methods = methods

    def build(self, env):
        self.loop, self.mnt = env.mkfs("src", opts=self.opts, mkfs_opts=self.mkfs_opts)
        self.V = os.path.join(self.mnt, "vol")
        self.S = os.path.join(self.mnt, "snaps")
        os.mkdir(self.S)
        e = dict(os.environ, V=self.V, S=self.S, MNT=self.mnt, LOOP=self.loop, OPTS=self.opts,
                 T=USER_PY + " " + SELF)
        subprocess.run(["bash", "-c", "umask 022\n" + "\n".join(self.log)], env=e,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.snaps = []
        for l in self.log:
            if l.startswith("btrfs -q subvolume snapshot -r"):
                n = l.rsplit("/", 1)[1]
                if os.path.isdir(os.path.join(self.S, n)):
                    self.snaps.append(n)

    def script(self):
        return History.script(self)


def signature(mm):
    """What makes two mismatches the same failure, for the minimizer."""
    if mm.method.name == "size":
        return ("size",)
    if not mm.diffs:
        t = re.sub(r"'[^']*'|\S*/\S*|\d+", "_", mm.what.split("ERROR:", 1)[-1])
        return ("error", mm.method.name, t.strip()[:60])
    rel, attr, e, g = mm.diffs[0]
    if attr == "flags" or attr == "exists":
        return ("diff", mm.method.name, attr, e, g)
    return ("diff", mm.method.name, attr)


def matches(sig, mm):
    if mm.method.name == "size":
        return sig == ("size",)
    if sig[0] == "error":
        return signature(mm) == sig
    if mm.method.name != sig[1]:
        return False
    for rel, attr, e, g in mm.diffs:
        if attr == sig[2] and (len(sig) == 3 or (e, g) == sig[3:]):
            return True
    return False


def minimize(ck0, mm, args, budget):
    """Delta debugging of the history's log: the fewest lines that still
    give the same failure, by the same method, up to its snapshot."""
    sig = signature(mm)
    log = ck0.hist.log
    end = next(i for i, l in enumerate(log) if l.endswith("/" + mm.snap) and "snapshot -r" in l)
    lines = log[:end + 1]
    keep_always = {0, end}
    meth = ["d", "a"] if sig == ("size",) else (["d", mm.method.name] if mm.method.name != "d" else ["d"])
    quiet = argparse.Namespace(**vars(args))
    quiet.verbose = False
    quiet.keep = False
    t0 = time.time()
    trials = [0]

    def fails(idx):
        if time.time() - t0 > budget:
            return False
        trials[0] += 1
        ck = Checker(ck0.seed, quiet)
        try:
            ck.run(Replay(ck0.seed, ck0.hist.opts, ck0.hist.mkfs_opts, [lines[i] for i in idx],
                          ck0.clone_choice, meth))
            return any(matches(sig, m) for m in ck.mismatches)
        except Exception:
            return False
        finally:
            ck.env.cleanup()

    cur = list(range(len(lines)))
    if not fails(cur):
        return None, trials[0]
    n = 2
    while len(cur) > 2 and time.time() - t0 < budget:
        free = [i for i in cur if i not in keep_always]
        if n > len(free):
            break
        chunk = (len(free) + n - 1) // n
        reduced = False
        for j in range(0, len(free), chunk):
            drop = set(free[j:j + chunk])
            cand = [i for i in cur if i not in drop]
            if fails(cand):
                cur = cand
                n = max(n - 1, 2)
                reduced = True
                break
        if not reduced:
            if n >= len(free):
                break
            n = min(len(free), n * 2)
    return [lines[i] for i in cur], trials[0]


def private_copy(binary, d):
    """A copy of the binary under test, so that a rebuild while a seed runs
    neither breaks it nor mixes two versions in one history."""
    for _ in range(60):
        try:
            st = os.stat(binary)
            if time.time() - st.st_mtime > 2 and st.st_mode & 0o111:
                dst = os.path.join(d, "bin-under-test")
                shutil.copy2(binary, dst)
                return dst
        except OSError:
            pass
        time.sleep(1)
    raise Skip("%s is not there or keeps changing" % binary)


def compare_main(argv):
    ap = argparse.ArgumentParser(prog="difftest.py compare")
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--no-flags", action="store_true")
    ap.add_argument("--copy", action="store_true", help="keep a nested subvolume's directory")
    a = ap.parse_args(argv)
    ta, tb = tree(a.a), tree(a.b)
    if not a.copy:
        ta = source_view(ta)
    diffs = diff_trees(ta, tb, skip=("flags",) if a.no_flags else ())
    for rel, attr, e, g in diffs:
        print("%s: %s: %s vs %s" % (rel, attr, short(e), short(g)))
    return 1 if diffs else 0


def parse_seeds(a):
    if a.seed is not None:
        return [a.seed]
    lo, _, hi = a.seeds.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main():
    # Started as a background job of a script, the tester would pass an
    # ignored SIGINT on to the commands it interrupts with one, and encio
    # leaves an ignored SIGINT ignored.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if len(sys.argv) > 1 and sys.argv[1] == "op":
        try:
            OPS[sys.argv[2]](*sys.argv[3:])
        except OSError as e:
            sys.exit("%s: %s" % (sys.argv[2], e))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "compare":
        return compare_main(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "diff-compare":
        return diff_compare_main(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "cut-compare":
        return cut_compare_main(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "nsreceive":
        return ns_receive_main(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--seeds", default="1-3", help="A-B: each seed from A to B")
    ap.add_argument("--methods", default=DEFAULT_METHODS,
                    help="comma-separated, of: %s (d, the control, is run whenever named)" % ",".join(METHODS))
    ap.add_argument("--all-methods", action="store_true",
                    help="run i (interruptions) in every seed, not in some")
    ap.add_argument("--keep", action="store_true", help="keep images and mounts of a seed that fails")
    ap.add_argument("--encio", default=os.environ.get("ENCIO") or os.path.join(HERE, "../../build/encio"))
    ap.add_argument("--tmp", default="/dev/shm" if os.access("/dev/shm", os.W_OK) else "/tmp")
    ap.add_argument("--logdir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "difftest-logs"))
    ap.add_argument("--budget", type=float, default=0,
                    help="start no new seed after this many seconds (0: no limit)")
    ap.add_argument("--min-seeds", type=int, default=0, metavar="N",
                    help="run at least N seeds, whatever the budget")
    ap.add_argument("--no-hostile", dest="hostile", action="store_false",
                    help="no user 4242: neither its files and acts in SRC nor method h (the histories of earlier versions)")
    ap.add_argument("--minimize", type=float, default=0, metavar="SECONDS",
                    help="on a mismatch, look for the shortest history that still gives it, for at most SECONDS per mismatch")
    ap.add_argument("--quiet-log", action="store_true", help="do not print the history of a failing seed")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    for m in a.methods.split(","):
        if m not in METHODS:
            ap.error("unknown method %s" % m)
    if "d" not in a.methods.split(","):
        a.methods = "d," + a.methods
    if os.geteuid() != 0:
        print("SKIP: needs root")
        return 77
    for tool in ("mkfs.btrfs", "btrfs", "losetup", "setfacl", "setfattr", "chattr", "fallocate"):
        if subprocess.run(["which", tool], stdout=subprocess.DEVNULL).returncode:
            print("SKIP: needs %s" % tool)
            return 77
    if not os.access(a.encio, os.X_OK):
        print("SKIP: no encio binary at %s" % a.encio)
        return 77
    a.encio = os.path.abspath(a.encio)
    os.umask(0o022)

    current = []

    def on_signal(sig, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    failed = []
    t_all = time.time()
    seeds = parse_seeds(a)
    done = 0
    try:
        for seed in seeds:
            if a.budget and done >= max(1, a.min_seeds) and time.time() - t_all > a.budget:
                print("budget of %.0f s spent: seeds %d-%d not run" % (a.budget, seed, seeds[-1]))
                break
            t0 = time.time()
            try:
                ck = Checker(seed, a)
            except Skip as e:
                print("SKIP: %s" % e)
                return 77
            current[:] = [ck]
            ok = False
            try:
                ok = ck.run()
                if not ok:
                    ck.report()
                    if a.minimize:
                        ck.env.cleanup()
                        for mm in ck.mismatches:
                            if mm.method.name == "i":
                                continue
                            print("minimizing method %s at %s (%s) ..." % (mm.method.name, mm.snap, " ".join(map(str, signature(mm)))), flush=True)
                            lines, n = minimize(ck, mm, a, a.minimize)
                            if lines is None:
                                print("  did not fail again on replay (%d trial)" % n)
                                continue
                            print("  %d of %d lines after %d trials (mount -o '%s', mkfs %s):" % (
                                len(lines), len(ck.hist.log), n, ck.hist.opts, " ".join(ck.hist.mkfs_opts) or "-"))
                            for l in lines:
                                print("    " + l)
            finally:
                if ok or not a.keep:
                    ck.env.keep = False
                ck.env.cleanup()
            done += 1
            tags = "".join("; " + m.tag for m in ck.methods if getattr(m, "tag", ""))
            if ck.send_total:
                tags += "; encio send --progress"
            print("seed %d: %s (%s, %d snapshots, %d ops, methods %s, %.1f s%s)" % (
                seed, "ok" if ok else "MISMATCH", ck.hist.opts or "no options", len(ck.steps),
                len(ck.hist.log), ",".join(m.name for m in ck.methods), time.time() - t0, tags),
                flush=True)
            if a.verbose:
                for n in ck.notes:
                    print("  note: " + n)
            if not ok:
                failed.append(seed)
    except KeyboardInterrupt:
        print("interrupted")
        return 130
    print("%d seeds run, %d failed%s (%.0f s)" % (done, len(failed),
                                                ": " + " ".join(map(str, failed)) if failed else "",
                                                time.time() - t_all))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
