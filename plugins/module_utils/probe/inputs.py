# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a vLLM server process loads, named by one digest: its identity.

A deploy decides a restart from what is on the host, not from what happened in its own run: the digest of the
inputs the server would load now (unit, env file, drafter and model files, virtualenv) against the digest the
running process was started with. systemd hands that one to the process (``LLMOPS_VLLM_INPUTS`` in a root-only
EnvironmentFile written just before the start), so it is read back from ``/proc/<MainPID>/environ``: a process
started by systemd's Restart= or the watchdog carries the digest of the files it loaded, and a deploy killed
anywhere leaves the two digests different until a start of the new inputs succeeds.

Each part is a list of files (globs allowed; content digest) and of trees (every file's relative path, and its
content digest when it is a small regular file, else its size and mtime: a 50 GB checkpoint is not read on every
run). Nothing here follows a link to read content: a link in a tree counts by its target's path, size and mtime.

A staged tree names what the roll will make of a tree (the drafter's render directory: its new config, its links
to the checkpoint, stale links removed), so staging can tell, before any host restarts, whether the roll would
start the server again: the staged identity against the running one.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import stat

ENV_NAME = "LLMOPS_VLLM_INPUTS"
# Files up to this size are read for their digest; larger ones count by size and mtime.
SMALL = 1 << 20


def _content(path):
    """The sha256 of a regular file opened without following a link, or None when it is not one."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        digest = hashlib.sha256()
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return digest.hexdigest()
            digest.update(chunk)
    finally:
        os.close(fd)


def _entry(path):
    """How one file counts: content for a small regular file, else what stat says (a link: its target's)."""
    try:
        own = os.lstat(path)
    except OSError:
        return "absent"
    if stat.S_ISLNK(own.st_mode):
        try:
            target = os.stat(path)
        except OSError:
            return "dangling link to %s" % os.readlink(path)
        return "link to %s %d %d" % (os.readlink(path), target.st_size, target.st_mtime_ns)
    if stat.S_ISREG(own.st_mode) and own.st_size <= SMALL:
        return _content(path) or "unreadable"
    if stat.S_ISREG(own.st_mode):
        return "%d %d" % (own.st_size, own.st_mtime_ns)
    return "not a file"


def files_entries(patterns):
    """Each file a pattern names (a glob, or a plain path that may be absent), in order."""
    entries = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        entries.extend((path, _entry(path)) for path in matches)
        if not matches:
            entries.append((pattern, "no match"))
    return entries


def tree_entries(root):
    """Each file under root by its path relative to root; links to directories are not walked."""
    if not os.path.isdir(root) or os.path.islink(root):
        return [(root, _entry(root) if os.path.lexists(root) else "absent")]
    entries = []
    for top, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names + [d for d in dirs if os.path.islink(os.path.join(top, d))]):
            path = os.path.join(top, name)
            entries.append((os.path.relpath(path, root), _entry(path)))
    return entries


def _link_entry(target):
    """How a link to target will count once it is made (as _entry counts a link)."""
    try:
        found = os.stat(target)
    except OSError:
        return "dangling link to %s" % target
    return "link to %s %d %d" % (target, found.st_size, found.st_mtime_ns)


def staged_tree_entries(root, staged):
    """tree_entries(root) as they will be once the roll has made each of staged's ``files`` ({name: staged copy})
    and ``links`` ({name: target}) at the top of the tree and removed the other links there."""
    present = tree_entries(root) if os.path.isdir(root) and not os.path.islink(root) else []
    top = {name: entry for name, entry in present if "/" not in name and not entry.startswith(("link to ", "dangling link to "))}
    below = [(name, entry) for name, entry in present if "/" in name]
    top.update((name, _link_entry(target)) for name, target in (staged.get("links") or {}).items())
    top.update((name, _entry(path)) for name, path in (staged.get("files") or {}).items())
    # os.walk lists the top of the tree first, by name, then each directory below it.
    return sorted(top.items()) + below


def part_digest(spec, staged=None):
    """The digest of one part: {'files': [patterns], 'trees': [dirs]}. Trees count by relative path, so the same
    content staged elsewhere gives the same digest; a tree named in staged ({root: {files, links}}) counts as the
    roll will leave it."""
    staged = {os.path.normpath(root): tree for root, tree in (staged or {}).items()}
    # The files' own paths do not count, only their order and content: a staged unit equals the live one.
    entries = {"files": [entry for _path, entry in files_entries(spec.get("files") or [])],
               "trees": [staged_tree_entries(root, staged[os.path.normpath(root)]) if os.path.normpath(root) in staged
                         else tree_entries(root) for root in spec.get("trees") or []]}
    return hashlib.sha256(json.dumps(entries, sort_keys=True).encode()).hexdigest()


def identity(parts, staged=None):
    """{'digest': the identity, 'parts': {name: digest}} of {name: spec}; with staged (see part_digest), the
    identity the host will have once the roll has installed what staging left."""
    digests = {name: part_digest(spec or {}, staged) for name, spec in sorted(parts.items())}
    return {"digest": hashlib.sha256(json.dumps(digests, sort_keys=True).encode()).hexdigest(), "parts": digests}


def running_digest(pid, proc="/proc", read=None):
    """The ENV_NAME a running process was started with: None when it has none (or is gone).

    read(path) returns the bytes of /proc/<pid>/environ where root may not read it itself (no CAP_SYS_PTRACE, as in
    containers): the caller reads it as the process's own user."""
    if not pid:
        return None
    path = os.path.join(proc, str(int(pid)), "environ")
    try:
        with open(path, "rb") as handle:
            environ = handle.read()
    except PermissionError:
        environ = read(path) if read else None
    except (OSError, ValueError):
        environ = None
    if not environ:
        return None
    prefix = (ENV_NAME + "=").encode()
    for item in environ.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix):].decode("ascii", "replace")
    return None


def env_file(digest):
    """The EnvironmentFile line that hands the digest to the process."""
    return "%s=%s\n" % (ENV_NAME, digest)


def env_file_digest(text):
    """The digest an env_file() text hands over; '' for anything else."""
    for line in (text or "").splitlines():
        if line.startswith(ENV_NAME + "="):
            return line[len(ENV_NAME) + 1:].strip()
    return ""


def remember(history, current, keep=8):
    """The history of identities ({digest: parts}) with current added last, the oldest beyond keep dropped."""
    entries = [(digest, parts) for digest, parts in (history or {}).items() if digest != current["digest"]]
    entries.append((current["digest"], current["parts"]))
    return dict(entries[-keep:])
