#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_prune
short_description: Remove the versioned vLLM virtualenvs a host no longer needs
version_added: 0.3.0
description:
  - Lists the virtualenvs under O(venvs_dir) and removes those no unit, kept start or running server names, except
    the O(keep) most recent complete ones (module_utils/plan/prune). The running server's venv, the live and staged
    units' venvs, the last good start's and the rollback target's (the files under O(state_dir)), and O(next) always
    stay. A venv with no vLLM installed in it (an install that was killed) is half-made and goes.
  - Never follows a link - a link in O(venvs_dir) is neither counted nor removed. Reports the bytes it freed; check
    mode reports what it would remove and removes nothing.
author:
  - llmops.vllm maintainers (!UNKNOWN)
options:
  venvs_dir:
    description: The directory of the versioned virtualenvs (the parent of C(vllm_common_venv_dir)).
    type: path
    required: true
  keep:
    description: How many of the most recent complete virtualenvs stay besides those that must.
    type: int
    default: 2
  units:
    description: Unit files whose ExecStart names a venv that must stay (the live and the staged unit).
    type: list
    elements: path
    default: []
  state_dir:
    description: The server role's private directory for the service (its last-good/ and previous/ units).
    type: path
    required: true
  next:
    description: The venv the inventory names (C(vllm_common_venv_dir)), which the next deploy uses.
    type: path
    default: ""
  service:
    description: The vLLM service, whose running main process's venv stays.
    type: str
    default: vllm
extends_documentation_fragment:
  - llmops.vllm.attributes.sets_state
"""

EXAMPLES = r"""
- name: Keep the two most recent virtualenvs and those in use
  llmops.vllm.vllm_prune:
    venvs_dir: /opt/vllm/venvs
    keep: 2
    units: [/etc/systemd/system/vllm.service]
    state_dir: /var/lib/llmops-vllm/vllm
"""

RETURN = r"""
removed:
  description: The virtualenvs removed (in check mode, those that would be).
  returned: always
  type: list
  elements: str
kept:
  description: The virtualenvs kept, each with why.
  returned: always
  type: list
  elements: dict
bytes_freed:
  description: The bytes the removals freed (would free, in check mode).
  returned: always
  type: int
"""

import os
import shutil

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.vllm.plugins.module_utils.plan import prune
from ansible_collections.llmops.vllm.plugins.module_utils.probe import host_state
from ansible_collections.llmops.vllm.plugins.module_utils.probe.process import SYSTEMCTL_ENV, unit_main_pid


def _size(path):
    total = 0
    for root, dirs, files in os.walk(path, followlinks=False):
        for name in files + dirs:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venvs_dir=dict(type="path", required=True),
            keep=dict(type="int", default=2),
            units=dict(type="list", elements="path", default=[]),
            state_dir=dict(type="path", required=True),
            next=dict(type="path", default=""),
            service=dict(type="str", default="vllm"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    venvs_dir = p["venvs_dir"].rstrip("/")
    if p["keep"] < 0:
        module.fail_json(msg="vllm_install_prune_keep must be 0 or more, got %d" % p["keep"])
    try:
        names = sorted(os.listdir(venvs_dir))
    except FileNotFoundError:
        names = []
    found = []
    for name in names:
        path = os.path.join(venvs_dir, name)
        st = os.lstat(path)
        if not os.path.isdir(path) or os.path.islink(path):
            continue
        found.append({"path": path, "mtime": st.st_mtime, "size": _size(path),
                      "complete": bool(host_state.venv_release(path)[1])})
    protected = {}
    pid = unit_main_pid(p["service"], lambda argv: module.run_command(argv, environ_update=SYSTEMCTL_ENV))
    running = host_state.serving(host_state.read_cmdline(pid) if pid else [], lambda venv: ("", ""))["venv"]
    if running:
        protected[running] = "the running server's"
    for unit in p["units"]:
        for path in prune.venvs_named(_read(unit), venvs_dir):
            protected.setdefault(path, "named by %s" % unit)
    for kept, why in (("last-good", "the last good start's"), ("previous", "the rollback target's")):
        for path in prune.venvs_named(_read(os.path.join(p["state_dir"], kept, "unit")), venvs_dir):
            protected.setdefault(path, why)
    if p["next"]:
        protected.setdefault(p["next"].rstrip("/"), "the inventory's (vllm_common_venv_dir)")
    decision = prune.plan(found, protected, p["keep"])
    if not module.check_mode:
        for path in decision["remove"]:
            shutil.rmtree(path)
    module.exit_json(changed=bool(decision["remove"]), removed=decision["remove"], kept=decision["kept"],
                     bytes_freed=decision["bytes"])


if __name__ == "__main__":
    main()
