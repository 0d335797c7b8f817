#!/usr/bin/env bash
# The main job, all set-up included: a local systemd container stands in for a
# GPU host, playbooks/deploy.yml deploys the real vLLM CPU engine on it with a
# tiny target model and a tiny DFlash drafter that agrees with it, the script
# asks the server for a completion and prints its speculative-decoding
# counters, and it ends with playbooks/compare.yml: DFlash against no
# speculation on the same prompts, side by side, and which one to run.
# Re-running it is a no-op deploy (changed=0) against the same container,
# then the comparison again.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
prepare_controller

HOST="${LLMOPS_DEMO_HOST:-vllm-demo-1}"
PORT="${LLMOPS_DEMO_PORT:-18000}"

# The container from the one definition the test scenarios use too (molecule/shared/containers.yml): made if
# missing, started, and booted.
log "container $HOST (endpoint 127.0.0.1:$PORT)"
ansible-playbook -i localhost, "$ROOT/molecule/shared/containers.yml" \
  -e "{\"containers\": [{\"name\": \"$HOST\", \"published_ports\": [\"127.0.0.1:$PORT:8000\"]}]}"

# The demo's API key, made once and kept outside the checkout (mode 0600), as a vars file: on a command line it would
# show in ps. Every client call below sends it; without it the server answers 401.
SECRETS="${LLMOPS_DEMO_SECRETS:-${XDG_CONFIG_HOME:-$HOME/.config}/llmops-vllm/demo-secrets.yml}"
if [[ ! -s "$SECRETS" ]]; then
  mkdir -p "$(dirname "$SECRETS")"
  (umask 077 && printf 'vllm_server_api_key: %s\n' "$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')" > "$SECRETS")
  log "made the demo's API key in $SECRETS (shown this once; read it again there)"
  sed -n 's/^vllm_server_api_key: /key: /p' "$SECRETS" >&2
  # shellcheck disable=SC2016  # the $(sed ...) is for the user to paste, not to expand here
  printf 'use it as:  curl -H "Authorization: Bearer $(sed -n %q %q)" http://127.0.0.1:%s/v1/models\n' \
    's/^vllm_server_api_key: //p' "$SECRETS" "$PORT" >&2
fi

log "ansible-playbook playbooks/deploy.yml -i inventories/demo -e @$SECRETS"
ansible-playbook playbooks/deploy.yml -i inventories/demo -e "@$SECRETS"

log "the server, asked from this machine"
# http_client (its Prometheus text parser) from the collection just installed and deployed.
python3 - "http://127.0.0.1:$PORT" "$BUILD/collections" "$SECRETS" <<'PYEOF'
import json, sys, urllib.request

sys.path.insert(0, sys.argv[2])
from ansible_collections.llmops.vllm.plugins.module_utils.probe import http_client

base = sys.argv[1]
key = next(line.split(": ", 1)[1].strip() for line in open(sys.argv[3]) if line.startswith("vllm_server_api_key: "))
def get(path, body=None):
    data = json.dumps(body).encode() if body else None
    req = urllib.request.Request(base + path, data, {"Content-Type": "application/json",
                                                     "Authorization": "Bearer " + key})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return resp.read().decode()

models = json.loads(get("/v1/models"))["data"]
print(f"endpoint:    {base}/v1  (model {models[0]['id']}; the key in {sys.argv[3]})")
# The demo's target agrees with its drafter because it always answers its end-of-text token: ignore_eos (vLLM's
# sampling parameter) decodes 32 of them, each drafted and accepted.
out = json.loads(get("/v1/completions", {"model": models[0]["id"], "prompt": "The health endpoint",
                                         "max_tokens": 32, "temperature": 0, "ignore_eos": True}))
print(f"completion:  {out['usage']['completion_tokens']} tokens")
samples = http_client.parse_metrics(get("/metrics"))
for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
    metric = f"vllm:spec_decode_{name}_total"
    value = f"{http_client.metric_total(samples, metric):g}" if metric in samples else "absent"
    print(f"spec_decode_{name}_total: {value}")
PYEOF

log "ansible-playbook playbooks/compare.yml -i inventories/demo -e @$SECRETS (DFlash against no speculation, side by side)"
ansible-playbook playbooks/compare.yml -i inventories/demo -e "@$SECRETS"
