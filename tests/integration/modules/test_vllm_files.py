"""vllm_files as a user runs it: directories and files set in one task, nothing another user planted followed."""

from __future__ import annotations

import os
import stat

from ansible_collections.llmops.vllm.tests.helpers.ansible_cli import RC_HOST_FAILED, run_module

NOBODY = 65534  # the uid and gid of a user who is not root, for what "the service user" plants


def files(check=False, **args):
    run = run_module("llmops.vllm.vllm_files", dict({"owner": "root", "group": "root"}, **args), check=check,
                     timeout=60)
    return run.rc, run.result()


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_one_task_makes_directories_and_files_then_changes_nothing(tmp_path):
    top, unit = tmp_path / "a" / "b", tmp_path / "a" / "b" / "x.service"
    args = dict(directories=[str(top), {"path": str(tmp_path / "private"), "mode": "0700"}],
                files=[{"path": str(unit), "content": "[Unit]\n"}], mode="0644")
    # Check mode says what would change and writes nothing.
    rc, planned = files(check=True, **args)
    assert rc == 0 and planned["changed"] and planned["changed_paths"] == [str(top), str(tmp_path / "private"), str(unit)]
    assert not (tmp_path / "a").exists()
    rc, out = files(**args)
    assert rc == 0 and out["changed_paths"] == planned["changed_paths"], out
    assert unit.read_text() == "[Unit]\n" and mode(unit) == 0o644 and mode(top) == 0o644
    assert mode(tmp_path / "private") == 0o700 and mode(tmp_path / "a") == 0o755  # a parent, as mkdir -p makes it
    rc, again = files(**args)
    assert rc == 0 and again["changed"] is False and again["changed_paths"] == []
    # A new content or mode changes that one path only.
    args["files"][0]["content"] = "[Unit]\nDescription=x\n"
    args["directories"][1]["mode"] = "0750"
    rc, out = files(**args)
    assert rc == 0 and out["changed_paths"] == [str(tmp_path / "private"), str(unit)]
    assert unit.read_text().endswith("Description=x\n") and mode(tmp_path / "private") == 0o750


def test_a_link_at_a_file_name_is_replaced_never_followed(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("root only\n")
    secret.chmod(0o600)
    link = tmp_path / "vllm.logrotate"
    link.symlink_to(secret)
    rc, out = files(files=[{"path": str(link), "content": "new\n"}], mode="0644")
    assert rc == 0 and out["changed"]
    assert not link.is_symlink() and link.read_text() == "new\n"
    assert secret.read_text() == "root only\n" and mode(secret) == 0o600


def test_a_link_someone_else_planted_at_a_directory_is_refused_naming_it(tmp_path):
    # The service user's own directory, where it put a link to root's.
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, NOBODY, NOBODY)
    target = tmp_path / "etc"
    target.mkdir()
    target.chmod(0o755)
    planted = home / "cache"
    planted.symlink_to(target)
    os.lchown(planted, NOBODY, NOBODY)
    rc, out = files(directories=[str(planted)], owner="nobody", group="nogroup", mode="0700")
    assert rc == RC_HOST_FAILED
    assert str(planted) in out["msg"] and "a link" in out["msg"], out
    assert os.stat(target).st_uid == 0 and mode(target) == 0o755


def test_roots_own_link_to_another_disk_is_followed(tmp_path):
    disk = tmp_path / "disk" / "cache"
    disk.mkdir(parents=True)
    (tmp_path / "parent").mkdir(mode=0o755)
    link = tmp_path / "parent" / "cache"
    link.symlink_to(disk)
    rc, out = files(directories=[str(link)], mode="0750")
    assert rc == 0 and out["changed"], out
    assert link.is_symlink() and mode(disk) == 0o750


