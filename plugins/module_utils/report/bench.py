# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The speed report of one deploy, on the controller: a JSON file per measured host, a Markdown table, a chart.

The rows are the fleet report's (module_utils/report/fleet), whose ``bench`` holds what vllm_bench measured on the
server the deploy started. Hosts the deploy did not restart were not measured; they are listed, without figures.
"""

from __future__ import annotations

import re


def _number(value, digits=2):
    return "-" if value is None else "%.*f" % (digits, value)


def file_name(host):
    """A file name for an inventory host name that stays in its directory: anything but letters, digits, . _ and -
    becomes _, and it never starts with a dot (no .., no hidden file)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", str(host))
    return "_" + name if not name or name.startswith(".") else name


def measured(rows):
    return [row for row in rows if row.get("bench")]


def baseline_of(rows):
    """The baseline the measured hosts were gated against (the first one set), or None."""
    return next((row["bench"]["baseline_tokens_per_second"] for row in measured(rows)
                 if row["bench"].get("baseline_tokens_per_second")), None)


def host_record(row, run_id):
    """What one host's JSON file holds."""
    return {"run": run_id, "host": row["host"], "status": row["status"], "reason": row.get("reason", ""),
            "version": row.get("version", ""), "endpoint": row.get("endpoint", ""), "bench": row["bench"]}


def markdown(rows, run_id, baseline=None):
    """The report's Markdown: one line per host of the fleet, the measured ones with their figures."""
    concurrencies = sorted({int(c) for row in measured(rows) for c in row["bench"].get("output_tokens_per_second", {})} - {1})
    head = ["host", "status", "decode tok/s (1 stream)"]
    head += ["speed-up over %s tok/s" % _number(baseline, 1)] if baseline else []
    head += ["aggregate tok/s at %d" % c for c in concurrencies]
    head += ["acceptance length", "per-position acceptance", "notes"]
    lines = ["# Speed report %s" % run_id, ""]
    lines += ["Measured with `vllm bench serve` of each host's own venv; acceptance from the server's counters.", ""]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        bench = row.get("bench") or {}
        status = row["status"] + (" (%s)" % row["reason"] if row.get("reason") and row["reason"] != row["status"] else "")
        if not bench:
            cells = [row["host"], status, "not measured (not restarted by this deploy)" if row["status"] == "ready" else "-"]
            cells += [""] * (len(head) - len(cells))
        else:
            per_position = bench.get("per_position_acceptance") or []
            cells = [row["host"], status, _number(bench.get("decode_tokens_per_second"))]
            cells += [_speedup(bench)] if baseline else []
            cells += [_number(bench.get("output_tokens_per_second", {}).get(str(c))) for c in concurrencies]
            cells += [_number(bench.get("acceptance_length")),
                      " / ".join("%.0f%%" % (100 * rate) for rate in per_position) if per_position else "-",
                      "; ".join(bench.get("notes") or [])]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    for row in measured(rows):
        lines += by_category(row["host"], row["bench"])
    return "\n".join(lines) + "\n"


def _speedup(bench):
    """``1.36x`` or, with the gate's interval, ``1.36x [1.31, 1.41]`` (module_utils/report/intervals)."""
    if bench.get("speedup") is None:
        return "-"
    interval = bench.get("speedup_interval") or {}
    if interval.get("low") is None:
        return _number(bench["speedup"]) + "x"
    return "%sx [%s, %s]" % (_number(bench["speedup"]), _number(interval["low"]), _number(interval["high"]))


def _spread(figure):
    figure = figure or {}
    if figure.get("median") is None:
        return "-"
    if (figure.get("n") or 0) > 1:
        return "%s (%s-%s)" % (_number(figure["median"]), _number(figure["min"]), _number(figure["max"]))
    return _number(figure["median"])


def by_category(host, bench):
    """Markdown lines for one host measured on a prompt set: a row per category, figures at each concurrency
    (median over the repeats, with their range when there were several); none for the fixed workload."""
    categories = bench.get("categories") or {}
    if not categories:
        return []
    concurrencies = sorted({int(c) for cells in categories.values() for c in cells})
    head = ["category", "decode tok/s (1 stream)"] + ["aggregate tok/s at %d" % c for c in concurrencies]
    head += ["median TTFT ms", "median ITL ms", "acceptance length", "per-position acceptance"]
    lines = ["", "## %s by category (%s)" % (host, bench.get("workload") or "prompt set"), "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, cells in list(categories.items()) + [("overall", None)]:
        if cells is None:
            overall = bench.get("overall") or {}
            single = overall.get("1") or {}
            row = [name, _number(single.get("decode_tokens_per_second"))]
            row += [_number((overall.get(str(c)) or {}).get("output_tokens_per_second")) for c in concurrencies]
            row += ["", "", _number(single.get("acceptance_length"))]
            positions = single.get("per_position_acceptance") or []
        else:
            single = cells.get("1") or {}
            row = [name, _spread(single.get("decode_tokens_per_second"))]
            row += [_spread((cells.get(str(c)) or {}).get("output_tokens_per_second")) for c in concurrencies]
            row += [_number(single.get("median_ttft_ms"), 1), _number(single.get("median_itl_ms"), 1),
                    _number(single.get("acceptance_length"))]
            positions = single.get("per_position_acceptance") or []
        row.append(" / ".join("%.0f%%" % (100 * rate) for rate in positions) if positions else "-")
        lines.append("| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |")
    return lines


def chart(rows, run_id, path, baseline=None):
    """A PNG: per-host single-stream tok/s against the baseline, and per-position acceptance per host.

    Returns None when drawn, else why not (matplotlib is a controller requirement of the chart alone).
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError as e:
        return "no chart: matplotlib is not installed for the controller's Python (%s)" % e
    hosts = measured(rows)
    figure, (speed, acceptance) = pyplot.subplots(1, 2, figsize=(11, 4.2))
    names = [row["host"] for row in hosts]
    speeds = [row["bench"].get("decode_tokens_per_second") or 0 for row in hosts]
    colours = ["tab:green" if row["status"] == "ready" else "tab:red" for row in hosts]
    speed.bar(names, speeds, color=colours)
    if baseline:
        speed.axhline(baseline, color="black", linestyle="--", label="baseline %.1f tok/s" % baseline)
        speed.legend(loc="lower right")
    speed.set_ylabel("single-stream decode tok/s")
    speed.set_title("Speed per host")
    speed.tick_params(axis="x", labelrotation=20)
    positions = max([len(row["bench"].get("per_position_acceptance") or []) for row in hosts] + [1])
    acceptance.set_xticks(range(1, positions + 1))
    drawn = False
    for row in hosts:
        rates = row["bench"].get("per_position_acceptance") or []
        if rates:
            acceptance.plot(range(1, len(rates) + 1), [100 * rate for rate in rates], marker="o", label=row["host"])
            drawn = True
    acceptance.set_xlabel("draft position")
    acceptance.set_ylabel("accepted (%)")
    acceptance.set_ylim(0, 105)
    acceptance.set_title("Per-position acceptance" if drawn else "No speculative decoding counters")
    if drawn:
        acceptance.legend(loc="upper right")
    figure.suptitle("vLLM deploy %s" % run_id)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
    return None
