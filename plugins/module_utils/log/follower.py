# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Follow one growing log file from a cursor, reading every byte once.

Pure I/O, no knowledge of what the lines mean. The cursor (device, inode, byte
offset of the first line not yet delivered) survives between calls as a short
string, so a later call resumes where an earlier one stopped. Memory stays
bounded whatever the file size: one chunk, one capped partial line.

A log rotated with logrotate's ``copytruncate`` (systemd holds vLLM's log open,
so nothing else works) is truncated in place: the lines written after the last
read and before the copy are only in the copy, ``<path>.1`` (``delaycompress``
keeps it plain). They are read from there, from the offset reached, when the
copy is the same file: it is at least that long and holds the bytes last read
just before it (a cursor from an earlier call carries a checksum of them).
Lines written between logrotate's copy and its truncation are lost to every
reader. A truncated file that has grown past the offset again is told by the
bytes before the offset, read again at each poll (at most 256).
"""

from __future__ import annotations

import os
import zlib

from ansible_collections.llmops.vllm.plugins.module_utils.probe import safe_files

DEFAULT_CHUNK_SIZE = 1 << 20
DEFAULT_MAX_LINE = 16 << 10
# The bytes last read, kept to recognise the rotated copy of a truncated file.
_TAIL = 256
ROTATED_SUFFIX = ".1"


class Cursor(object):
    """Position in a log file: which file (dev, ino; None when unknown), the byte offset, and a checksum of the
    bytes just before the offset (None when unknown), which recognises the file's rotated copy."""

    __slots__ = ("dev", "ino", "offset", "before")

    def __init__(self, offset=0, dev=None, ino=None, before=None):
        if offset < 0:
            raise ValueError("a log offset cannot be negative")
        self.offset = offset
        self.dev = dev
        self.ino = ino
        self.before = before

    def dump(self):
        """Serialise as ``dev:ino:offset`` (``-`` for an unknown file), ``:checksum`` after it when known."""
        if self.ino is None:
            return "-:-:%d" % self.offset
        text = "%d:%d:%d" % (self.dev, self.ino, self.offset)
        return text if self.before is None else "%s:%08x" % (text, self.before)

    @classmethod
    def load(cls, text):
        parts = text.strip().split(":")
        if len(parts) not in (3, 4):
            raise ValueError("log cursor must look like dev:ino:offset, got %r" % text)
        try:
            offset = int(parts[2])
            if parts[0] == "-" and parts[1] == "-":
                return cls(offset)
            before = int(parts[3], 16) if len(parts) == 4 else None
            return cls(offset, int(parts[0]), int(parts[1]), before)
        except ValueError:
            raise ValueError("log cursor must look like dev:ino:offset, got %r" % text)

    def __eq__(self, other):
        return isinstance(other, Cursor) and (self.dev, self.ino, self.offset) == (other.dev, other.ino, other.offset)

    def __repr__(self):
        return "Cursor(%s)" % self.dump()


def fingerprint(data):
    """The checksum a cursor keeps of the bytes before its offset (at most _TAIL of them)."""
    return zlib.crc32(data[-_TAIL:]) & 0xFFFFFFFF


def _before_matches(fh, offset, tail=b"", checksum=None):
    """Whether the bytes of ``fh`` just before ``offset`` are ``tail``, or, without it, the min(_TAIL, offset)
    bytes there have that ``checksum``; None when they cannot be read."""
    width = len(tail) if tail else min(_TAIL, offset)
    if offset < width:
        return False
    try:
        before = os.pread(fh.fileno(), width, offset - width)
    except OSError:
        return None
    return before == tail if tail else fingerprint(before) == checksum


def start_cursor(path, log_offset):
    """Cursor for a fresh wait: ``log_offset`` bytes in, or ``'end'`` for the size right now.

    With 'end' the file identity is kept too, so a log replaced later (rotation
    at restart) is read from its first byte.
    """
    if log_offset == "end":
        try:
            with safe_files.open_binary(path) as fh:
                st = os.fstat(fh.fileno())
                fh.seek(max(0, st.st_size - _TAIL))
                before = fh.read(st.st_size - fh.tell())
        except (OSError, IOError):
            return Cursor(0)
        return Cursor(st.st_size, st.st_dev, st.st_ino, fingerprint(before) if st.st_size else None)
    return Cursor(int(log_offset))


