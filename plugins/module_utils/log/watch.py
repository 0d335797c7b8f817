# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watch over one start-up log: milestones, failure evidence, shutdowns, in bounded memory.

``LogWatch`` reads blocks of lines (as ``log_follower`` delivers them) and keeps what matters: the
milestones seen, the evidence each rule left (``vllm_log_signatures``), the first *certain* failure,
whether a shutdown was requested, and a bounded tail. ``LogWatch.finding()`` picks the root cause:
the highest layer, earliest first, so the wrappers vLLM prints after the real error ("Engine core
initialization failed. See root cause above") never win over it.

The work per block is a few C-speed passes (milestone needles, the quiet-prefix filter, a search for
records hidden inside quiet lines); only the rest is parsed line by line, through
``vllm_log_grammar`` when a collector rewrote the lines.
"""

from __future__ import annotations

import re
from collections import deque

from ansible_collections.llmops.vllm.plugins.module_utils.log.grammar import (
    CHAIN,
    Collector,
    FRAME,
    FRAME_AT,
    QUIET,
    QUIET_LEVELS,
    QUOTE,
    QUOTED,
    LogLine,
    exception_text,
    is_continuation,
    nested,
    parse_line,
    records,
)
from ansible_collections.llmops.vllm.plugins.module_utils.log import layers, places
from ansible_collections.llmops.vllm.plugins.module_utils.log.signatures import (
    BARE_FAILURE,
    DEFAULT_HINTS,
    FAMILY_HINTS,
    GENERIC,
    LAYER,
    LAYER_PLACED,
    MILESTONES,
    NEW_PROCESS,
    NOISE,
    QUIET_SIGNATURES,
    RAISED_AT,
    SHUTDOWN_MARK,
    SIGNATURES,
    Signature,
    VALIDATION,
    VALIDATION_HINTS,
    VALIDATION_MSG,
    VALUE_ERROR,
    family_of,
    user_signature,
)

_MAX_QUIET = 256
_MAX_JOINED = 2             # continuation lines rejoined onto one record
_FAILING_LEVELS = ("ERROR", "CRITICAL")
# Levels whose record inside a quiet line ("INFO ... loading(APIServer pid=1) ERROR ...") must still be read.
_HIDDEN = "ERROR "


class Evidence(object):
    """A rule's first match: the line, where it was (for ordering) and when it was seen."""

    __slots__ = ("signature", "match", "line", "order", "seen_at", "config_class", "field", "text", "kind", "reason",
                 "chain", "root_line")

    def __init__(self, signature, match, line, order, seen_at, chain=None):
        self.signature, self.match, self.line, self.order, self.seen_at = signature, match, line, order, seen_at
        self.config_class = self.field = self.text = self.kind = None
        self.reason = signature.reason
        self.chain = chain          # the chained traceback the line ends, if any
        self.root_line = None       # set by LogWatch.finding(): the innermost line of the same cause

    @property
    def priority(self):
        return self.signature.priority

    @property
    def detail(self):
        if self.signature is VALIDATION:
            where = self.config_class + ("." + self.field if self.field else "")
            return "%s: %s" % (where, self.text) if self.text else where
        text = self.signature.render(self.signature.detail, self.match)
        return "%s: %s" % (self.config_class, text) if self.config_class else text

    @property
    def hint(self):
        if self.reason != self.signature.reason:
            return FAMILY_HINTS[self.reason]     # a pydantic message whose words name another family
        if self.signature is VALIDATION:
            template = VALIDATION_HINTS.get(self.kind, "fix the {cls} settings as the detail says")
            return template.format(field=self.field or "", cls=self.config_class, text=self.text or "")
        return self.signature.render(self.signature.hint, self.match)


class Sighting(object):
    """When a milestone was first seen: the engine's clock, the line's own timestamp, and if read as backlog."""

    __slots__ = ("seen_at", "ts", "backlog")

    def __init__(self, seen_at, ts=None, backlog=False):
        self.seen_at, self.ts, self.backlog = seen_at, ts, backlog


class LogWatch(object):
    """Everything a wait needs to know from the log read so far, in bounded memory."""

    def __init__(self, fail_patterns=(), ready_patterns=(), tail_lines=40, seen=()):
        self.user_signatures = [user_signature(i, spec) for i, spec in enumerate(fail_patterns or ())]
        self.ready_regexes = []
        for i, pattern in enumerate(ready_patterns or ()):
            try:
                self.ready_regexes.append(re.compile(pattern, re.M))
            except re.error as e:
                raise ValueError("ready_patterns[%d] is not a valid regex: %s" % (i, e))
        self.tail = deque(maxlen=max(0, tail_lines))
        self.milestones = dict((name, Sighting(None)) for name in seen)
        self.evidence = {}
        self.fatal = None
        self.shutdown = False
        self._shutdown_pid = None
        self.ready_pattern_seen = "ready_pattern" in self.milestones
        self._block = 0
        self._quiet = QUIET
        # The pids the log's records name ("(EngineCore_DP0 pid=4200)"): whose death the kernel's records may explain.
        self.pids = set()
        self._validation = None
        self._validation_lines = 0
        self._quoted = None         # the log is quoted ("> " in front of its lines), once its first line shows it
        self._collected = None      # the Collector that prefixed the lines, once the first one shows it
        self._open = None           # the last failing record, which a hard-wrapped line may continue
        self._joined = 0
        self._open_evidence = []
        self._chains = {}           # (proc, pid) -> [chain number, a chain marker was the last word, link number]
        self._frames = {}           # (proc, pid) -> (file, function) of the traceback's innermost frame so far
        self._chain_count = 0

    @property
    def log_ready(self):
        """The log (since the offset) says the HTTP server is up."""
        return "app_startup_complete" in self.milestones or self.ready_pattern_seen

    def last_milestone(self):
        seen = [name for name in _MILESTONE_ORDER if name in self.milestones]
        return seen[-1] if seen else None

    def feed(self, block, now=None, backlog=False):
        """Take a block of complete lines (joined by newlines)."""
        self._block += 1
        if self.tail.maxlen:
            self.tail.extend(block.rsplit("\n", self.tail.maxlen)[-self.tail.maxlen:])
        if self._quoted is None:
            self._quoted = QUOTED.match(block) is not None
        if self._quoted:
            block = QUOTE.sub("", block)
        if self._collected is None:
            self._collected = Collector.for_line((block[:block.find("\n")] if "\n" in block else block).lstrip("\x00"))
        if self._collected is not None:
            block = self._collected.strip(block)
        self._spot_milestones(block, now, backlog)
        self._scan_outside_shutdowns(block, now)
        if not self.ready_pattern_seen:
            for regex in self.ready_regexes:
                if regex.search(block):
                    self.ready_pattern_seen = True
                    self.milestones.setdefault("ready_pattern", Sighting(now, None, backlog))
                    break

    def _scan_outside_shutdowns(self, block, now):
        """Scan for failures, except in what a process prints after its shutdown was requested.

        After ``shutdown triggered`` the errors of the stopping server (EngineDeadError...) are noise, until
        another process speaks: a restart writes the old server's shutdown and the new server's start
        into the same log, and the new server's failure must still count.
        """
        while block:
            if self.shutdown:
                block = self._after_shutdown(block)
                if not block:
                    return
            mark = block.find(SHUTDOWN_MARK)
            if mark < 0:
                self._scan(block, now)
                return
            self._scan(block[:block.rfind("\n", 0, mark) + 1], now)
            self.shutdown = True
            self._shutdown_pid = parse_line(_line_at(block, mark)).pid
            end = block.find("\n", mark)
            block = block[end + 1:] if end >= 0 else ""

    def _after_shutdown(self, block):
        """The part of ``block`` from the first line of another process on (clearing the shutdown), or ''."""
        for m in NEW_PROCESS.finditer(block):
            pid = m.group("pid")
            if pid is not None and (self._shutdown_pid is None or int(pid) == self._shutdown_pid):
                continue
            self.shutdown = False
            return block[m.start():]
        return ""

    def finding(self):
        """The root-cause evidence: highest priority, then earliest; None when the log shows no failure.

        Its ``root_line`` is the line to quote: in a chained traceback ("The above exception was the direct
        cause of the following exception"), the innermost exception of the same reason, whose words the
        outer ones only rephrase.
        """
        best = None
        for ev in self.evidence.values():
            if best is None or (ev.priority, _neg(ev.order)) > (best.priority, _neg(best.order)):
                best = ev
        if best is not None:
            root = best
            if best.chain is not None and best.reason is not None:
                for ev in self.evidence.values():
                    if (ev.chain is not None and ev.chain[0] == best.chain[0] and ev.chain[1] < root.chain[1]
                            and ev.reason == best.reason):
                        root = ev
            best.root_line = root.line
        return best

    def engine_death_seen(self):
        return any(ev.reason == "engine_died" for ev in self.evidence.values())

    def explain(self, default_reason):
        """(reason, detail, hint, evidence) of a failed start; ``default_reason`` when the log explains nothing.

        An exception no rule places is the root cause but names no reason: the start ended as
        ``default_reason`` (``engine_died`` when the engine reported its death), with the exception's hint,
        never the hint of a death without a Python error.
        """
        ev = self.finding()
        if ev is None:
            return default_reason, "", DEFAULT_HINTS.get(default_reason, ""), None
        if ev.reason is not None:
            return ev.reason, ev.detail, ev.hint, ev
        reason = "engine_died" if default_reason == "engine_died" or self.engine_death_seen() else default_reason
        return reason, ev.detail, ev.hint, ev

    def _spot_milestones(self, block, now, backlog):
        for name, needles in MILESTONES:
            if name in self.milestones:
                continue
            for needle in needles:
                pos = block.find(needle)
                if pos >= 0:
                    line = parse_line(_line_at(block, pos))
                    self.milestones[name] = Sighting(now, line.ts, backlog)
                    break

    def _scan(self, text, now):
        quiet = self._quiet
        lines = text.split("\n")
        picked = [(i, l) for i, l in enumerate(lines) if l and not l.startswith(quiet)]
        hidden = _hidden_records(text, quiet)
        if hidden:
            picked = sorted(set(picked) | set((i, lines[i]) for i in hidden))
        for index, raw in picked:
            for record in records(raw) if len(raw) > 40 else (raw,):
                self._examine(record, index, now)
        for sig in QUIET_SIGNATURES:
            pos = text.find(sig.needle) if sig.name not in self.evidence else -1
            while pos >= 0:
                line = parse_line(_line_at(text, pos))
                m = sig.regex.search(line.msg) or sig.regex.search(line.raw)
                if m:
                    self._record(sig, m, line, text.count("\n", 0, pos), now)
                    break
                end = text.find("\n", pos)      # the needle's line did not say it: its next line may
                pos = text.find(sig.needle, end + 1) if end >= 0 else -1
        for sig in self.user_signatures:
            if sig.name not in self.evidence:
                m = sig.regex.search(text)
                if m:
                    self._record(sig, m, parse_line(_line_at(text, m.start())), text.count("\n", 0, m.start()), now)

    def _examine(self, raw, pos, now):
        line = parse_line(raw)
        if line.pid and len(self.pids) < 256:
            self.pids.add(int(line.pid))
        if line.level in QUIET_LEVELS:
            if line.proc is not None and len(self._quiet) < _MAX_QUIET:
                prefix = raw[:raw.index(line.level)]
                self._quiet += tuple(prefix + q for q in QUIET)
            self._open = None
            return
        context = None
        if self._validation is not None:
            consumed, context = self._continue_validation(line, pos, now)
            if consumed:
                return
        self._follow_traceback(line)
        if self._open is not None and self._joined < _MAX_JOINED and is_continuation(self._open, line):
            self._continue_record(line, pos, now, context)
            return
        before = len(self.evidence)
        self._classify(line, line.msg, pos, now, context)
        if context is not None or len(self.evidence) > before or line.level in _FAILING_LEVELS:
            self._open, self._joined = line, 0
            self._open_evidence = [ev for ev in self.evidence.values() if ev.line is line]
        elif line.level is not None or not line.msg.strip() or FRAME.match(line.msg):
            self._open = None

    def _follow_traceback(self, line):
        """Number the chained tracebacks of each process: a traceback printed right after a chain marker is
        the next link of the chain before it (its exception wraps the one before)."""
        msg, key = line.msg, (line.proc, line.pid)
        frame = FRAME_AT.match(msg)
        if frame is not None and (key in self._frames or len(self._frames) < 256):
            self._frames[key] = (frame.group("path"), frame.group("function"))
        if "Traceback (most recent call last)" in msg:
            self._frames.pop(key, None)
            state = self._chains.get(key)
            if state is None or not state[1]:
                self._chain_count += 1
                state = [self._chain_count, False, 0]
            state[1], state[2] = False, state[2] + 1
            self._chains[key] = state
        elif CHAIN.search(msg) and key in self._chains:
            self._chains[key][1] = True

    def _continue_record(self, line, pos, now, context):
        """A sentence hard-wrapped over two lines: read it whole, and let its evidence quote it whole."""
        prev = self._open
        joiner = "" if prev.msg.endswith((" ", "-")) else " "
        joined = LogLine(prev.raw + joiner + line.msg, prev.proc, prev.pid, prev.level, prev.ts, prev.src,
                         prev.msg + joiner + line.msg, prev.ip)
        for ev in self._open_evidence:
            ev.line = joined
        self._joined += 1
        before = set(self.evidence)
        self._classify(joined, joined.msg, pos, now, context)
        self._open = joined
        self._open_evidence += [ev for name, ev in self.evidence.items() if name not in before]

    def _classify(self, line, msg, pos, now, context):
        """Record what the record proves, layer by layer; the evidence, or None when it proves nothing."""
        if not msg.strip() or FRAME.match(msg) or NOISE.search(msg):
            return None
        text = exception_text(msg)
        if text is None:
            return None         # a line of source code quoted by a traceback
        # A list of what might have caused a death (Ray's "Some common causes include: (1) ... the OOM killer") is
        # no evidence of any of them.
        cut = _POSSIBLE_CAUSES.search(text)
        if cut is not None:
            text = text[:cut.start()]
        # An error quoting another is read innermost first: the wrapper's words never win over what it wraps.
        inner = nested(text)
        if inner is not None:
            before = set(self.evidence)
            ev = self._classify_text(line, inner, pos, now, context)
            if ev is not None and ev.reason is not None and ev.signature.name not in before:
                self._classify_text(line, text, pos, now, context)      # the wrapper's own evidence, below it
                return ev
        return self._classify_text(line, text, pos, now, context)

    def _classify_text(self, line, text, pos, now, context):
        for sig in SIGNATURES:
            if sig.needles is None:
                if sig.needle not in text:
                    continue
            elif not any(needle in text for needle in sig.needles):
                continue
            m = sig.regex.search(text)
            if m:
                ev = self._record(sig, m, line, pos, now)
                if ev is not None:
                    ev.config_class = context
                return ev or self.evidence[sig.name]
        m = VALIDATION.regex.search(text)
        if m:
            ev = self._record(VALIDATION, m, line, pos, now)
            if ev is not None:
                ev.config_class = m.group("cls")
                self._validation, self._validation_lines = ev, 0
            return ev or self.evidence[VALIDATION.name]
        if context is not None:
            return None         # the message of a ValidationError already recorded: it told its reason there
        m = VALUE_ERROR.regex.match(text)
        if m:
            ev = self._record(VALUE_ERROR, m, line, pos, now)
            if ev is not None:
                ev.reason = _family_reason(None, m.group("text")) or ev.reason
            return ev
        if line.level == "WARNING":
            return None         # a warning proves a failure only through an exact signature
        m = GENERIC.regex.match(text)
        if m is None and line.level not in _FAILING_LEVELS and not BARE_FAILURE.match(text):
            return None
        exc = (m.group("inner") or m.group("exc") or m.group("qexc")) if m else None
        words = (m.group("text") or "") if m else text
        family, sig = family_of(exc, words)
        ev = None
        # Where vLLM raised it (the traceback's innermost frame) may prove more than its class and words.
        where = None
        if m:
            # A supervisor may prefix the exception line but not the frames above it (or the other way round).
            where = self._frames.pop((line.proc, line.pid), None) or self._frames.pop((None, None), None)
        reason = places.raised_reason(where, exc, words) if where else None
        if reason is not None:
            ev = self._record(RAISED_AT[reason], RAISED_AT[reason].regex.match(text), line, pos, now)
        if family is not None:
            ev = self._record(sig, sig.regex.match(text), line, pos, now) or ev
        if m and reason is None and (family is None or sig is family.by_class):
            # Nothing narrower knew the line: its class, the package that raised it and that layer still tell. A
            # package outside vLLM that raised it says more than a class guessed from vLLM's own habits (an
            # AssertionError in torch's compiler is no settings check).
            reading = layers.read(exc, words, where, text)
            if reading is not None and (family is None or reading.placed):
                ev = self._record(_layer_signature(reading), m, line, pos, now) or ev
        if m:
            generic = self._record(GENERIC, m, line, pos, now)
            ev = ev or generic
        return ev

    def _continue_validation(self, line, pos, now):
        """Fill the pending ValidationError's field and message.

        Returns (consumed, config_class): the field line is consumed; the message line is not (a specific
        signature may know it) but carries the class, and becomes the evidence's line: it, not the
        "N validation error for XConfig" header, says what is wrong.
        """
        ev = self._validation
        self._validation_lines += 1
        if self._validation_lines > 4 or (line.proc != ev.line.proc and line.proc is not None):
            self._validation = None
            return False, None
        msg = line.msg.rstrip()
        if not msg.strip():
            return True, None
        if msg[0] not in " \t":
            if ev.field is None and re.match(r"^[\w.\[\]-]+$", msg):
                ev.field = msg
                return True, None
            self._validation = None
            return False, None
        m = VALIDATION_MSG.match(msg)
        ev.text, ev.kind = m.group("text"), m.group("type")
        if msg.lstrip().startswith("Value error,"):
            ev.kind = ev.kind or "value_error"
        ev.line, ev.order = line, (self._block, pos)
        ev.reason = _family_reason(None, ev.text) or ev.reason
        self._validation = None
        return False, ev.config_class

    def _record(self, sig, match, line, pos, now):
        if self.shutdown or sig.name in self.evidence:
            return None
        state = self._chains.get((line.proc, line.pid))
        ev = Evidence(sig, match, line, (self._block, pos), now, (state[0], state[2]) if state else None)
        self.evidence[sig.name] = ev
        # vLLM carries on after a warning: what one says explains an exit, but never ends a wait by itself.
        if sig.certain and self.fatal is None and line.level != "WARNING":
            self.fatal = ev
        return ev


_MILESTONE_ORDER = tuple(milestone[0] for milestone in MILESTONES) + ("http_ready",)


def _family_reason(exc, text):
    """The reason a family gives the text, when it is not a plain configuration error."""
    family, _sig = family_of(exc, text or "")
    return family.reason if family is not None and family.reason != "config_error" else None


_POSSIBLE_CAUSES = re.compile(r"(?:Some common causes include|There are some potential root causes|"
                              r"[Pp]ossible causes(?: include)?|This can happen when)\b")

_LAYER_SIGNATURES = {}


def _layer_signature(reading):
    """The signature a second reading leaves: one per layer, reason and way of knowing, made once."""
    key = (reading.layer, reading.reason, reading.how, reading.placed)
    sig = _LAYER_SIGNATURES.get(key)
    if sig is None:
        hint = reading.hint or FAMILY_HINTS.get(reading.reason) or DEFAULT_HINTS.get(reading.reason, "")
        name = "layer_%s_%s_%s" % (reading.layer, reading.how or "unknown", reading.placed)
        sig = Signature(name, reading.reason, "", r".+", _LayerDetail(reading), hint,
                        LAYER_PLACED if reading.placed else LAYER, certain=False)
        _LAYER_SIGNATURES[key] = sig
    return sig


class _LayerDetail(object):
    """A second reading's detail: the line with the layer and how it was known, or that it was not recognised."""

    def __init__(self, reading):
        self.reading = reading

    def __call__(self, match):
        line, r = match.group(0).strip(), self.reading
        return "%s (%s, %s)" % (line, r.layer, r.how) if r.known else "not recognised, raised in %s: %s" % (r.layer, line)


def _hidden_records(text, quiet):
    """Indexes of quiet lines that carry a failing record after their start (joined records)."""
    found, size = set(), len(_HIDDEN)
    pos = text.find(_HIDDEN)
    while pos >= 0:
        start = text.rfind("\n", 0, pos) + 1
        if pos > start and text.startswith(quiet, start) and text[pos + size:pos + size + 2].isdigit():
            found.add(text.count("\n", 0, start))
        pos = text.find(_HIDDEN, pos + 1)
    return found


def _neg(order):
    return (-order[0], -order[1])


def _line_at(block, pos):
    start = block.rfind("\n", 0, pos) + 1
    end = block.find("\n", pos)
    return block[start:] if end < 0 else block[start:end]


def classify_lines(lines, fail_patterns=(), ready_patterns=()):
    """Replay a whole log (an iterable of lines) through a fresh LogWatch."""
    watch = LogWatch(fail_patterns, ready_patterns)
    watch.feed("\n".join(line.rstrip("\n") for line in lines))
    return watch
