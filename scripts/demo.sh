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

# The same platform options as molecule/default/molecule.yml: systemd as PID 1,
# cgroups from the host, and a /dev/shm large enough for vLLM's engine queues.
if ! docker container inspect "$HOST" >/dev/null 2>&1; then
  log "container $HOST (endpoint 127.0.0.1:$PORT)"
  docker run -d --name "$HOST" --hostname "$HOST" \
    --cap-add SYS_ADMIN --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
    --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup:rw --tmpfs /run --tmpfs /run/lock \
    --shm-size 512m --stop-signal SIGRTMIN+3 -p "127.0.0.1:$PORT:8000" \
    "$BASE_IMAGE" /lib/systemd/systemd >/dev/null
fi
docker start "$HOST" >/dev/null
for _ in $(seq 30); do
  state="$(docker exec "$HOST" systemctl is-system-running 2>/dev/null || true)"
  [[ "$state" == running || "$state" == degraded ]] && break
  sleep 1
done

log "ansible-playbook playbooks/deploy.yml -i inventories/demo"
ansible-playbook playbooks/deploy.yml -i inventories/demo

log "the server, asked from this machine"
# http_probe (Prometheus text parser) from the collection just installed and deployed.
python3 - "http://127.0.0.1:$PORT" "$BUILD/collections" <<'PYEOF'
import json, sys, urllib.request

sys.path.insert(0, sys.argv[2])
from ansible_collections.llmops.vllm.plugins.module_utils.probe import http_client as http_probe

base = sys.argv[1]
def get(path, body=None):
    data = json.dumps(body).encode() if body else None
    req = urllib.request.Request(base + path, data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return resp.read().decode()

models = json.loads(get("/v1/models"))["data"]
print(f"endpoint:    {base}/v1  (model {models[0]['id']})")
# The demo's target agrees with its drafter because it always answers its end-of-text token: ignore_eos (vLLM's
# sampling parameter) decodes 32 of them, each drafted and accepted.
out = json.loads(get("/v1/completions", {"model": models[0]["id"], "prompt": "The health endpoint",
                                         "max_tokens": 32, "temperature": 0, "ignore_eos": True}))
print(f"completion:  {out['usage']['completion_tokens']} tokens")
samples = http_probe.parse_metrics(get("/metrics"))
for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
    metric = f"vllm:spec_decode_{name}_total"
    value = f"{http_probe.metric_total(samples, metric):g}" if metric in samples else "absent"
    print(f"spec_decode_{name}_total: {value}")
PYEOF

log "ansible-playbook playbooks/compare.yml -i inventories/demo (DFlash against no speculation, side by side)"
ansible-playbook playbooks/compare.yml -i inventories/demo
