# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which versioned virtualenvs a prune removes (playbooks/prune.yml): every venv stays that the host may still need:
the one the running server runs, the ones the live and staged units name, the ones the kept starts name (the last
good start and the rollback target, so a rollback always has its vLLM), and the one the inventory names next. Of the
others, the ``keep`` most recent complete ones stay too; a half-made one (no vLLM installed in it: an install that was
killed) is never among them.
"""

from __future__ import annotations

import re

# A unit's ExecStart names the venv's CLI: <base>/venvs/<name>/bin/<cli>.
_VENV_IN_TEXT = re.compile(r"(/[^\s'\"]*?/venvs/[^/\s'\"]+)/bin/")


def venvs_named(text, venvs_dir):
    """The venvs under ``venvs_dir`` that a unit file (or any text) names by their CLI's path."""
    prefix = venvs_dir.rstrip("/") + "/"
    return {path for path in _VENV_IN_TEXT.findall(text or "") if path.startswith(prefix)}


def plan(found, protected, keep):
    """``found``: [{path, mtime, complete, size}] the venvs on the host; ``protected``: {path: why} of those that must
    stay; ``keep``: how many more of the newest complete ones stay.

    Returns {'remove': [path], 'kept': [{path, why}], 'bytes': bytes the removals free}."""
    if not isinstance(keep, int) or isinstance(keep, bool) or keep < 0:
        raise ValueError("vllm_install_prune_keep must be a whole number of 0 or more, got %r" % (keep,))
    kept, remove = [], []
    others = sorted((v for v in found if v["path"] not in protected), key=lambda v: v["mtime"], reverse=True)
    recent = [v["path"] for v in others if v["complete"]][:keep]
    for venv in sorted(found, key=lambda v: v["path"]):
        path = venv["path"]
        if path in protected:
            kept.append({"path": path, "why": protected[path]})
        elif path in recent:
            kept.append({"path": path, "why": "one of the %d most recent" % keep})
        else:
            remove.append(path)
    freed = sum(int(v.get("size") or 0) for v in found if v["path"] in remove)
    return {"remove": remove, "kept": kept, "bytes": freed}
