# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The liveness probe of a vLLM server: one request, the same for the host's watchdog and the front door's check.

/health answers 200 while the engine is hung (a stopped EngineCore answers it in 2 ms), so the probe is what a
client does: a 1-token greedy completion. It ends at its first token, so it is never drafted for: speculative
decoding's counters hold none of it, and vllm_bench tells it from other traffic (module_utils/probe/speed).

The body is written for HAProxy's ``http-check send ... body '<body>'`` as well as for urllib: compact JSON,
ASCII only, and no single quote (``'`` is written ``\\u0027``, which JSON reads back as the same character), so
it goes between single quotes in haproxy.cfg as it is.
"""

from __future__ import annotations

import json

METHOD = "POST"
PATH = "/v1/completions"


def request(model):
    """{method, path, body} of the probe of a server that serves ``model`` (its served model name)."""
    body = json.dumps({"model": str(model), "prompt": "ping", "max_tokens": 1, "temperature": 0},
                      separators=(",", ":"), ensure_ascii=True).replace("'", "\\u0027")
    return {"method": METHOD, "path": PATH, "body": body}
