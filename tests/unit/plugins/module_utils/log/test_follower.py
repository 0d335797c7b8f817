from __future__ import annotations

import os
import shutil

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.log.follower import (
    Cursor,
    LogFollower,
    fingerprint,
    start_cursor,
)


def lines_of(follower, max_bytes=None):
    out = []
    for block in follower.read(max_bytes):
        out.extend(block.split("\n"))
    return out


def append(path, data):
    with open(path, "ab") as fh:
        fh.write(data if isinstance(data, bytes) else data.encode())


class CountingFile(object):
    """Wraps the follower's file handle to count the bytes it reads."""

    def __init__(self, fh):
        self.fh, self.bytes_read = fh, 0

    def read(self, n):
        data = self.fh.read(n)
        self.bytes_read += len(data)
        return data

    def __getattr__(self, name):
        return getattr(self.fh, name)


def test_delivers_appended_lines_once(tmp_path):
    log = tmp_path / "serve.log"
    append(log, "one\ntwo\n")
    f = LogFollower(str(log))
    assert lines_of(f) == ["one", "two"]
    assert lines_of(f) == []
    append(log, "three\n")
    assert lines_of(f) == ["three"]
    assert f.cursor.offset == len("one\ntwo\nthree\n")


def test_reads_only_new_bytes_each_poll(tmp_path):
    log = tmp_path / "serve.log"
    append(log, "x" * 100 + "\n" * 1000)
    f = LogFollower(str(log))
    lines_of(f)
    f._fh = counter = CountingFile(f._fh)
    append(log, "new line\n")
    assert lines_of(f) == ["new line"]
    assert counter.bytes_read == len("new line\n")


def test_starts_at_the_offset(tmp_path):
    log = tmp_path / "serve.log"
    append(log, "old ready line\n")
    f = LogFollower(str(log), Cursor(os.path.getsize(log)))
    append(log, "new\n")
    assert lines_of(f) == ["new"]


def test_partial_line_waits_for_its_newline(tmp_path):
    log = tmp_path / "serve.log"
    append(log, "complete\npart")
    f = LogFollower(str(log))
    assert lines_of(f) == ["complete"]
    assert f.cursor.offset == len("complete\n")
    append(log, "ial\n")
    assert lines_of(f) == ["partial"]


def test_flush_returns_the_unterminated_last_line(tmp_path):
    log = tmp_path / "serve.log"
    append(log, "a\nlast words")
    f = LogFollower(str(log))
    assert lines_of(f) == ["a"]
    assert f.flush() == "last words"
    assert f.flush() is None
    assert f.cursor.offset == os.path.getsize(log)


def test_missing_file_is_waited_for(tmp_path):
    log = tmp_path / "later.log"
    f = LogFollower(str(log), Cursor(500))
    assert lines_of(f) == []
    assert f.cursor.ino is None
    append(log, "created\n")
    assert lines_of(f) == ["created"]  # shorter than the offset: a new file, read from 0


def test_rotation_drains_the_old_file_then_reads_the_new_one(tmp_path):
    log = tmp_path / "serve.log"
    append(log, "before\n")
    f = LogFollower(str(log))
    assert lines_of(f) == ["before"]
    append(log, "late line in old file\n")
    os.rename(log, tmp_path / "serve.log.1")
    append(log, "first of new file\n")
    assert lines_of(f) == ["late line in old file", "first of new file"]
    assert f.rotations == 1
    assert f.cursor.ino == os.stat(log).st_ino


def test_truncation_restarts_from_zero(tmp_path):
    log = tmp_path / "serve.log"
    append(log, "a long first run of the server\n")
    f = LogFollower(str(log))
    lines_of(f)
    with open(log, "wb") as fh:
        fh.write(b"new run\n")
    assert lines_of(f) == ["new run"]
    assert f.truncations == 1


def test_cursor_resumes_and_detects_a_replaced_file(tmp_path):
    log = tmp_path / "serve.log"
    append(log, "first\n")
    f = LogFollower(str(log))
    lines_of(f)
    saved = Cursor.load(f.cursor.dump())
    assert saved == f.cursor
    append(log, "second\n")
    assert lines_of(LogFollower(str(log), saved)) == ["second"]
    os.remove(log)
    append(log, "replacement file with more bytes than the old offset\n")
    assert lines_of(LogFollower(str(log), saved)) == ["replacement file with more bytes than the old offset"]


@pytest.mark.parametrize("text", ["", "1:2", "a:b:c", "1:2:-5"])
def test_malformed_cursor_is_rejected(text):
    with pytest.raises(ValueError):
        Cursor.load(text)


def test_unknown_file_cursor_round_trip():
    assert Cursor.load(Cursor(42).dump()) == Cursor(42)


def test_binary_garbage_is_decoded_with_replacement(tmp_path):
    log = tmp_path / "serve.log"
    append(log, b"ok \xff\xfe\x00 bytes\n\xe2\x96\x88 logo\n")
    assert lines_of(LogFollower(str(log))) == ["ok \ufffd\ufffd\x00 bytes", "\u2588 logo"]


