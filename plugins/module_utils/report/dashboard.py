# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's Grafana dashboard: the figures the alert rules record (``report/alerts``), by host, beside the
thresholds each host is held to, in the JSON Grafana imports (a Prometheus data source chosen on import).

Every panel reads series the rules record or vLLM, the watchdog and HAProxy export, so what the dashboard shows is
what the alerts decide on. ``expressions`` lists every query, for the test that runs them against a real Prometheus.
"""

from __future__ import annotations

from ansible_collections.llmops.vllm.plugins.module_utils.report import alerts

UID = "llmops-vllm-fleet"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _target(expr, legend, ref):
    return {"datasource": DATASOURCE, "expr": expr, "legendFormat": legend, "refId": ref}


def _panel(number, title, kind, targets, x, y, w=12, h=8, unit="", description=""):
    panel = {"id": number, "type": kind, "title": title, "description": description, "datasource": DATASOURCE,
             "gridPos": {"x": x, "y": y, "w": w, "h": h},
             "targets": [_target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(targets)],
             "fieldConfig": {"defaults": {"unit": unit}, "overrides": []}, "options": {}}
    if kind == "table":
        panel["options"] = {"showHeader": True}
        panel["transformations"] = [{"id": "labelsToFields", "options": {}}]
        for target in panel["targets"]:
            target.update(instant=True, format="table")
    return panel


def dashboard(settings=None):
    """The dashboard, as a dict to be written as JSON."""
    s = dict(alerts.DEFAULTS, **(settings or {}))
    job = 'job="%s", host=~"$host"' % s["job"]
    on_host = '{host=~"$host"}'
    watchdog = '{%sservice=~".+"}' % ('job="%s", ' % s["watchdog_job"] if s["watchdog_job"] else "")
    frontend = 'proxy="%s"%s' % (s["frontend_backend"], ', job="%s"' % s["frontend_job"] if s["frontend_job"] else "")
    panels = [
        _panel(1, "The fleet at a glance", "table",
               [("max by (host, instance, model, vllm_version, speculative_method, drafter) (up{%s})" % job, "")],
               0, 0, w=24, h=6,
               description="Each server the deploy's targets name: up (1) or not, and the labels the deploy gave it."),
        _panel(2, "Acceptance length", "timeseries",
               [("%s%s" % (alerts.ACCEPTANCE, on_host), "{{host}}"),
                ("%s%s" % (alerts.MIN_ACCEPTANCE, on_host), "{{host}} floor"),
                ("%s%s" % (alerts.MEASURED_ACCEPTANCE, on_host), "{{host}} measured by {{%s}}" % alerts.MEASURED_BY)],
               0, 6, description="1 + accepted tokens / drafts over %s: K + 1 when every draft is accepted, 1 when "
                                 "none is (a drafter that no longer matches its target)." % s["window"]),
        _panel(3, "Acceptance by position", "timeseries",
               [("%s%s" % (alerts.POSITION_ACCEPTANCE, on_host), "{{host}} position {{position}}")],
               12, 6, unit="percentunit",
               description="The share of drafts whose token at each position was accepted: where the drafter stops "
                           "being right."),
        _panel(4, "Decode tok/s per request", "timeseries",
               [("%s%s" % (alerts.DECODE, on_host), "{{host}}"),
                ("%s%s" % (alerts.MIN_DECODE, on_host), "{{host}} gate floor")],
               0, 14, description="Tokens after the first over the time from the first to the last, on the engine's "
                                  "clock: the speed gate's figure, beside the floor the gate held the host to."),
        _panel(5, "Concurrency", "timeseries",
               [("sum by (host) (vllm:num_requests_running{%s})" % job, "{{host}} running"),
                ("sum by (host) (vllm:num_requests_waiting{%s})" % job, "{{host}} waiting"),
                ("%s%s" % (alerts.STOPS_PAYING, on_host), "{{host}} speculation stops paying")],
               12, 14, description="Requests running and waiting, beside the concurrency at which the compare run of "
                                   "the host's key found its configuration no faster than without speculation: above "
                                   "it, the drafter costs more than it gives."),
        _panel(6, "Time to first token and queue time, 90th percentile", "timeseries",
               [("%s%s" % (alerts.TTFT_P90, on_host), "{{host}} first token"),
                ("%s%s" % (alerts.QUEUE_P90, on_host), "{{host}} queue")],
               0, 22, unit="s"),
        _panel(7, "KV cache in use", "timeseries",
               [("max by (host) (vllm:kv_cache_usage_perc{%s})" % job, "{{host}}")], 12, 22, unit="percentunit"),
        _panel(8, "Restarts and backoff", "timeseries",
               [("sum by (instance, cause) (increase(vllm_restarts_total%s[%s]))" % (watchdog, s["restarts_window"]),
                 "{{instance}} {{cause}}"),
                ("vllm_crash_loop%s" % watchdog, "{{instance}} crash loop"),
                ("vllm_up%s" % watchdog, "{{instance}} answers")],
               0, 30, description="From the watchdog's textfile (node_exporter): restarts by cause, a unit its start "
                                  "limit stopped, and whether its last 1-token completion was answered."),
        _panel(9, "Front door", "timeseries",
               [('sum by (server, state) (haproxy_server_status{%s})' % frontend, "{{server}} {{state}}")],
               12, 30, description="HAProxy's own exporter: each server of the front door's backend by state."),
    ]
    return {
        "uid": UID, "title": "llmops.vllm fleet", "tags": ["vllm", "dflash", "llmops"], "timezone": "browser",
        "schemaVersion": 39, "version": 1, "editable": True, "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
            {"name": "host", "type": "query", "datasource": DATASOURCE, "label": "host", "multi": True,
             "includeAll": True, "allValue": ".*", "refresh": 2,
             "query": {"query": "label_values(up{job=\"%s\"}, host)" % s["job"], "refId": "hosts"},
             "definition": "label_values(up{job=\"%s\"}, host)" % s["job"]},
        ]},
        "panels": panels,
    }


def expressions(document, host=".*"):
    """Every query of the dashboard, ``$host`` given (by panel title)."""
    return [(panel["title"], target["expr"].replace("$host", host))
            for panel in document["panels"] for target in panel["targets"]]