def test_a_staged_file_on_the_host_is_installed_by_its_bytes_and_a_link_there_is_refused(tmp_path):
    staged, live = tmp_path / "staged.env", tmp_path / "live.env"
    staged.write_bytes(b"KEY=1\n")
    args = dict(files=[{"path": str(live), "src": str(staged)}], mode="0600")
    rc, out = files(**args)
    assert rc == 0 and out["changed_paths"] == [str(live)] and live.read_bytes() == b"KEY=1\n" and mode(live) == 0o600
    rc, again = files(**args)
    assert rc == 0 and again["changed"] is False
    # A link at the source (the staged file swapped for one) is not read through.
    (tmp_path / "secret").write_bytes(b"root only\n")
    staged.unlink()
    staged.symlink_to(tmp_path / "secret")
    rc, out = files(**args)
    assert rc == RC_HOST_FAILED and str(staged) in out["msg"], out
    assert live.read_bytes() == b"KEY=1\n"


def test_bad_entries_fail_naming_the_entry_before_any_change(tmp_path):
    made = tmp_path / "made"
    # mode 493: what YAML makes of an unquoted 0755.
    cases = [
        ({"directories": [str(made), "relative/dir"]}, "directories[1].path must be an absolute, normalised path"),
        ({"directories": [str(made), {"path": str(tmp_path / "x"), "mode": 493}]}, "directories[1].mode must be an octal string"),
        ({"directories": [str(made), {"path": str(tmp_path / "x"), "size": 1}]}, "directories[1] must have the keys path"),
        ({"files": [{"path": str(tmp_path / "f")}], "directories": [str(made)]}, "files[0] must have the keys path and one of content, src"),
        ({"files": [{"path": str(tmp_path / "f"), "content": "x", "src": str(tmp_path / "g")}], "directories": [str(made)]},
         "files[0] must have the keys path and one of content, src"),
        ({"files": [{"path": str(tmp_path / "f"), "src": "staged/x"}], "directories": [str(made)]}, "files[0].src must be an absolute path"),
        ({"directories": [{"path": str(made), "owner": "no-such-user-here"}]}, "directories[0]: no such user or group"),
    ]
    for args, message in cases:
        rc, out = files(**dict({"mode": "0755"}, **args))
        assert rc == RC_HOST_FAILED and message in out["msg"], (args, out)
        assert not made.exists()
    run = run_module("llmops.vllm.vllm_files", {"directories": [str(made)]}, timeout=60)
    assert run.rc == RC_HOST_FAILED and "directories[0] has no owner" in run.result()["msg"] and not made.exists()


def test_diff_names_each_path_with_its_state_and_content(tmp_path):
    unit = tmp_path / "x.timer"
    unit.write_text("old\n")
    unit.chmod(0o600)
    run = run_module("llmops.vllm.vllm_files", {"files": [{"path": str(unit), "content": "new\n"}], "owner": "root",
                                                "group": "root", "mode": "0644"}, check=True,
                     env={"ANSIBLE_DIFF_ALWAYS": "true"}, timeout=60)
    out = run.result()
    assert run.rc == 0 and out["changed"] and unit.read_text() == "old\n"
    assert "mode: 0600" in out["diff"][0]["before"] and "old\n" in out["diff"][0]["before"]
    assert "mode: 0644" in out["diff"][0]["after"] and "new\n" in out["diff"][0]["after"]


def test_check_mode_counts_an_account_the_run_would_create_as_a_change(tmp_path):
    args = {"directories": [str(tmp_path / "home")], "owner": "no-such-user-here", "group": "root", "mode": "0750"}
    run = run_module("llmops.vllm.vllm_files", args, check=True, timeout=60)
    assert run.rc == 0 and run.result()["changed_paths"] == [str(tmp_path / "home")], run.result()
    assert not (tmp_path / "home").exists()
    # Outside check mode the account must exist.
    run = run_module("llmops.vllm.vllm_files", args, timeout=60)
    assert run.rc == RC_HOST_FAILED and "no such user or group" in run.result()["msg"]
