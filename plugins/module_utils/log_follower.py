# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Follow one growing log file from a cursor, reading every byte at most once.

Pure I/O, no knowledge of what the lines mean. The cursor (device, inode, byte
offset of the first line not yet delivered) survives between calls as a short
string, so a later call resumes where an earlier one stopped. Memory stays
bounded whatever the file size: one chunk, one capped partial line.
"""

from __future__ import annotations

import os

DEFAULT_CHUNK_SIZE = 1 << 20
DEFAULT_MAX_LINE = 16 << 10


class Cursor(object):
    """Position in a log file: which file (dev, ino; None when unknown) and the byte offset."""

    __slots__ = ("dev", "ino", "offset")

    def __init__(self, offset=0, dev=None, ino=None):
        if offset < 0:
            raise ValueError("a log offset cannot be negative")
        self.offset = offset
        self.dev = dev
        self.ino = ino

    def dump(self):
        """Serialise as ``dev:ino:offset`` (``-`` for an unknown file)."""
        if self.ino is None:
            return "-:-:%d" % self.offset
        return "%d:%d:%d" % (self.dev, self.ino, self.offset)

    @classmethod
    def load(cls, text):
        parts = text.strip().split(":")
        if len(parts) != 3:
            raise ValueError("log cursor must look like dev:ino:offset, got %r" % text)
        try:
            offset = int(parts[2])
            if parts[0] == "-" and parts[1] == "-":
                return cls(offset)
            return cls(offset, int(parts[0]), int(parts[1]))
        except ValueError:
            raise ValueError("log cursor must look like dev:ino:offset, got %r" % text)

    def __eq__(self, other):
        return isinstance(other, Cursor) and (self.dev, self.ino, self.offset) == (other.dev, other.ino, other.offset)

    def __repr__(self):
        return "Cursor(%s)" % self.dump()


def start_cursor(path, log_offset):
    """Cursor for a fresh wait: ``log_offset`` bytes in, or ``'end'`` for the size right now.

    With 'end' the file identity is kept too, so a log replaced later (rotation
    at restart) is read from its first byte.
    """
    if log_offset == "end":
        try:
            st = os.stat(path)
        except OSError:
            return Cursor(0)
        return Cursor(st.st_size, st.st_dev, st.st_ino)
    return Cursor(int(log_offset))


class LogFollower(object):
    """Deliver the complete lines appended to ``path`` since the cursor.

    ``read()`` yields text blocks of whole lines joined by ``\\n`` (at most about
    one chunk each). A rotated file (new inode at the path) is drained through
    the handle already open, then the new file is read from 0; a truncated file
    (size below the offset) is read again from 0; a missing file is waited for.
    Lines longer than ``max_line`` bytes keep their head; the rest is skipped
    without being buffered. Bytes are decoded as UTF-8 with replacement.
    """

    def __init__(self, path, cursor=None, chunk_size=DEFAULT_CHUNK_SIZE, max_line=DEFAULT_MAX_LINE):
        self.path = path
        self.chunk_size = chunk_size
        self.max_line = max_line
        start = cursor if cursor is not None else Cursor(0)
        self._want = start            # identity/offset to honour at the first open
        self._fh = None
        self._dev = start.dev
        self._ino = start.ino
        self._pos = start.offset      # next byte to read from the open file
        self._line_start = start.offset
        self._partial = bytearray()
        self._switch_pending = False  # a new file waits at the path once the old one is drained
        self.rotations = 0
        self.truncations = 0

    @property
    def cursor(self):
        return Cursor(self._line_start, self._dev, self._ino)

    def close(self):
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def read(self, max_bytes=None):
        """Yield blocks of new complete lines; stop at end of data or after ``max_bytes``."""
        self._sync()
        budget = max_bytes
        while self._fh is not None and (budget is None or budget > 0):
            size = self.chunk_size if budget is None else min(self.chunk_size, budget)
            data = self._fh.read(size)
            if not data:
                if not self._switch_pending:
                    return
                last = self.flush()
                self._open_new()
                if last is not None:
                    yield last
                continue
            if budget is not None:
                budget -= len(data)
            block = self._feed(data)
            if block is not None:
                yield block

    def pending(self):
        """True when unread bytes remain (the last read stopped on its budget)."""
        if self._fh is None:
            return False
        try:
            return os.fstat(self._fh.fileno()).st_size > self._pos or self._switch_pending
        except OSError:
            return False

    def flush(self):
        """Deliver the unterminated last line, if any (for a writer that has exited)."""
        if not self._partial:
            return None
        line = bytes(self._partial).decode("utf-8", "replace")
        del self._partial[:]
        self._line_start = self._pos
        return line

    def _sync(self):
        try:
            st = os.stat(self.path)
        except OSError:
            return  # not there (yet, or renamed away): keep draining any open handle
        if self._fh is None:
            self._first_open(st)
        elif (st.st_dev, st.st_ino) != (self._dev, self._ino):
            self._switch_pending = True
        elif st.st_size < self._pos:
            self.truncations += 1
            self._fh.seek(0)
            self._reset(0)

    def _first_open(self, st):
        want = self._want
        same_file = want.ino is None or (st.st_dev, st.st_ino) == (want.dev, want.ino)
        offset = want.offset if same_file and st.st_size >= want.offset else 0
        self._fh = open(self.path, "rb")
        st = os.fstat(self._fh.fileno())
        self._dev, self._ino = st.st_dev, st.st_ino
        self._fh.seek(offset)
        self._reset(offset)

    def _open_new(self):
        self.close()
        self.rotations += 1
        self._switch_pending = False
        try:
            self._fh = open(self.path, "rb")
        except OSError:
            self._dev = self._ino = None
            self._reset(0)
            self._want = Cursor(0)
            return
        st = os.fstat(self._fh.fileno())
        self._dev, self._ino = st.st_dev, st.st_ino
        self._reset(0)

    def _reset(self, offset):
        self._pos = offset
        self._line_start = offset
        del self._partial[:]

    def _keep_partial(self, data):
        room = self.max_line - len(self._partial)
        if room > 0:
            self._partial += data[:room]

    def _cap(self, lines):
        """Cut every line of ``lines`` to max_line bytes (split and join only when one may be longer)."""
        limit = self.max_line
        step = max(1, limit // 2)
        # A line of at least `limit` bytes holds a whole newline-free window of limit/2 bytes.
        if all(lines.find(b"\n", p, p + step) >= 0 for p in range(0, len(lines) - step + 1, step)):
            return lines
        return b"\n".join(line[:limit] for line in lines.split(b"\n"))

    def _feed(self, data):
        first_nl = data.find(b"\n")
        if first_nl < 0:
            self._keep_partial(data)
            self._pos += len(data)
            return None
        last_nl = data.rfind(b"\n")
        self._keep_partial(data[:first_nl])
        head = bytes(self._partial)
        del self._partial[:]
        body = data[first_nl + 1:last_nl]
        if len(body) > self.max_line:
            body = self._cap(body)
        self._keep_partial(data[last_nl + 1:])
        self._line_start = self._pos + last_nl + 1
        self._pos += len(data)
        block = head + b"\n" + body if last_nl > first_nl else head
        return block.decode("utf-8", "replace")