class LogFollower(object):
    """Deliver the complete lines appended to ``path`` since the cursor.

    ``read()`` yields text blocks of whole lines joined by ``\\n`` (at most about
    one chunk each). A rotated file (new inode at the path) is drained through
    the handle already open, then the new file is read from 0; a truncated file
    (size below the offset) is read again from 0, after the lines it held that
    were not read yet, from its rotated copy; a missing file is waited for.
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
        self._tail = b""              # the last bytes read, up to _pos
        self._start_checksum = start.before
        self._copy = None             # the rotated copy of a truncated file, positioned at _pos
        self.rotations = 0
        self.truncations = 0
        self.recovered = 0            # bytes read from rotated copies

    @property
    def cursor(self):
        unread = self._pos - self._line_start      # the partial line, delivered later
        if self._tail and unread <= len(self._tail):
            before = self._tail[:len(self._tail) - unread]
            # Only a full window (or the whole file before the offset) is a fingerprint.
            known = len(before) >= min(_TAIL, self._line_start)
            checksum = fingerprint(before) if known and self._line_start > 0 else None
        else:
            checksum = self._start_checksum if self._line_start == self._want.offset else None
        return Cursor(self._line_start, self._dev, self._ino, checksum)

    def close(self):
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def read(self, max_bytes=None):
        """Yield blocks of new complete lines; stop at end of data or after ``max_bytes``."""
        self._sync()
        budget = max_bytes
        if self._copy is not None:
            # What the truncated file held beyond the offset, then the file again from 0.
            yield from self._drain_copy()
            last = self.flush()
            if last is not None:
                yield last
            self._fh.seek(0)
            self._reset(0)
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
        elif st.st_size < self._pos or self._rewritten():
            self.truncations += 1
            known = self._start_checksum if not self._tail and self._pos == self._want.offset else None
            self._copy = self._rotated_copy(self._pos, self._tail, known)
            if self._copy is None:
                self._fh.seek(0)
                self._reset(0)

    def _rewritten(self):
        """True when the bytes last read are no longer where they were: the file was truncated and has grown past
        the offset again before this read (a busy server right after a copytruncate)."""
        return bool(self._tail) and _before_matches(self._fh, self._pos, self._tail) is False

    def _rotated_copy(self, offset, tail=b"", checksum=None):
        """The rotated copy of this file opened at ``offset``, or None when there is none that holds ``tail``
        (the bytes read just before ``offset``), or bytes of that ``checksum`` there."""
        if offset <= 0 or not (tail or checksum is not None):
            return None
        try:
            fh = safe_files.open_binary(self.path + ROTATED_SUFFIX)
        except (OSError, IOError, safe_files.UnsafePath):
            return None
        try:
            st = os.fstat(fh.fileno())
            if (st.st_size >= offset and (st.st_dev, st.st_ino) != (self._dev, self._ino)
                    and _before_matches(fh, offset, tail, checksum) is True):
                fh.seek(offset)
                return fh
        except (OSError, IOError):
            pass
        fh.close()
        return None

    def _drain_copy(self):
        try:
            while True:
                data = self._copy.read(self.chunk_size)
                if not data:
                    return
                self.recovered += len(data)
                block = self._feed(data)
                if block is not None:
                    yield block
        finally:
            self._copy.close()
            self._copy = None

    def _first_open(self, st):
        want = self._want
        same_file = want.ino is None or (st.st_dev, st.st_ino) == (want.dev, want.ino)
        offset = want.offset if same_file and st.st_size >= want.offset else 0
        self._fh = safe_files.open_binary(self.path)
        st = os.fstat(self._fh.fileno())
        self._dev, self._ino = st.st_dev, st.st_ino
        if same_file and want.ino is not None and want.offset > 0 and (offset < want.offset or not self._holds(want)):
            # Truncated since the cursor was taken (copytruncate): its unread lines are in the rotated copy.
            self.truncations += 1
            offset = 0
            self._copy = self._rotated_copy(want.offset, checksum=want.before)
            if self._copy is not None:
                self._reset(want.offset)
                return
        self._fh.seek(offset)
        self._reset(offset)

    def _holds(self, want):
        """True unless the open file's bytes before the cursor's offset are not those it was taken after."""
        return want.before is None or _before_matches(self._fh, want.offset, checksum=want.before) is not False

    def _open_new(self):
        self.close()
        self.rotations += 1
        self._switch_pending = False
        try:
            self._fh = safe_files.open_binary(self.path)
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
        self._tail = b""
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
        self._tail = (self._tail + data[-_TAIL:])[-_TAIL:]
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
