# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The grammar of every value that reaches a file or a command line: one rule per kind of value, each returning the
sentence that names the variable and the rule, or None.

The consumers decide the rules. systemd splits unit lines on white space, expands ``%`` specifiers everywhere and
takes a newline as the start of a new directive (so a newline in a value injects ``ExecStartPre=+...``, run as root);
logrotate reads a newline as a new directive (``postrotate`` runs a script); HAProxy expands ``$VAR`` inside double
quotes and ends a word at white space or ``#``; a bearer token is RFC 6750's ``b64token``. A value a rule refuses is
never rendered, so no consumer has to escape it; quoting stays in place as a second line of defence.
"""

from __future__ import annotations

import ipaddress
import math
import re

# RFC 6750 section 2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
_B64TOKEN = re.compile(r"^[A-Za-z0-9._~+/-]+=*$")
# A path systemd, logrotate and HAProxy all read as one word: absolute, no white space, control characters, quotes,
# specifiers (%), variables ($), globs, backslashes, or the separators some directives give a meaning (: , = ~),
# no . or .. component, no trailing slash.
_PATH = re.compile(r"^(/[A-Za-z0-9._@+-]+)+$")
# systemd unit names (without the suffix), user and group names, HAProxy backend names.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
# Linux interface names: at most 15 bytes (IFNAMSIZ), no / or white space.
_INTERFACE = re.compile(r"^[A-Za-z0-9_.:-]{1,15}$")
# Environment variable names systemd accepts in Environment= and UnsetEnvironment=.
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# logrotate's size: a number with an optional k, M or G.
_SIZE = re.compile(r"^[0-9]+[kMG]?$")
# HAProxy's time format: a number and a unit (a bare number is milliseconds, seldom what was meant).
_HAPROXY_TIME = re.compile(r"^[0-9]+(us|ms|s|m|h|d)$")
# Paths the front door forwards: URL path characters only.
_URL_PATH = re.compile(r"^/[A-Za-z0-9._~/-]*$")
# Directories whose every entry is not the role's to manage (the drafter role deletes what it does not render).
_SYSTEM_DIRS = frozenset(["/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/opt", "/proc", "/root",
                          "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/usr/bin", "/usr/lib", "/usr/local",
                          "/usr/local/bin", "/usr/local/lib", "/usr/sbin", "/var", "/var/lib", "/var/log", "/var/tmp",
                          "/var/cache", "/mnt", "/media"])
# Trees no role may empty a directory in (render_dir): /etc/alternatives and /etc/ssl/certs are all links.
_SYSTEM_TREES = ("/etc", "/usr", "/boot", "/proc", "/sys", "/dev", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
                 "/libx32", "/run", "/var/lib/dpkg", "/var/lib/apt", "/var/lib/systemd", "/var/log", "/root")
# PATH_MAX less room for the file names the roles add below a directory.
MAX_PATH = 3840


# A bearer token's longest length (api_key); 64 hex characters is what the guide's openssl rand -hex 32 makes.
MAX_KEY = 512
# The longest text any option takes (a path's limit, PATH_MAX); a line longer than this is a mistake or an attack.
MAX_TEXT = 4096
# How deep and how large a list or mapping option may be: the deepest of the collection's own is 3.
MAX_DEPTH = 12
MAX_ITEMS = 10000
# Characters no option may hold anywhere, at any depth: C0 and C1 controls (newline, NUL, tab, escape), DEL, and
# the Unicode line and paragraph separators, which some readers take as line ends. A newline starts a new directive
# in a unit, logrotate's config and haproxy.cfg; a NUL ends a C string early.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def text_problem(name, value, depth=0, count=None):
    """What makes ``value`` (a string, number, bool, null, list or mapping, at any depth) unsafe to put in any file
    or command line: a control or line-separator character, a string over MAX_TEXT, nesting over MAX_DEPTH or more
    than MAX_ITEMS items. None when nothing does."""
    count = count if count is not None else [0]
    count[0] += 1
    if count[0] > MAX_ITEMS:
        return "%s has more than %d items." % (name, MAX_ITEMS)
    if depth > MAX_DEPTH:
        return "%s is nested more than %d levels deep." % (name, MAX_DEPTH)
    if isinstance(value, str):
        if len(value) > MAX_TEXT:
            return "%s is %d characters long; at most %d." % (name, len(value), MAX_TEXT)
        if _CONTROL.search(value):
            return ("%s holds a control character, a newline or a line separator (U+2028/U+2029), which would start a "
                    "new line in a unit, an env file or haproxy.cfg: %s." % (name, _shown(value)))
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            found = text_problem(name, key, depth + 1, count) or text_problem(
                "%s.%s" % (name, key) if isinstance(key, str) and len(key) < 64 else name, item, depth + 1, count)
            if found:
                return found
        return None
    if isinstance(value, (list, tuple)):
        for item in value:
            found = text_problem(name, item, depth + 1, count)
            if found:
                return found
        return None
    if value is None or isinstance(value, (bool, int, float)):
        return None
    return "%s must be text, a number, a boolean, a list or a mapping, got a %s." % (name, type(value).__name__)


def _shown(value):
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def api_key(name, value):
    """A bearer token clients, the watchdog and the front door can all send: empty (no key) or a b64token."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        return "%s must be a string (a bearer token), got a %s." % (name, type(value).__name__)
    if len(value) > MAX_KEY:
        # HAProxy builds its health check request in one buffer (tune.bufsize, 16 KiB by default): a longer header
        # cannot be sent, and every server would go DOWN after a deploy that succeeded.
        return "%s is %d characters long: at most %d fit every consumer's header buffer." % (name, len(value), MAX_KEY)
    if not _B64TOKEN.fullmatch(value):
        # The value is a secret: say what is wrong with it, never what it is.
        return ("%s may hold only letters, digits and - . _ ~ + / (then = padding), the characters a bearer token "
                "(RFC 6750 b64token) may have: clients, the watchdog and the front door's health check must all be "
                "able to send it as it is. It has %d characters, %s." % (
                    name, len(value), "some of them white space or control characters"
                    if re.search(r"[\s\x00-\x1f\x7f]", value) else "some of them outside that set"))
    if len(value) < 16:
        return "%s is %d characters long: use at least 16 (for example openssl rand -hex 32)." % (name, len(value))
    return None


