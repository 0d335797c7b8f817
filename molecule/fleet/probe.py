"""A steady stream of completions through the front door and to each vLLM host, every result kept.

Started by prepare.yml on the controller before the first deploy and stopped (SIGTERM) at the end of
side_effect.yml. Each request is one JSON line: when it was sent, where, whether it succeeded, the HTTP status
or the error, and how long it took. verify (tests/test_fleet.py) matches the lines against the deploy phases.

    probe.py --out record.jsonl --front http://127.0.0.1:18290 --host vllm-fleet-1=http://127.0.0.1:18201 ...
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time
import urllib.error
import urllib.request

BODY = json.dumps({"model": "tiny-qwen3", "prompt": "The probe asks", "max_tokens": 2, "temperature": 0}).encode()


def one(url: str, timeout: float) -> dict:
    sent = time.time()
    record = {"t": round(sent, 3)}
    request = urllib.request.Request(url + "/v1/completions", BODY, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            answer = json.loads(resp.read())
            record.update(ok=bool(answer.get("choices")), status=resp.status)
    except urllib.error.HTTPError as e:
        record.update(ok=False, status=e.code, error=e.read()[:200].decode("utf-8", "replace"))
    except (OSError, ValueError) as e:
        record.update(ok=False, status=None, error=repr(e)[:200])
    record["ms"] = round((time.time() - sent) * 1000, 1)
    return record


def stream(target: str, url: str, every: float, timeout: float, stop: threading.Event, out, lock) -> None:
    while not stop.is_set():
        started = time.monotonic()
        record = dict(one(url, timeout), target=target)
        with lock:
            out.write(json.dumps(record) + "\n")
            out.flush()
        stop.wait(max(0.0, every - (time.monotonic() - started)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--front", required=True, help="the front door's base URL")
    parser.add_argument("--host", action="append", default=[], help="NAME=URL of one vLLM host")
    parser.add_argument("--front-every", type=float, default=1.0, help="seconds between front-door requests")
    parser.add_argument("--host-every", type=float, default=4.0, help="seconds between requests to each host")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--max-seconds", type=float, default=3600.0, help="stop by itself after this long")
    args = parser.parse_args()

    stop, lock = threading.Event(), threading.Lock()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    targets = [("front", args.front, args.front_every)] + [
        (name, url, args.host_every) for name, url in (item.split("=", 1) for item in args.host)]
    with open(args.out, "a", encoding="utf-8") as out:
        threads = [threading.Thread(target=stream, args=(name, url, every, args.timeout, stop, out, lock))
                   for name, url, every in targets]
        for thread in threads:
            thread.start()
        stop.wait(args.max_seconds)
        stop.set()
        for thread in threads:
            thread.join()


if __name__ == "__main__":
    main()
