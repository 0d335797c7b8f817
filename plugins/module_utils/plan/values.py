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


def _shown(value):
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def api_key(name, value):
    """A bearer token clients, the watchdog and the front door can all send: empty (no key) or a b64token."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        return "%s must be a string (a bearer token), got a %s." % (name, type(value).__name__)
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
    if not system_ok and value in _SYSTEM_DIRS:
        return "%s is %s, a system directory: give the role a directory of its own." % (name, value)
    return None


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
