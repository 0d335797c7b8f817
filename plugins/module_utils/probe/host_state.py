# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What runs on a host, read from the host alone: the unit's state from ``systemctl show``, the running command from
the main process's own ``/proc/<pid>/cmdline`` (not the unit file, which a staged change may already have replaced),
its vLLM from the venv that command runs, the watchdog's state, and the rollback targets the server role keeps.

Everything is read through injectable callables, so the unit tests give it a systemd and a /proc of their own.
"""

from __future__ import annotations

import glob
import json
import os
import time

from ansible_collections.llmops.vllm.plugins.module_utils.probe import safe_files
from ansible_collections.llmops.vllm.plugins.module_utils.probe.process import as_int, parse_show

PROPERTIES = ("MainPID", "ActiveState", "SubState", "NRestarts", "ExecMainStartTimestampMonotonic", "LoadState")


def _flag(argv, name):
    """The value of ``--name value`` or ``--name=value`` in argv, or None."""
    for index, word in enumerate(argv):
        if word == name and index + 1 < len(argv):
            return argv[index + 1]
        if word.startswith(name + "="):
            return word[len(name) + 1:]
    return None


def read_cmdline(pid, proc="/proc"):
    """The process's argv, or [] when it is gone or unreadable."""
    try:
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as f:
            raw = f.read()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def venv_release(venv, find=glob.glob):
    """(package, version) of the vLLM distribution the venv holds, from its dist-info's METADATA; ('', '') if none."""
    for meta in sorted(find(os.path.join(venv, "lib", "python*", "site-packages", "vllm*.dist-info", "METADATA"))):
        name = version = ""
        try:
            with open(meta, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if not line.strip():
                        break
                    key, _sep, value = line.partition(":")
                    if key == "Name":
                        name = value.strip()
                    elif key == "Version":
                        version = value.strip()
        except OSError:
            continue
        if name and version:
            return name, version
    return "", ""


def serving(argv, release=venv_release):
    """What a ``vllm serve`` argv runs: its venv, package and version, model, served name, port, tensor parallel size
    and speculative method, drafter and K. Empty fields for what the argv does not say."""
    out = {"venv": "", "package": "", "version": "", "model": "", "served_model_name": "", "port": "",
           "tensor_parallel_size": "", "speculative_method": "", "drafter": "", "num_speculative_tokens": None}
    if "serve" not in argv:
        return out
    at = argv.index("serve")
    if at > 0:
        cli = next((word for word in reversed(argv[:at]) if "/bin/" in word), argv[at - 1])
        out["venv"] = os.path.dirname(os.path.dirname(cli))
        out["package"], out["version"] = release(out["venv"])
    if at + 1 < len(argv) and not argv[at + 1].startswith("-"):
        out["model"] = argv[at + 1]
    out["model"] = _flag(argv, "--model") or out["model"]
    out["served_model_name"] = _flag(argv, "--served-model-name") or ""
    out["port"] = _flag(argv, "--port") or ""
    out["tensor_parallel_size"] = _flag(argv, "--tensor-parallel-size") or ""
    spec = _flag(argv, "--speculative-config")
    if spec:
        try:
            config = json.loads(spec)
        except ValueError:
            config = {}
        if isinstance(config, dict):
            out["speculative_method"] = str(config.get("method") or "")
            out["drafter"] = str(config.get("model") or "")
            out["num_speculative_tokens"] = config.get("num_speculative_tokens")
    return out


def kept(directory, exists=os.path.exists, mtime=os.path.getmtime):
    """When the server role kept a start's files there (served.json's time), or None when it holds none."""
    path = os.path.join(directory, "served.json")
    return mtime(path) if exists(path) else None


def liveness(path, pid):
    """What the watchdog's last probe (a 1-token completion) found of the server with MainPID ``pid``: 'answers',
    'no answer: <why>' (a server whose /health answers and whose engine does not shows here and nowhere else), or ''
    when the watchdog has no record of that process. Its state file is root's, read without following a link."""
    try:
        state = json.loads(safe_files.read_regular(path, 65536).decode("utf-8"))
    except (OSError, ValueError, safe_files.UnsafePath):
        return ""
    if not isinstance(state, dict) or not pid or state.get("pid") != pid or "up" not in state:
        return ""
    if state.get("up"):
        return "answers"
    return "no answer: %s" % (state.get("note") or "the last probe failed")


def read(service, watchdog, state_dir, run, proc="/proc", monotonic=time.monotonic, release=venv_release,
         exists=os.path.exists, mtime=os.path.getmtime):
    """One host's row. ``run(argv) -> (rc, stdout, stderr)`` runs systemctl; ``state_dir`` is the server role's
    private directory for the service (last-good/ and previous/ in it)."""
    rc, out, _err = run(["systemctl", "show", "--no-pager"] + ["-p" + p for p in PROPERTIES] + ["--", service])
    props = parse_show(out) if rc == 0 else {}
    pid = as_int(props.get("MainPID"))
    started = as_int(props.get("ExecMainStartTimestampMonotonic"))
    row = {
        "service": service,
        "installed": props.get("LoadState", "") == "loaded",
        "state": props.get("ActiveState", "") or "unknown",
        "sub_state": props.get("SubState", ""),
        "pid": pid,
        "restarts": as_int(props.get("NRestarts")),
        "uptime": round(monotonic() - started / 1e6, 1) if pid and started else None,
    }
    row.update(serving(read_cmdline(pid, proc) if pid else [], release))
    wrc, wout, _werr = run(["systemctl", "show", "--no-pager", "-pActiveState", "--value", "--", watchdog])
    row["watchdog"] = (wout or "").strip() if wrc == 0 else "unknown"
    row["liveness"] = liveness(os.path.join(state_dir, "watchdog.json"), pid)
    row["last_good_at"] = kept(os.path.join(state_dir, "last-good"), exists, mtime)
    row["rollback_target_at"] = kept(os.path.join(state_dir, "previous"), exists, mtime)
    return row