def abs_path(name, value, system_ok=True):
    """An absolute path every consumer reads as one word; with ``system_ok`` false, not a system directory."""
    if not isinstance(value, str) or not _PATH.fullmatch(value) or "/./" in value + "/" or "/../" in value + "/":
        return ("%s must be an absolute path of letters, digits and . _ @ + - between slashes (no white space, quotes, "
                "%%, $, *, \\, : , = ~ or . and .. components, no trailing slash), got %s." % (name, _shown(value)))
    if len(value) > MAX_PATH or any(len(part) > 255 for part in value.split("/")):
        return "%s is a path of %d characters: at most %d, each name at most 255 (NAME_MAX)." % (name, len(value), MAX_PATH)
    if not system_ok and value in _SYSTEM_DIRS:
        return "%s is %s, a system directory: give the role a directory of its own." % (name, value)
    return None


def render_dir(name, value):
    """A directory the role empties of what it did not render: its own, never in a tree the system owns."""
    found = abs_path(name, value, False)
    if found is None and any((value + "/").startswith(tree + "/") for tree in _SYSTEM_TREES):
        return ("%s (%s) lies under %s, which the system owns: the role removes every entry it did not render there. "
                "Give it a directory of its own, such as /opt/vllm/drafter." % (
                    name, value, next(tree for tree in _SYSTEM_TREES if (value + "/").startswith(tree + "/"))))
    return found


def unit_name(name, value):
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        return ("%s must be a name of letters, digits and _ . @ - (at most 64, starting with a letter or digit), got %s."
                % (name, _shown(value)))
    return None


def ip_address(name, value):
    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        return "%s must be an IP address, got %s." % (name, _shown(value))
    return None if isinstance(value, str) else "%s must be a string, got %s." % (name, _shown(value))


def interface(name, value):
    if not isinstance(value, str) or not _INTERFACE.fullmatch(value):
        return "%s must be a network interface name (at most 15 of letters, digits and _ . : -), got %s." % (
            name, _shown(value))
    return None


def env_names(name, value):
    """A mapping's keys or a list's items, each an environment variable name."""
    names = list(value) if isinstance(value, (dict, list, tuple)) else None
    if names is None:
        return "%s must be a %s of environment variable names, got %s." % (
            name, "mapping" if name.endswith("_env") and not name.endswith("unset_env") else "list", _shown(value))
    bad = [item for item in names if not isinstance(item, str) or not _ENV_NAME.fullmatch(item)]
    if bad:
        return "%s: %s %s not an environment variable name (a letter or _, then letters, digits and _)." % (
            name, ", ".join(_shown(item) for item in bad), "is" if len(bad) == 1 else "are")
    return None


