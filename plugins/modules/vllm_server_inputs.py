#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_server_inputs
short_description: Name what a vLLM server would load, and what the running one was started with
version_added: 0.3.0
description:
  - Computes one digest of the inputs a vLLM server process loads (O(parts); files by content, directory trees by
    each file's relative path and content or size and mtime) and reads the digest the unit's running process was
    started with (C(LLMOPS_VLLM_INPUTS) in C(/proc/<MainPID>/environ)).
  - The two differ until a start of exactly these inputs succeeded, whatever happened to earlier runs, so a restart
    decided from them survives an interrupted deploy.
  - Files are opened without following links; a link in a tree counts by its target's path, size and mtime.
  - It only reads and always reports C(changed=false).
author:
  - llmops.vllm maintainers (!UNKNOWN)
options:
  parts:
    description:
      - What the server loads, by part name. Each part has C(files) (paths or globs; a missing path counts as
        absent) and C(trees) (directories).
      - The digest of a part does not depend on where its files are, so staged copies give the digest of the live
        files they will become.
    type: dict
    required: true
  unit:
    description: The systemd unit whose running process is read. Without it, only the digest is computed.
    type: str
    default: ""
  user:
    description:
      - The service account the process runs as. Where root may not read C(/proc/<MainPID>/environ) (no
        C(CAP_SYS_PTRACE), as in containers), it is read as this account, the process's own.
    type: str
    default: ""
  history_path:
    description:
      - A JSON file of the identities recorded before earlier starts (each digest with its parts), returned as RV(history) so
        a restart can name the parts that changed. A missing or unreadable file gives an empty history.
    type: path
  checked_path:
    description: A file holding the digest vLLM's config check last passed, returned as RV(checked).
    type: path
  confirmed_path:
    description:
      - The copy of the inputs' env file kept for the last start that passed every check after it (wait, smoke run,
        speed gate) and went back to traffic; its digest is returned as RV(confirmed).
    type: path
  present:
    description: Paths whose presence the task reports in RV(absent) (not followed, so a dangling link is present).
    type: list
    elements: path
    default: []
  staged_trees:
    description:
      - What the roll will make of trees of O(parts), by root, for RV(staged_digest) - C(files) (name in the tree
        to the staged copy the roll installs there) and C(links) (name to the target the roll links it to). The
        roll removes the other links at the top of such a tree, so they do not count.
    type: dict
    default: {}
extends_documentation_fragment:
  - llmops.vllm.attributes.read_only
"""

EXAMPLES = r"""
- name: What the server would load, and what it runs
  llmops.vllm.vllm_server_inputs:
    unit: vllm
    parts:
      unit: {files: [/etc/systemd/system/vllm.service]}
      env file: {files: [/etc/vllm/vllm.env]}
      virtualenv: {files: ["/opt/vllm/venvs/vllm-0.20.2/lib/python*/site-packages/*.dist-info/RECORD"]}
      drafter or model files: {trees: [/opt/vllm/drafter, /opt/models/Qwen3.6-27B]}
  register: inputs

- name: Say whether the server runs them
  ansible.builtin.debug:
    msg: "{{ 'runs them' if inputs.running_digest == inputs.digest else 'runs something else' }}"
"""

RETURN = r"""
digest:
  description: The identity of the inputs (sha256 of the parts' digests).
  returned: always
  type: str
parts:
  description: Each part's digest, by name.
  returned: always
  type: dict
running_pid:
  description: The unit's MainPID (0 when it is not running, or without O(unit)).
  returned: always
  type: int
running_digest:
  description: The digest the running process was started with; empty when it has none (not running, or started
    by a release that did not record one).
  returned: always
  type: str
history:
  description: The content of O(history_path); empty without it.
  returned: always
  type: dict
checked:
  description: The content of O(checked_path), stripped; empty without it.
  returned: always
  type: str
confirmed:
  description: The digest of the last start that passed its checks (O(confirmed_path)); empty without it.
  returned: always
  type: str
staged_digest:
  description: The digest the host will have once the roll has installed O(staged_trees); RV(digest) without them.
  returned: always
  type: str
absent:
  description: The paths of O(present) that do not exist, in the order given.
  returned: always
  type: list
  elements: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils.probe import as_user
from ansible_collections.llmops.vllm.plugins.module_utils.probe.inputs import env_file_digest, identity, running_digest
from ansible_collections.llmops.vllm.plugins.module_utils.probe.process import SYSTEMCTL_ENV, unit_main_pid


def main():
    module = AnsibleModule(
        argument_spec=dict(
            parts=dict(type="dict", required=True),
            unit=dict(type="str", default=""),
            user=dict(type="str", default=""),
            history_path=dict(type="path"),
            checked_path=dict(type="path"),
            confirmed_path=dict(type="path"),
            staged_trees=dict(type="dict", default={}),
            present=dict(type="list", elements="path", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    for name, spec in p["parts"].items():
        if not isinstance(spec, dict) or set(spec) - {"files", "trees"} or not all(
                isinstance(spec.get(key, []), list) for key in ("files", "trees")):
            module.fail_json(msg="parts[%r] must be a mapping of files and trees (lists of paths), got %r" % (name, spec))
    for root, tree in p["staged_trees"].items():
        if not (isinstance(tree, dict) and not set(tree) - {"files", "links"} and all(
                isinstance(tree.get(key, {}), dict) and all(isinstance(v, str) for v in tree.get(key, {}).values())
                for key in ("files", "links"))):
            module.fail_json(msg="staged_trees[%r] must be a mapping of files and links (names to paths), got %r"
                             % (root, tree))
    pid = unit_main_pid(p["unit"], lambda argv: module.run_command(argv, environ_update=SYSTEMCTL_ENV)) if p["unit"] else 0
    found = identity(p["parts"])
    staged = identity(p["parts"], p["staged_trees"]) if p["staged_trees"] else found

    def read_as_user(path):
        try:
            drop = as_user.drop_argv(p["user"])[0]
        except KeyError:
            return None
        rc, out, _err = module.run_command(drop + ["cat", "--", path], binary_data=True, encoding=None)
        return out if rc == 0 else None

    history = _read(p["history_path"])
    try:
        history = json.loads(history) if history else {}
    except ValueError:
        history = {}
    module.exit_json(changed=False, digest=found["digest"], parts=found["parts"], running_pid=pid,
                     running_digest=running_digest(pid, read=read_as_user if p["user"] else None) or "", history=history if isinstance(history, dict) else {},
                     checked=_read(p["checked_path"]).strip(), confirmed=env_file_digest(_read(p["confirmed_path"])),
                     staged_digest=staged["digest"],
                     absent=[path for path in p["present"] if not os.path.lexists(path)])


def _read(path):
    """A small root-owned record of the collection's, or '' when there is none."""
    if not path:
        return ""
    try:
        with open(path) as handle:
            return handle.read(1 << 20)
    except (OSError, UnicodeDecodeError):
        return ""


if __name__ == "__main__":
    main()
