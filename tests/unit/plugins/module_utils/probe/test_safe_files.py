"""What a root process opens where someone else could have put something (module_utils/probe/safe_files)."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.probe import safe_files
from ansible_collections.llmops.vllm.plugins.module_utils.log.follower import LogFollower, start_cursor


def planted(tmp_path, kind):
    path = tmp_path / "vllm.log"
    if kind == "symlink to a root file":
        secret = tmp_path / "shadow"
        secret.write_text("root:secret\n")
        path.symlink_to(secret)
    elif kind == "symlink to /dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "dangling symlink":
        path.symlink_to(tmp_path / "nowhere")
    return path


KINDS = ["symlink to a root file", "symlink to /dev/zero", "fifo", "directory", "dangling symlink"]


@pytest.mark.parametrize("kind", KINDS)
def test_anything_but_a_regular_file_is_refused_at_once(tmp_path, kind):
    path = planted(tmp_path, kind)
    done = []
    # A FIFO without a writer would block a plain open() for ever: the refusal must come at once.
    worker = threading.Thread(target=lambda: done.append(pytest.raises(safe_files.UnsafePath, safe_files.read_regular,
                                                                       str(path), 1024)))
    worker.start()
    worker.join(5)
    assert done, "read_regular blocked on a %s" % kind


def test_a_regular_file_is_read_up_to_its_limit(tmp_path):
    path = tmp_path / "result.json"
    path.write_bytes(b"x" * 10)
    assert safe_files.read_regular(str(path), 10) == b"x" * 10
    with pytest.raises(safe_files.UnsafePath, match="larger than 9 bytes"):
        safe_files.read_regular(str(path), 9)
    with pytest.raises(FileNotFoundError):
        safe_files.read_regular(str(tmp_path / "absent"), 9)


@pytest.mark.parametrize("kind", ["fifo", "symlink to /dev/zero", "directory", "symlink to a root file"])
def test_the_log_follower_names_a_log_that_is_no_regular_file(tmp_path, kind):
    path = planted(tmp_path, kind)
    with pytest.raises(safe_files.UnsafePath, match="vllm.log"):
        list(LogFollower(str(path), start_cursor(str(path), 0)).read())


def test_root_dir_is_made_private_and_refuses_what_others_could_write(tmp_path):
    made = tmp_path / "a" / "bench"
    safe_files.root_dir(str(made), 0o700)
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    assert safe_files.root_dir(str(made)) == str(made)   # an existing private directory is accepted
    link = tmp_path / "link"
    link.symlink_to("/etc")
    with pytest.raises(safe_files.UnsafePath, match="is a link"):
        safe_files.root_dir(str(link))
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(safe_files.UnsafePath, match="writable by its group or others"):
        safe_files.root_dir(str(shared))
    afile = tmp_path / "file"
    afile.write_text("")
    with pytest.raises(safe_files.UnsafePath, match="not a directory"):
        safe_files.root_dir(str(afile))


def test_root_dir_refuses_a_directory_of_another_user(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only root can give a directory to another user")
    other = tmp_path / "theirs"
    other.mkdir(mode=0o700)
    os.chown(other, 65534, 65534)
    with pytest.raises(safe_files.UnsafePath, match="belongs to uid 65534"):
        safe_files.root_dir(str(other))


def test_an_unreadable_file_is_named_not_a_traceback(tmp_path, monkeypatch):
    path = tmp_path / "vllm.log"
    path.write_text("x\n")

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(safe_files.os, "open", denied)
    with pytest.raises(safe_files.UnsafePath, match="vllm.log cannot be read: Permission denied"):
        list(LogFollower(str(path), start_cursor(str(path), 0)).read())