def env_values(name, value):
    """Environment values: strings or numbers, on one line each."""
    if not isinstance(value, dict):
        return None
    bad = [key for key, item in value.items()
           if isinstance(item, bool) or not isinstance(item, (str, int, float)) or re.search(r"[\n\r\x00]", str(item))]
    if bad:
        return "%s: the value of %s must be a string or a number on one line." % (name, ", ".join(map(str, bad)))
    return None


def logrotate_size(name, value):
    if not isinstance(value, (str, int)) or isinstance(value, bool) or not _SIZE.fullmatch(str(value)):
        return "%s must be a size as logrotate reads it (a number, then k, M or G), got %s." % (name, _shown(value))
    return None


def count(name, value, minimum=0):
    if isinstance(value, bool) or not isinstance(value, int) and not (isinstance(value, str) and value.isdigit()):
        return "%s must be a whole number, got %s." % (name, _shown(value))
    if int(value) < minimum:
        return "%s must be %d or more, got %s." % (name, minimum, value)
    return None


def haproxy_time(name, value):
    if not isinstance(value, str) or not _HAPROXY_TIME.fullmatch(value):
        return ("%s must be a time with its unit, as HAProxy reads it (for example 10s, 500ms or 10m; a bare number "
                "would be milliseconds), got %s." % (name, _shown(value)))
    return None


def url_paths(name, value):
    if not isinstance(value, list) or not value:
        return "%s must be a non-empty list of URL paths, got %s." % (name, _shown(value))
    bad = [item for item in value if not isinstance(item, str) or not _URL_PATH.fullmatch(item)]
    if bad:
        return "%s: %s must each be a URL path (/ then letters, digits and . _ ~ / -)." % (
            name, ", ".join(_shown(item) for item in bad))
    return None


def problems(checks):
    """The sentences of ``checks``, a list of (rule, variable name, value[, extra args]) tuples, in order."""
    out = []
    for check in checks:
        rule, name, value = check[:3]
        found = rule(name, value, *check[3:])
        if found:
            out.append(found)
    return out


# The kinds below serve module_utils/plan/kinds, which gives every option of every entry point one of them.

# A word: versions, package and distribution names, CLI file names, choices, categories, inventory host names.
_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,254}$")
# A model as vLLM takes it: a directory (checked as a path) or a hub id (org/name), or a served model name.
_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+-]*(/[A-Za-z0-9][A-Za-z0-9._:@+-]*)?$")
# RFC 1123 host names: labels of letters, digits and -, each at most 63, at most 253 in all; _ too, which container
# and inventory names often hold and resolvers take.
_HOST_LABEL = re.compile(r"^(?!-)[A-Za-z0-9_-]{1,63}(?<!-)$")
# A path on the controller (read there by Ansible, never written into a host's file): relative is fine.
_CONTROLLER_PATH = re.compile(r"^[A-Za-z0-9._@+/~-]+$")
# http(s) URLs pip and HAProxy take: a host, a port, a path of URL characters; user:password@ allowed.
_URL = re.compile(r"^https?://([A-Za-z0-9._~-]+(:[A-Za-z0-9._~-]+)?@)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?"
                  r"(/[A-Za-z0-9._~/+-]*)?$")
# A command the command module runs without a shell: words of these characters separated by single spaces.
_COMMAND = re.compile(r"^[A-Za-z0-9/._=,-]+( [A-Za-z0-9/._=,-]+)*$")
# systemd's DeviceAllow=: a /dev path or a device group of /proc/devices (char-NAME, block-NAME, a trailing * glob
# allowed), then optionally the access r, w, m. No % (a specifier systemd expands there).
_DEVICE = re.compile(r"^(/dev/[A-Za-z0-9._/-]+|(char|block)-[A-Za-z0-9_.-]+\*?)( [rwm]{1,3})?$")
_TRUE_WORDS = ("true", "false", "yes", "no", "on", "off")


def _bad(name, what, value):
    return "%s must be %s, got %s." % (name, what, _shown(value))


def flag(name, value):
    """A boolean: YAML's, or the words Ansible's bool filter reads (from an INI inventory or -e k=v)."""
    if isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in _TRUE_WORDS):
        return None
    return _bad(name, "true or false", value)


def bounded_count(name, value, minimum=0, maximum=10 ** 9):
    """A whole number in [minimum, maximum]: a YAML int, or digits (-e k=v hands over text); never a boolean."""
    found = count(name, value, minimum)
    if found:
        return found
    if int(value) > maximum:
        return "%s must be %d or less, got %s." % (name, maximum, value)
    return None


def port(name, value):
    return bounded_count(name, value, 1, 65535)


