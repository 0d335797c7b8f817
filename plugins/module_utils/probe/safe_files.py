# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files a root process opens where another user could have put something: never followed, never unbounded.

A name in a directory the service user can write may be a link to any file, a FIFO that blocks a reader for ever,
or /dev/zero behind a link. ``read_regular`` opens without following a link and without blocking, and reads only a
regular file, and only up to a limit; ``root_dir`` makes (or accepts) a directory only root can write, so what root
writes there is root's alone.
"""

from __future__ import annotations

import errno
import os
import stat

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
