# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How vLLM writes a log line, and how log collectors rewrite it.

vLLM's own record is ``[(Proc pid=N[, ip=A]) ]LEVEL MM-DD HH:MM:SS [file.py:N] message`` (V1 engine,
0.11 on; the V0 engine of 0.6-0.10 writes ``file.py:N] message`` without the opening bracket). Its
traceback lines and stderr carry only the process tag, or nothing.

What operators read has often been through something else first, and ``records`` undoes it:

* a collector's prefix in front of every line: RFC 3339 timestamps (``docker logs -t``), the CRI format
  of Kubernetes (``TS stdout F``, with ``P`` for a line split in parts), journald/syslog
  (``Mon DD HH:MM:SS host unit[pid]:``), docker compose (``name  | ``), ``kubectl logs --prefix``,
  docker's json-file records, torchrun's ``[rankN]:``;
* a supervisor's own logging header (``2024-06-01 10:00:00,123 name 12 INFO``) in front of vLLM's
  line: vLLM's level, not the supervisor's, is the one that counts;
* ``[address=..., pid=...]`` wrappers of actor frameworks;
* several records joined on one physical line (a progress bar's carriage return, interleaved
  streams, a paste that lost its newlines).

The process tag stays as data (``LogLine.proc``/``pid``/``ip``). A sentence a collector hard-wrapped over
two lines is rejoined by the watch, which knows the previous record (``is_continuation``).
"""

from __future__ import annotations

import json
import re

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_LEVEL = r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# (APIServer pid=1), (EngineCore_DP0 pid=7), (RayWorkerWrapper pid=5, ip=10.0.0.2), (task, pid=9), (pid=3),
# (ServeReplica:app:VLLMDeployment pid=4)
_TAG = (r"\((?:(?P<proc>[A-Za-z_][\w.:-]*)(?:,? [\w.-]+=[\w.:-]+)*?,? )?pid=(?P<pid>\d+)"
        r"(?:, ip=(?P<ip>[\w.:-]+))?\) ?")
_PREFIX = re.compile(_TAG)
# vLLM stamps MM-DD; builds on top of it (NVIDIA NIM) the full date.
_HEADER = (_LEVEL + r" (?:\d{4}-)?\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? (?:\[[^\]\n]*\]|[\w.-]+:\d+\])")
_VLLM = re.compile(
    r"(?P<level>" + _LEVEL + r") (?:\d{4}-)?(?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)(?:[.,]\d+)? "
    r"(?:\[(?P<src>[^\]]*)\]|(?P<src0>[\w.-]+:\d+)\]) ?(?P<msg>.*)")
_UVICORN = re.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL|TRACE):\s+(?P<msg>.*)")
# torch's own logging (torch 2.13 torch/_logging/_internal.py, TorchLogsFormatter): "[rank0]:" when a process group is
# up, then glog's level letter, "MMDD HH:MM:SS.micros PID path:line]", a compile trace id "[0/0]", the message.
_TORCH = re.compile(r"(?:\[rank\d+\]:)?(?P<level>[VIWEC])(?P<ts>\d{4} \d\d:\d\d:\d\d)\.\d+ +\d+ (?P<src>\S+?:\d+)\]"
                    r"(?: \[[^\]]*\])* ?(?P<msg>.*)")
_TORCH_LEVELS = {"V": "DEBUG", "I": "INFO", "W": "WARNING", "E": "ERROR", "C": "CRITICAL"}
# A vLLM record anywhere in a line: after a supervisor's prefix, or joined to the record before it. A
# process tag alone opens a record too (traceback lines carry no level).
_RECORD_ANYWHERE = re.compile(
    r"\([A-Za-z_][\w.:-]*(?:,? [\w.-]+=[\w.:-]+)*?,? pid=\d+(?:, ip=[\w.:-]+)?\) ?(?:" + _HEADER + ")?|" + _HEADER)

_TS = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d| ?UTC)?"
# Prefixes a collector puts in front of every line; stripped in this order, repeatedly.
_CRI = _TS + r" (?:stdout|stderr) (?P<part>[FP]) "
_STAMP = r"\[?" + _TS + r"\]?(?: ?[|:-])? (?:\[?(?:" + _LEVEL + r"|WARN)\]?(?: ?[|-]| ?:(?!\s\s))? (?!(?:\d{4}-)?\d\d-\d\d \d\d:))?"
_COLLECTORS = (
    r"(?P<cri>" + _CRI + ")",                                             # Kubernetes CRI (containerd, CRI-O)
    r"\[" + _TS + r" [DIWEF] \d+ \d+\] ",                                   # ray's C++ components
    # docker -t, ISO stamps, and a level after them that is not vLLM's ("INFO 06-01 ...") nor uvicorn's ("INFO:   ")
    _STAMP,
    r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [^\s:\[]+(?:\[\d+\])?: ",   # journald / syslog short
    r"[\w.-]+(?:[-_]\d+)? +\| ",                                          # docker compose
    r"\[(?:pod|deployment|job)/[^\]]+\] ",                                # kubectl logs --prefix
    r"\[rank\d+\]: ",                                                     # torchrun / torch elastic
    r"\[[\w.-]+\]: ",                                                     # a supervisor's "[name]: "
    r"\[address=[^\]]*\] ",                                               # actor frameworks (xinference, xoscar)
    r"\((?:raylet|autoscaler[^)]*|gcs_server|dashboard[^)]*)\) ",         # ray's own processes
    # Python's rich logging: "[05/05/25 16:31:14] INFO     message      file.py:108"
    r"(?P<rich>(?:\[\d\d/\d\d/\d\d \d\d:\d\d:\d\d\] +|\s+)(?:" + _LEVEL + r") +(?=\S))",
)
_RICH_LOCATION = re.compile(r"\s{2,}[\w.-]+\.py:\d+\s*$")
_COLLECTOR = re.compile("|".join(_COLLECTORS))
# A supervisor's logging header left after its timestamp: "name 1234 INFO", "- name - ERROR -", "INFO:root:".
_SUPERVISOR_PATTERN = (r"(?:- )?(?:[\w.]+ (?:\d+ )?(?:- )?)?(?:" + _LEVEL + r"|WARN)(?: +-)? +(?=\S)"
                       r"(?!(?:\d{4}-)?\d\d-\d\d \d\d:)|" + _LEVEL + r":[\w.]+:")
_SUPERVISOR = re.compile(_SUPERVISOR_PATTERN)
# Lines a fast path may skip without parsing: vLLM's own INFO/DEBUG records and uvicorn's INFO lines
# ("INFO 0"/"INFO 1": the month of vLLM's timestamp, which a supervisor's "INFO 2024-..." never is).
QUIET = ("INFO 0", "INFO 1", "DEBUG 0", "DEBUG 1", "INFO:  ", "DEBUG:  ")
QUIET_LEVELS = ("INFO", "DEBUG")

# Traceback lines that quote code, not errors; an exception line inside an ExceptionGroup ("  | X: y")
# or indented by a supervisor is still an exception line.
FRAME = re.compile(r"\s*(?:File \"|\^+\s*$|~*\^+[~^]*\s*$|Traceback \(most recent call last\))")
# A traceback's frame, with the file and function it was in (the last one before the exception raised it).
FRAME_AT = re.compile(r"\s*File \"(?P<path>[^\"]+)\", line \d+, in (?P<function>[\w<>.]+)")
_INDENTED_EXCEPTION = re.compile(r"\s*(?:\| ?)*(?=(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit)\b)")
# Source lines whose indentation a paste lost: statements, assignments, calls of lower-case names.
_CODE = re.compile(r"(?:raise|return|await|yield|assert) |[a-z_][a-z0-9_.]*(?:\[[^\]]*\])? [+-]?= |[a-z_][a-z0-9_.]*\(")
# Chained tracebacks print these between an inner and an outer exception.
CHAIN = re.compile(r"(?:The above exception was the direct cause|During handling of the above exception)")
_TRACEBACK = "Traceback (most recent call last):"
_JOINED_TRACEBACK = re.compile(r"(?<=\S) (?=File \"|(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): )")


# A log quoted in a reply: "> " (or ">> ", ">") in front of every line. Known from the log's first line.
QUOTED = re.compile(r"^[ \t]*>")
QUOTE = re.compile(r"^[ \t]*(?:>[ \t]?)+", re.M)


class LogLine(object):
    """One record split into process tag (proc, pid, ip), level, timestamp, source and message."""

    __slots__ = ("raw", "proc", "pid", "ip", "level", "ts", "src", "msg")

    def __init__(self, raw, proc, pid, level, ts, src, msg, ip=None):
        self.raw, self.proc, self.pid, self.level, self.ts, self.src, self.msg = raw, proc, pid, level, ts, src, msg
        self.ip = ip


def parse_line(raw):
    """Parse one record: vLLM's own format, uvicorn's, or a bare line (traceback, stderr)."""
    if "\x1b" in raw:
        raw = _ANSI.sub("", raw)
    raw = raw.rstrip("\r\n")
    rest, proc, pid, ip = raw, None, None, None
    m = _PREFIX.match(raw)
    if m:
        proc, pid, ip, rest = m.group("proc"), int(m.group("pid")), m.group("ip"), raw[m.end():]
    m = _VLLM.match(rest)
    if m:
        return LogLine(raw, proc, pid, m.group("level"), m.group("ts"), m.group("src") or m.group("src0"),
                       m.group("msg"), ip)
    m = _UVICORN.match(rest)
    if m:
        return LogLine(raw, proc, pid, m.group("level"), None, "uvicorn", m.group("msg"), ip)
    m = _TORCH.match(rest)
    if m:
        return LogLine(raw, proc, pid, _TORCH_LEVELS[m.group("level")], m.group("ts"), m.group("src"), m.group("msg"),
                       ip)
    return LogLine(raw, proc, pid, None, None, None, rest, ip)


def has_collector_prefix(line):
    """True when the line starts as a collector writes it (so the whole log is worth normalising)."""
    return line.startswith('{"log":') or _COLLECTOR.match(line) is not None


class Collector(object):
    """Takes the prefix one collector writes off every line of a block, at C speed.

    Chosen from the first line of a log that has one; lines without it stay as they are, and what is left
    (a supervisor's header after a stamp, a second prefix) is taken off line by line where a line is read.
    Kubernetes CRI splits a long line into partial ("P") lines: they are joined again, and a partial line
    at the end of a block waits for the next block. Docker's json-file records are decoded line by line,
    their partial records (no trailing newline) joined the same way.
    """

    def __init__(self, pattern, cri=False):
        self.prefix = re.compile("^(?:%s)" % pattern, re.M) if pattern else None
        self.cri = cri
        self.pending = ""

    @classmethod
    def for_line(cls, line):
        if not has_collector_prefix(line):
            return None
        if line.startswith('{"log":'):
            return cls(None)
        for pattern in _COLLECTORS:
            if re.match(pattern, line):
                if pattern.startswith("(?P<cri>"):
                    return cls(_CRI.replace("(?P<part>[FP])", "[FP]"), cri=True)
                if pattern is _STAMP:       # and the header of a supervisor that logs with its own stamp
                    return cls(_STAMP + "(?:" + _SUPERVISOR_PATTERN + ")?")
                return cls(pattern)
        return None

    def strip(self, block):
        if self.prefix is None:
            return self._decode(block)
        if self.pending:
            block, self.pending = self.pending + "\n" + block, ""
        if self.cri:
            block = self._join_partials(block)
        return self.prefix.sub("", block)

    def _decode(self, block):
        out = []
        for line in block.split("\n"):
            text, partial = strip_collector(line)
            text, self.pending = self.pending + text, ""
            if partial:
                self.pending = text
            else:
                out.append(text)
        return "\n".join(out)

    def _join_partials(self, block):
        last = block.rfind("\n") + 1
        if _CRI_PARTIAL_LINE.match(block, last):
            block, self.pending = block[:max(0, last - 1)], block[last:]
        while " P " in block:
            joined = _CRI_JOIN.sub(r"\g<next>\g<text>", block)
            if joined == block:
                break
            block = joined
        return block


_CRI_PARTIAL_LINE = re.compile(_TS + r" (?:stdout|stderr) P ")
# A partial line and the prefix of the line it goes on in: the text moves behind that prefix.
_CRI_JOIN = re.compile(r"^" + _TS + r" (?:stdout|stderr) P (?P<text>[^\n]*)\n(?P<next>" + _TS +
                       r" (?:stdout|stderr) [FP] )", re.M)


def strip_collector(line):
    """The line without collector and supervisor prefixes, and whether it is a CRI partial line (to be continued)."""
    partial = False
    if line.startswith('{"log":'):     # docker's json-file driver
        try:
            line = json.loads(line).get("log", line)
        except ValueError:
            pass
        else:
            partial = not line.endswith("\n")
            line = line.rstrip("\n")
    for _round in range(4):
        m = _COLLECTOR.match(line)
        if not m or not m.end():
            break
        if m.group("cri"):
            partial = m.group("part") == "P"
        line = line[m.end():]
        if m.group("rich"):
            line = _RICH_LOCATION.sub("", line)
        if not m.group("cri") and m.group(0)[:1] in "[0123456789":
            sup = _SUPERVISOR.match(line)
            if sup and not _VLLM.match(line) and not _UVICORN.match(line):
                line = line[sup.end():]
    return line, partial


def split_records(line):
    """The vLLM records on one physical line (a list; usually the line itself)."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    pieces = line.split("\r") if "\r" in line else [line]
    out = []
    for piece in pieces:
        out.extend(_split_piece(piece))
    return out or [""]


def _split_piece(piece):
    starts = [m.start() for m in _RECORD_ANYWHERE.finditer(piece)]
    if not starts:
        return _split_traceback(piece)
    if starts[0] > 0:
        head = piece[:starts[0]]
        if _looks_like_message(head):
            starts.insert(0, 0)
        elif _PREFIX.match(piece) and _PREFIX.match(piece).end() == starts[0]:
            starts[0] = 0           # the record's own process tag: part of the record
        # else: a supervisor's prefix, dropped
    bounds = starts + [len(piece)]
    out = []
    for a, b in zip(bounds, bounds[1:]):
        out.extend(_split_traceback(piece[a:b].rstrip()))
    return out


def _looks_like_message(text):
    text = text.strip()
    return bool(text) and (FRAME.match(text) is not None or _INDENTED_EXCEPTION.match(text) is not None
                           or text.endswith((".", ")", "'", "]")))


def _split_traceback(record):
    """A traceback pasted onto one line ("Traceback ...: File ... ValueError: x"), split into its lines."""
    at = record.find(_TRACEBACK)
    if at < 0 or len(record) - at < len(_TRACEBACK) + 8:
        return [record]
    end = at + len(_TRACEBACK)
    head, body = record[:end], record[end:].strip()
    return [head] + _JOINED_TRACEBACK.split(body)


_OWN_STARTS = ("(",) + LEVELS


def records(line):
    """Normalise one physical line into vLLM records: collector prefixes off, joined records apart."""
    if not line.startswith(_OWN_STARTS):        # vLLM's own line needs no collector stripped
        line = strip_collector(line)[0]
    return split_records(line)


def exception_text(msg):
    """The line's text without its indentation; None for a line of source code a traceback quotes.

    Tracebacks indent code by four spaces; pydantic indents its messages by two; an exception inside an
    ExceptionGroup stands after "| " bars.
    """
    if msg[:1] not in " \t|":
        return None if _CODE.match(msg) else msg
    if not msg.startswith(("    ", "\t")) and "|" not in msg[:2]:
        return msg.lstrip()
    m = _INDENTED_EXCEPTION.match(msg)
    return msg[m.end():] if m else None


# An exception named inside another's message ("RuntimeError: Worker failed: ValueError: ...", "RayTaskError(X):
# ... X: ...", "[address=..] TypeError: ..."): the last one is the innermost.
_NESTED = re.compile(r"(?:(?<=[\s:('\"\[])|(?<=\\n))(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?:\([A-Z]\w*\))?: (?=\S)")
# What a wrapper puts around the message it quotes ("Worker failed with error '...', please check ...").
_WRAPPED_MESSAGE = re.compile(r"(?:with error|error was|caused by|[Ee]rror:) ['\"](?P<inner>.{12,}?)['\"](?:,|\.|$)")


def nested(text):
    """The innermost error ``text`` quotes after its own class and words, or None."""
    last = None
    for m in _NESTED.finditer(text, 1):
        last = m
    if last is not None:
        return text[last.start():].rstrip("'\" ")
    m = _WRAPPED_MESSAGE.search(text)
    return m.group("inner") if m else None


def is_continuation(prev, line):
    """``line`` goes on with ``prev``'s sentence: a hard wrap, not a new record, frame, exception or report."""
    if line.level is not None or line.proc not in (None, prev.proc):
        return False
    msg = line.msg
    if not msg or msg[0] in " \t|" or FRAME.match(msg) or CHAIN.match(msg) or _INDENTED_EXCEPTION.match(msg):
        return False
    return _STANDALONE.match(msg) is None and _CODE.match(msg) is None


# Bare lines that stand on their own after an error: crash reports, compiler and linker output, prompts.
_STANDALONE = re.compile(
    r"Process |usage:|\[rank|Traceback|Segmentation fault|Bus error|Aborted|Killed|Fatal Python error|\*\*\* |"
    r"\S*\bld(?:\.\w+)?: |collect2: |\S+: (?:fatal )?error: |error: |fatal error: |\S+\.\w+:\d+(?::\d+)*: |\w[\w.-]* serve: |"
    r"\w+:\d+:\d+ \[\d+\]|Do you wish to run|\d+ validation errors? for ")
