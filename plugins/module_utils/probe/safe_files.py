# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files a root process opens where another user could have put something: never followed, never unbounded.

A name in a directory the service user can write may be a link to any file, a FIFO that blocks a reader for ever,
or /dev/zero behind a link. ``read_regular`` opens without following a link and without blocking, and reads only a
regular file, and only up to a limit; ``root_dir`` makes (or accepts) a directory only root can write, so what root
writes there is root's alone. ``ensure_directory`` and ``ensure_file`` set a directory or a file's content, owner and
mode in place without following a link (the vllm_files module: many paths in one task).
"""

from __future__ import annotations

import errno
import grp
import os
import pwd
import stat
import tempfile

_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class UnsafePath(ValueError):
    """A path root will not read or write through; the message says why."""


def open_regular(path):
    """A file descriptor of ``path`` opened read-only, if it is a regular file reached without a link at its end.

    Raises UnsafePath for a link, a FIFO, a device, a socket or a directory; OSError for a missing file."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafePath("%s is a symbolic link; it is not followed" % path) from None
        if e.errno in (errno.EACCES, errno.EPERM):
            raise UnsafePath("%s cannot be read: %s" % (path, e.strerror)) from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UnsafePath("%s is not a regular file (%s)" % (path, kind(mode)))
    return fd


def open_binary(path):
    """open_regular() as a binary file object (blocking reads again: a regular file never blocks)."""
    fd = open_regular(path)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_regular(path, limit):
    """The bytes of a regular file, at most ``limit`` of them; UnsafePath when it is anything else or larger."""
    fd = open_regular(path)
    try:
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise UnsafePath("%s is larger than %d bytes" % (path, limit))
    return data


def kind(mode):
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a link")):
        if test(mode):
            return name
    return "not a regular file"


def root_dir(path, mode=0o700):
    """Make ``path`` a directory owned by this process's user that no one else can write, or check that it is one.

    Raises UnsafePath when it is a link, not a directory, owned by another user, or writable by group or others."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        parent = os.path.dirname(path.rstrip("/"))
        if parent and not os.path.isdir(parent):
            os.makedirs(parent, 0o755)
        os.mkdir(path, mode)
        os.chmod(path, mode)
        st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise UnsafePath("%s is %s, not a directory" % (path, kind(st.st_mode)))
    if st.st_uid != os.geteuid():
        raise UnsafePath("%s belongs to uid %d, who could replace what is written there" % (path, st.st_uid))
    if st.st_mode & 0o022:
        raise UnsafePath("%s is writable by its group or others (mode %o)" % (path, stat.S_IMODE(st.st_mode)))
    return path


# What ensure_directory() and ensure_file() report for one path: its state before and after, by kind, owner and mode.
def _state(st, owner_names):
    if st is None:
        return {"state": "absent"}
    return {"state": "directory" if stat.S_ISDIR(st.st_mode) else "file", "owner": owner_names(st.st_uid, st.st_gid),
            "mode": "%04o" % stat.S_IMODE(st.st_mode)}


def _names(uid, gid):
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    try:
        group = grp.getgrgid(gid).gr_name
    except KeyError:
        group = str(gid)
    return "%s:%s" % (user, group)


def _make_parents(path):
    """The missing directories above ``path``, made as this process's user with mode 0755 (as ``mkdir -p`` does)."""
    parent = os.path.dirname(path.rstrip("/"))
    missing = []
    while parent and parent != "/" and not os.path.lexists(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    for directory in reversed(missing):
        os.mkdir(directory, 0o755)
        os.chmod(directory, 0o755)


def _roots_link(path, st):
    """Whether the link at ``path`` (its lstat ``st``) can only have been put there by root."""
    parent = os.stat(os.path.dirname(path) or ".")
    return st.st_uid == 0 and parent.st_uid == 0 and not parent.st_mode & 0o022


def ensure_directory(path, uid, gid, mode, check=False):
    """Make ``path`` a directory of ``uid``:``gid`` with ``mode``, or check that it is one; never through a link.

    Returns None when it already was, else {"path", "before", "after"}; ``check`` only reports. A link is followed
    only where root put it (root's link in a directory only root can write: a model cache on another disk); any other
    link, or anything but a directory, raises UnsafePath, where the file module would chown the link's target."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode) and _roots_link(path, st):
        path = os.path.realpath(path)
        st = os.lstat(path)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise UnsafePath("%s is %s, not a directory; it is not followed or replaced" % (path, kind(st.st_mode)))
    if st is not None and (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (uid, gid, mode):
        return None
    before = _state(st, _names)
    if not check:
        if st is None:
            _make_parents(path)
            os.mkdir(path, 0o700)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            os.fchown(fd, uid, gid)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
    return {"path": path, "before": before,
            "after": {"state": "directory", "owner": _names(uid, gid), "mode": "%04o" % mode}}


def ensure_file(path, content, uid, gid, mode, check=False):
    """Make ``path`` a regular file holding ``content`` (bytes), of ``uid``:``gid`` with ``mode``.

    Returns None when it already was, else {"path", "before", "after", "before_content"}; ``check`` only reports.
    A new file is written beside it and renamed over the name, so a reader sees the old or the new file, never a
    part; a link at the name is replaced, never followed. A directory at the name raises UnsafePath."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise UnsafePath("%s is a directory, not a file" % path)
    regular = st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink == 1
    old = read_regular(path, st.st_size) if regular else None
    if old == content and (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (uid, gid, mode):
        return None
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory) and not check:  # in check mode, a directory the same task would make first
        raise UnsafePath("the directory of %s does not exist" % path)
    change = {"path": path, "before": _state(st, _names) if regular or st is None else {"state": kind(st.st_mode)},
              "after": {"state": "file", "owner": _names(uid, gid), "mode": "%04o" % mode}, "before_content": old}
    if check:
        return change
    fd, temporary = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
            fh.flush()
            os.fchown(fh.fileno(), uid, gid)
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.rename(temporary, path)
    except BaseException:
        if os.path.lexists(temporary):
            os.unlink(temporary)
        raise
    return change
