"""Model files read as the account the server runs as: a forked child with its uid, gid and groups (nobody here)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.probe.as_user import ReadAsUserError, drop_argv, read_as
from ansible_collections.llmops.vllm.plugins.module_utils.probe.model_files import ModelFilesError, describe_model

NOBODY = "nobody"


@pytest.fixture
def world_dir():
    """A directory every account can enter (pytest's own tmp_path is root's alone, 0700)."""
    if os.geteuid() != 0:
        pytest.skip("only root can read as another account")
    path = Path(tempfile.mkdtemp(prefix="read-as-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def a_model(where: Path) -> Path:
    model = where / "model"
    model.mkdir(mode=0o755)
    (model / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"]}))
    (model / "config.json").chmod(0o644)
    return model


def read(model):
    return read_as(NOBODY, describe_model, (str(model), [], False, False), error_types=(ModelFilesError,))


def test_a_readable_model_is_read_by_the_account(world_dir):
    info, who = read(a_model(world_dir))
    assert who == NOBODY
    assert info["config"] == {"architectures": ["Qwen3ForCausalLM"]}


def test_a_file_only_root_can_read_fails_naming_the_account(world_dir):
    model = a_model(world_dir)
    (model / "config.json").chmod(0o600)
    with pytest.raises(ModelFilesError, match=r"Permission denied.*\(read as nobody\)"):
        read(model)


def test_a_link_to_a_root_only_file_is_not_followed_as_root(world_dir):
    secret = world_dir / "secret"
    secret.write_text('{"root": "only"}')
    secret.chmod(0o600)
    model = world_dir / "model"
    model.mkdir(mode=0o755)
    (model / "config.json").symlink_to(secret)
    assert describe_model(str(model), read_weights=False)["config"] == {"root": "only"}   # root itself would
    with pytest.raises(ModelFilesError, match="Permission denied"):
        read(model)


def test_an_account_the_host_lacks_leaves_the_read_to_the_caller(world_dir):
    info, who = read_as("no-such-account-here", describe_model, (str(a_model(world_dir)), [], False, False))
    assert who is None and info["config"]["architectures"] == ["Qwen3ForCausalLM"]


def test_a_read_that_crashes_is_an_error_of_the_read_not_a_hang(world_dir):
    with pytest.raises(ReadAsUserError, match="ZeroDivisionError"):
        read_as(NOBODY, lambda: 1 // 0, error_types=(ModelFilesError,))


def test_a_read_past_its_deadline_is_killed(world_dir):
    started = time.monotonic()
    with pytest.raises(ReadAsUserError, match="more than 1 s"):
        read_as(NOBODY, time.sleep, (30,), deadline_s=1)
    assert time.monotonic() - started < 10


def test_a_command_runs_as_the_account_with_its_groups_and_as_the_caller_without_one():
    if os.geteuid() != 0:
        pytest.skip("only root can run as another account")
    drop, entry = drop_argv(NOBODY)
    assert drop[0] == "setpriv" and "--init-groups" in drop and entry.pw_name == NOBODY
    assert subprocess.run(drop + ["id", "-u"], capture_output=True, text=True, check=True).stdout.strip() == str(entry.pw_uid)
    assert drop_argv("") == ([], None) and drop_argv("root") == ([], None)
    with pytest.raises(KeyError):
        drop_argv("no-such-account-here")