def test_huge_lines_keep_their_head_and_memory_stays_bounded(tmp_path):
    log = tmp_path / "serve.log"
    append(log, "before\n")
    with open(log, "ab") as fh:
        for _chunk in range(40):
            fh.write(b"y" * 4096)   # a 160 KiB line, written across many chunks
        fh.write(b"\nafter\n" + b"z" * 50000 + b"\n")
    f = LogFollower(str(log), chunk_size=4096, max_line=1024)
    out = []
    for block in f.read():
        assert len(f._partial) <= 1024
        out.extend(block.split("\n"))
    assert out == ["before", "y" * 1024, "after", "z" * 1024]


def test_read_budget_stops_early_and_reports_pending(tmp_path):
    log = tmp_path / "serve.log"
    append(log, "".join("line %d\n" % i for i in range(1000)))
    f = LogFollower(str(log), chunk_size=1024)
    first = lines_of(f, max_bytes=2048)
    assert 0 < len(first) < 1000
    assert f.pending()
    rest = lines_of(f)
    assert first + rest == ["line %d" % i for i in range(1000)]
    assert not f.pending()


def test_start_cursor_end_takes_size_and_identity(tmp_path):
    log = tmp_path / "serve.log"
    append(log, "stale\n")
    c = start_cursor(str(log), "end")
    st = os.stat(log)
    assert (c.offset, c.dev, c.ino) == (st.st_size, st.st_dev, st.st_ino)
    assert start_cursor(str(tmp_path / "nope.log"), "end") == Cursor(0)
    assert start_cursor(str(log), 3) == Cursor(3)


def test_long_line_inside_one_chunk_is_capped(tmp_path):
    log = tmp_path / "serve.log"
    append(log, "a\n" + "w" * 5000 + "\nb\n")
    assert lines_of(LogFollower(str(log), max_line=1024)) == ["a", "w" * 1024, "b"]


def copytruncate(log):
    """What logrotate's copytruncate does: copy the file to <log>.1, then truncate it in place."""
    shutil.copyfile(log, str(log) + ".1")
    os.truncate(log, 0)


def test_lines_not_read_before_a_copytruncate_are_read_from_the_copy(tmp_path):
    log = tmp_path / "vllm.log"
    append(log, "INFO loading weights\n")
    f = LogFollower(str(log))
    assert lines_of(f) == ["INFO loading weights"]
    append(log, "ERROR Traceback (most recent call last):\nModuleNotFoundError: No module named 'flash_attn.ops'\nhalf a li")
    copytruncate(log)
    append(log, "ne, then the new file\n")
    assert lines_of(f) == ["ERROR Traceback (most recent call last):", "ModuleNotFoundError: No module named 'flash_attn.ops'",
                           "half a li", "ne, then the new file"]
    assert f.truncations == 1 and f.recovered > 0
    assert f.cursor.offset == os.path.getsize(log) and f.cursor.ino == os.stat(log).st_ino


def test_a_cursor_from_an_earlier_call_finds_its_lines_in_the_copy(tmp_path):
    log = tmp_path / "vllm.log"
    append(log, "INFO one\nINFO two\n")
    f = LogFollower(str(log))
    lines_of(f)
    saved = Cursor.load(f.cursor.dump())
    f.close()
    assert saved.before == fingerprint(b"INFO one\nINFO two\n")
    append(log, "ERROR engine died\n")
    copytruncate(log)
    append(log, "INFO after\n")
    assert lines_of(LogFollower(str(log), saved)) == ["ERROR engine died", "INFO after"]
    # start_cursor('end') carries the checksum too.
    assert start_cursor(str(log), "end").before == fingerprint(b"INFO after\n")


def test_a_rotated_file_of_another_run_is_not_taken_for_the_copy(tmp_path):
    log = tmp_path / "vllm.log"
    append(log, "INFO this run\n")
    f = LogFollower(str(log))
    lines_of(f)
    saved = f.cursor
    append(log, "INFO unread\n")
    # An older rotation, longer than the offset, is at <log>.1; the live file is truncated without a copy.
    (tmp_path / "vllm.log.1").write_text("INFO an earlier day\n" * 10)
    os.truncate(log, 0)
    append(log, "INFO new\n")
    assert lines_of(f) == ["INFO new"] and f.recovered == 0
    assert lines_of(LogFollower(str(log), saved)) == ["INFO new"]


def test_a_cursor_taken_before_a_copytruncate_the_file_outgrew_since(tmp_path):
    log = tmp_path / "vllm.log"
    append(log, "INFO one\n")
    f = LogFollower(str(log))
    lines_of(f)
    saved = Cursor.load(f.cursor.dump())
    append(log, "ERROR engine died\n")
    copytruncate(log)
    append(log, "INFO a new run, longer than the offset\n")
    assert lines_of(LogFollower(str(log), saved)) == ["ERROR engine died", "INFO a new run, longer than the offset"]