def number(name, value):
    """A number of 0 or more (a gate's threshold): int, float or such text; never a boolean."""
    if isinstance(value, bool):
        return _bad(name, "a number", value)
    try:
        parsed = float(value) if isinstance(value, (int, float, str)) else None
    except ValueError:
        parsed = None
    if parsed is None or math.isnan(parsed) or math.isinf(parsed) or parsed < 0:
        return _bad(name, "a number of 0 or more", value)
    return None


def word(name, value):
    if isinstance(value, str) and _WORD.fullmatch(value):
        return None
    return _bad(name, "one word of letters, digits and . _ + - (starting with a letter or digit)", value)


def user(name, value):
    """The service account: a name, never root (a server running as root would undo every sandbox setting)."""
    found = unit_name(name, value)
    if found is None and value == "root":
        return "%s is root: the server must run as an unprivileged account of its own (the default is vllm)." % name
    return found


def host(name, value):
    """A host name (RFC 1123) or an IP address: what a unit's --host, a URL and haproxy.cfg all read as one host."""
    if isinstance(value, str):
        try:
            ipaddress.ip_address(value)
            return None
        except ValueError:
            pass
        labels = value.split(".")
        if len(value) <= 253 and all(_HOST_LABEL.fullmatch(label) for label in labels):
            return None
    return _bad(name, "a host name (letters, digits, _ and -, between dots) or an IP address", value)


def model(name, value):
    """An absolute model directory, or a hub id (org/name) or served name."""
    if isinstance(value, str) and value.startswith("/"):
        return abs_path(name, value, False)
    if isinstance(value, str) and _MODEL.fullmatch(value) and ".." not in value:
        return None
    return _bad(name, "an absolute directory or a model id (org/name, letters, digits and . _ : @ + -)", value)


def controller_path(name, value):
    """A path Ansible reads on the controller: relative to the playbook is fine."""
    if isinstance(value, str) and len(value) <= MAX_TEXT and _CONTROLLER_PATH.fullmatch(value):
        return None
    return _bad(name, "a path on the controller of letters, digits and . _ @ + / ~ -", value)


def url(name, value):
    if isinstance(value, str) and len(value) <= MAX_TEXT and _URL.fullmatch(value):
        return None
    return _bad(name, "an http:// or https:// URL (a host, a port, a path of letters, digits and . _ ~ / + -)", value)


def wheel(name, value):
    """A wheel pip installs: a URL, an absolute path on the host, or a file name in the wheelhouse."""
    if isinstance(value, str) and value.startswith(("http://", "https://")):
        return url(name, value)
    if isinstance(value, str) and value.startswith("/"):
        return abs_path(name, value, False)
    if isinstance(value, str) and _WORD.fullmatch(value) and value.endswith(".whl"):
        return None
    return _bad(name, "a URL, an absolute path or a file name of a .whl", value)


def command(name, value):
    """A command the command module runs (no shell): words of letters, digits and / . _ = , -, one space apart."""
    if isinstance(value, str) and len(value) <= 1024 and _COMMAND.fullmatch(value):
        return None
    return _bad(name, "a command of words of letters, digits and / . _ = , - separated by single spaces", value)


def each(rule, what):
    """The rule of a list option whose every item is of ``rule``'s kind."""
    def check(name, value, *args):
        if not isinstance(value, list):
            return _bad(name, "a list of %s" % what, value)
        for index, item in enumerate(value):
            found = rule("%s[%d]" % (name, index), item, *args)
            if found:
                return found
        return None
    return check


def device(name, value):
    if isinstance(value, str) and _DEVICE.fullmatch(value) and "/../" not in value + "/":
        return None
    return _bad(name, "a /dev path or a device group (char-NAME, block-NAME), then optionally r, w or m", value)


def mapping(name, value):
    return None if isinstance(value, dict) else _bad(name, "a mapping", value)


def records(name, value):
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return None
    return _bad(name, "a list of mappings", value)


def line(name, value):
    """Free text on one line (text_problem rules out the rest)."""
    return None if isinstance(value, str) else _bad(name, "text", value)


def argument(name, value):
    """One command-line argument: text or a number (the argv itself is checked by module_utils/plan/serve)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return _bad(name, "text or a number", value)
    return None


def env(name, value):
    """The service's environment: a mapping of variable names to one-line values."""
    if not isinstance(value, dict):
        return _bad(name, "a mapping of environment variable names to values", value)
    return env_names(name, value) or env_values(name, value)


def env_name_list(name, value):
    """Variables to remove from the service's environment: a list of names."""
    if not isinstance(value, list):
        return _bad(name, "a list of environment variable names", value)
    return env_names(name, value)
