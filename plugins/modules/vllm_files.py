#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_files
short_description: Directories and small files with their owner and mode, many in one task, never through a link
version_added: 0.3.0
description:
  - Sets each directory of O(directories), then each file of O(files), to its owner, group and mode (and a file to
    its content), in the order given, in one call to the host. A deploy that changes nothing pays one module run
    for them all instead of one per path.
  - No link another user could have put is followed. A link where a directory should be is followed only when it
    is root's, in a directory only root can write (a model cache moved to another disk); any other link, or anything
    but a directory, fails the task, naming the path. A file is written beside its name and renamed over it, so a
    link at the name is replaced, never followed, and a reader sees the old file or the new one.
  - Missing parents of a directory are made as root with mode 0755; a file's directory must exist (list it in
    O(directories)).
author:
  - llmops.vllm maintainers (!UNKNOWN)
options:
  directories:
    description:
      - The directories, each with C(path), C(owner), C(group) and C(mode) (an octal string), or only a path, for
        which O(owner), O(group) and O(mode) apply.
    type: list
    elements: raw
    default: []
  files:
    description:
      - The files, each with C(path) and either C(content) (text, written as UTF-8) or C(src) (a regular file on
        the host whose bytes it gets, read without following a link, at most 1 MiB, as when a staged file is installed), and
        C(owner), C(group) and C(mode) where they differ from O(owner), O(group) and O(mode).
    type: list
    elements: dict
    default: []
  owner:
    description: The owner of each entry that names none.
    type: str
  group:
    description: The group of each entry that names none.
    type: str
  mode:
    description: The mode (an octal string) of each entry that names none.
    type: str
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: Check mode reads each path and reports what would change; it writes nothing.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
  idempotent:
    description: When run twice in a row outside check mode, with the same arguments, the second invocation indicates
      no change.
    support: full
"""

EXAMPLES = r"""
- name: Create the helpers' directories and install the helpers
  llmops.vllm.vllm_files:
    directories: [/usr/local/lib/llmops-vllm]
    files:
      - path: /usr/local/lib/llmops-vllm/vllm_watchdog.py
        content: "{{ lookup('ansible.builtin.file', 'vllm_watchdog.py', rstrip=false) }}"
    owner: root
    group: root
    mode: "0755"
"""

RETURN = r"""
changed_paths:
  description: The paths that changed (or would, in check mode), in the order given.
  returned: always
  type: list
  elements: str
"""

import grp
import os
import pwd

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils.probe import safe_files

_REQUIRED = {"directories": {"path"}, "files": {"path"}}
_SOURCES = ("content", "src")
_SHARED = ("owner", "group", "mode")
# A staged unit or env file is a few kB.
_SRC_LIMIT = 1 << 20


def _entry(module, option, index, entry):
    """(path, uid, gid, mode) of one entry, or the task fails naming the option, the entry and what is wrong."""
    where = "%s[%d]" % (option, index)
    if option == "directories" and isinstance(entry, str):
        entry = {"path": entry}
    allowed = _REQUIRED[option] | set(_SHARED) | (set(_SOURCES) if option == "files" else set())
    if not isinstance(entry, dict) or not _REQUIRED[option] <= set(entry) <= allowed or (
            option == "files" and len(set(_SOURCES) & set(entry)) != 1):
        module.fail_json(msg="%s must have the keys %s%s (and may have %s), got %r"
                         % (where, ", ".join(sorted(_REQUIRED[option])),
                            " and one of content, src" if option == "files" else "", ", ".join(_SHARED), entry))
    entry = dict(entry)
    for key in _SHARED:
        if entry.get(key) is None:
            if module.params[key] is None:
                module.fail_json(msg="%s has no %s, and the task sets none for all" % (where, key))
            entry[key] = module.params[key]
    path = entry["path"]
    if not isinstance(path, str) or not os.path.isabs(path) or "\0" in path or os.path.normpath(path) != path.rstrip("/"):
        module.fail_json(msg="%s.path must be an absolute, normalised path, got %r" % (where, path))
    try:
        uid = pwd.getpwnam(str(entry["owner"])).pw_uid
        gid = grp.getgrnam(str(entry["group"])).gr_gid
    except KeyError as e:
        # In check mode, an account the same run would create first (vllm_install makes the service user).
        if not module.check_mode:
            module.fail_json(msg="%s: no such user or group on the host: %s" % (where, e))
        uid = gid = None
    mode = str(entry["mode"])
    if not (mode.isdigit() and set(mode) <= set("01234567") and len(mode) in (3, 4)):
        module.fail_json(msg="%s.mode must be an octal string such as \"0644\", got %r" % (where, entry["mode"]))
    return path.rstrip("/") or "/", uid, gid, int(mode, 8)


def _diff(change):
    def lines(state):
        return "".join("%s: %s\n" % (key, state[key]) for key in ("state", "owner", "mode") if key in state)

    diff = {"before_header": change["path"], "after_header": change["path"],
            "before": lines(change["before"]), "after": lines(change["after"])}
    if "after_content" in change:
        before = change["before_content"]
        diff["before"] += "\n" + (before.decode("utf-8", "replace") if before is not None else "")
        diff["after"] += "\n" + change["after_content"]
    return diff


def main():
    module = AnsibleModule(
        argument_spec=dict(
            directories=dict(type="list", elements="raw", default=[]),
            files=dict(type="list", elements="dict", default=[]),
            owner=dict(type="str"),
            group=dict(type="str"),
            mode=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    directories = [_entry(module, "directories", i, e) for i, e in enumerate(module.params["directories"])]
    files = [(_entry(module, "files", i, e), e.get("content"), e.get("src")) for i, e in enumerate(module.params["files"])]
    for index, (unused, content, src) in enumerate(files):
        if src is None and not isinstance(content, str):
            module.fail_json(msg="files[%d].content must be text, got %s" % (index, type(content).__name__))
        if content is None and not (isinstance(src, str) and os.path.isabs(src)):
            module.fail_json(msg="files[%d].src must be an absolute path, got %r" % (index, src))
    changes = []
    try:
        for path, uid, gid, mode in directories:
            if uid is None:
                changes.append({"path": path, "before": {"state": "unknown"}, "after": {"state": "directory"}})
                continue
            change = safe_files.ensure_directory(path, uid, gid, mode, check=module.check_mode)
            if change:
                changes.append(change)
        for (path, uid, gid, mode), content, src in files:
            data = content.encode("utf-8") if src is None else safe_files.read_regular(src, _SRC_LIMIT)
            text = data.decode("utf-8", "replace")
            if uid is None:
                changes.append({"path": path, "before": {"state": "unknown"}, "after": {"state": "file"},
                                "before_content": None, "after_content": text})
                continue
            change = safe_files.ensure_file(path, data, uid, gid, mode, check=module.check_mode)
            if change:
                change["after_content"] = text
                changes.append(change)
    except (safe_files.UnsafePath, OSError) as e:
        module.fail_json(msg=str(e), changed_paths=[c["path"] for c in changes], changed=bool(changes))
    result = {"changed": bool(changes), "changed_paths": [c["path"] for c in changes]}
    if module._diff:
        result["diff"] = [_diff(c) for c in changes]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
