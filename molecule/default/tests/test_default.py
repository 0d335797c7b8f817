"""What a person checks after a DFlash deploy, on the real host and from the controller."""

from __future__ import annotations

import json
import os
import re
import urllib.request
from pathlib import Path

SERVICE = "vllm"
MODEL = "tiny-qwen3"
ENDPOINT = f"http://127.0.0.1:{os.environ.get('LLMOPS_MOLECULE_PORT', '18100')}"
FRONT_DOOR = f"http://127.0.0.1:{os.environ.get('LLMOPS_MOLECULE_FRONT_PORT', '18180')}"
DRAFTER_RENDERED = "/opt/vllm/drafter/config.json"
DRAFTER_ORIGINAL = "/srv/models/tiny-qwen3-agree-dflash/config.json"


def http(path: str, body: dict | None = None, base: str = ENDPOINT) -> dict | str:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        text = resp.read().decode()
    return json.loads(text) if resp.headers.get_content_type() == "application/json" else text


def test_service_is_active_enabled_and_runs_as_the_service_user(host):
    svc = host.service(SERVICE)
    journal = host.run(f"journalctl -u {SERVICE} --no-pager -n 30").stdout
    assert svc.is_running and svc.is_enabled, journal
    assert svc.systemd_properties["User"] == "vllm"
    pid = svc.systemd_properties["MainPID"]
    assert host.run(f"ps -o user= -p {pid}").stdout.strip() == "vllm"


def test_unit_is_hardened_and_starts_dflash(host):
    props = host.service(SERVICE).systemd_properties
    assert props["ProtectSystem"] == "strict"
    assert props["NoNewPrivileges"] == "yes"
    assert props["PrivateTmp"] == "yes"
    unit = host.file(f"/etc/systemd/system/{SERVICE}.service").content_string
    assert unit.startswith("#")  # ansible_managed header
    spec = re.search(r"^\s*--speculative-config '([^']+)'", unit, re.M)
    assert spec, unit
    assert json.loads(spec.group(1)) == {
        "method": "dflash",
        "model": "/opt/vllm/drafter",
        "num_speculative_tokens": 4,
    }


def test_secrets_file_is_private(host):
    env = host.file(f"/etc/vllm/{SERVICE}.env")
    assert env.exists and env.user == "root" and env.mode == 0o600


def test_the_live_unit_env_file_and_drafter_config_are_the_staged_ones(host):
    staged = host.file("/etc/vllm/staged")
    assert staged.is_directory and staged.user == "root" and staged.mode == 0o700
    for name, live in ((f"{SERVICE}.service", f"/etc/systemd/system/{SERVICE}.service"), (f"{SERVICE}.env", f"/etc/vllm/{SERVICE}.env")):
        assert host.file(f"/etc/vllm/staged/{name}").sha256sum == host.file(live).sha256sum, name
    assert host.file(f"/etc/vllm/staged/{SERVICE}.env").mode == 0o600
    rendered = host.file(DRAFTER_RENDERED)
    assert host.file("/opt/vllm/.drafter.config.json.staged").sha256sum == rendered.sha256sum


def test_drafter_config_is_rendered_with_computed_layer_ids(host):
    rendered = json.loads(host.file(DRAFTER_RENDERED).content_string)
    original = json.loads(host.file(DRAFTER_ORIGINAL).content_string)
    assert rendered["dflash_config"]["target_layer_ids"] == [0, 1]
    assert "target_layer_ids" not in original.get("dflash_config", {})
    assert rendered["dflash_config"]["mask_token_id"] == original["dflash_config"]["mask_token_id"]


def test_the_state_file_names_what_a_rollback_brings_back(host):
    state = host.file(f"/etc/vllm/{SERVICE}.state.json")
    assert state.user == "root" and state.mode == 0o644
    served = json.loads(state.content_string)
    assert served["health_url"] == "http://127.0.0.1:8000/health"
    assert served["expected_model"] == MODEL
    assert "--speculative-config" in served["argv"]


def test_the_running_server_carries_the_digest_of_the_inputs_on_the_host(host):
    recorded = host.file("/var/lib/llmops-vllm/vllm/inputs.env")
    assert recorded.user == "root" and recorded.mode == 0o600
    pid = host.check_output("systemctl show -p MainPID --value vllm")
    # Root may not read another user's environ in a container (no CAP_SYS_PTRACE): the service user reads its own.
    environ = host.check_output(f"setpriv --reuid=vllm --regid=vllm --clear-groups cat /proc/{pid}/environ | tr '\\0' '\\n'")
    running = [line for line in environ.splitlines() if line.startswith("LLMOPS_VLLM_INPUTS=")]
    assert running == [recorded.content_string.strip()]
    assert len(running[0].split("=", 1)[1]) == 64


def test_the_last_good_start_is_kept_for_a_rollback_out_of_the_service_users_reach(host):
    kept = host.file("/var/lib/llmops-vllm/vllm/last-good")
    assert kept.user == "root" and kept.mode == 0o700
    served = json.loads(host.file("/var/lib/llmops-vllm/vllm/last-good/served.json").content_string)
    assert {entry["name"] for entry in served["files"]} == {"unit", "env", "inputs.env", "drafter-config.json"}
    for entry in served["files"]:
        copy = host.file("/var/lib/llmops-vllm/vllm/last-good/" + entry["name"])
        live = host.file(entry["dest"])
        assert copy.user == "root" and copy.mode == live.mode and copy.sha256sum == live.sha256sum, entry
    assert served["expected_model"] == MODEL


def test_port_is_listening_on_the_host(host):
    assert host.socket("tcp://0.0.0.0:8000").is_listening


def test_the_service_listens_on_loopback_only_but_for_its_api_port(host):
    # Every TCP listener of the service user (ss -e shows the owner's uid even where root may not read another
    # user's /proc/PID/fd, as in containers): gloo's, the engine's and the API server's.
    uid = host.user("vllm").uid
    listeners = []
    for line in host.run("ss -Htlne").stdout.splitlines():
        if re.search(r"\buid:%d\b" % uid, line):
            listeners.append(line.split()[3])
    assert "0.0.0.0:8000" in listeners, listeners
    beyond = [a for a in listeners if a != "0.0.0.0:8000" and not a.startswith(("127.", "[::1]:", "[::ffff:127."))]
    assert beyond == [], "internal listeners beyond loopback: %s" % listeners


def test_models_endpoint_lists_the_model_from_the_controller():
    models = http("/v1/models")
    assert [m["id"] for m in models["data"]] == [MODEL]


def test_completion_answers_and_every_dflash_draft_is_accepted(host):
    # The collection's own Prometheus parser, from this checkout: the verifier has no collection on sys.path.
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "plugins", "module_utils", "probe", "http_client.py")
    spec = importlib.util.spec_from_file_location("llmops_vllm_http_probe", path)
    http_probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(http_probe)

    def counters():
        samples = http("/metrics")
        return [http_probe.metric_total(samples, "vllm:spec_decode_num_%s_total" % name)
                for name in ("drafts", "draft_tokens", "accepted_tokens")]

    before = counters()
    # The agreeing target answers its end-of-text token (a special token: no text); ignore_eos decodes 24 of them.
    out = http("/v1/completions", {"model": MODEL, "prompt": "The health endpoint", "max_tokens": 24,
                                   "temperature": 0, "ignore_eos": True})
    assert out["usage"]["completion_tokens"] == 24
    drafts, drafted, accepted = [b - a for a, b in zip(before, counters())]
    assert drafts > 0, "DFlash is not drafting"
    assert accepted == drafted == 4 * drafts, (drafts, drafted, accepted)


def test_the_front_door_holds_the_host_ready_and_serves_through_it(host):
    # HAProxy's runtime API, as the rollout reads it: srv_admin_state 0 is neither drained nor in maintenance.
    state = host.run("echo 'show servers state vllm' | python3 -c \"import socket,sys; s=socket.socket(socket.AF_UNIX); "
                     "s.connect('/run/haproxy/admin.sock'); s.sendall(sys.stdin.read().encode()); "
                     "print(s.makefile().read())\"")
    # A version line, a "# be_id be_name srv_id srv_name ..." header, then one row per server.
    rows = [line.split() for line in state.stdout.splitlines() if line.strip() and not line.startswith("#")][1:]
    assert [(row[3], row[6]) for row in rows] == [("vllm-molecule-1", "0")], state.stdout + state.stderr
    # Sampled, the agreeing target may answer its end-of-text token first (no text): 4 tokens past it, counted.
    out = http("/v1/completions", {"model": MODEL, "prompt": "Through the front door", "max_tokens": 4,
                                   "ignore_eos": True}, base=FRONT_DOOR)
    assert out["usage"]["completion_tokens"] == 4, out


def test_the_fleet_report_names_the_host_and_its_outcome():
    path = os.environ["MOLECULE_EPHEMERAL_DIRECTORY"] + "-record/report-deploy.json"
    with open(path) as fh:
        report = json.load(fh)
    assert [(row["host"], row["status"], row["version"]) for row in report] == [("vllm-molecule-1", "ready", "0.32.0")]


RECORD = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "") + "-record"


def recorded_deploys():
    with open(RECORD + "/phases.jsonl") as fh:
        return [json.loads(line) for line in fh if line.strip() and json.loads(line)["phase"] == "deploy"]


def test_the_first_deploy_measured_its_new_server():
    bench = recorded_deploys()[0]["report"][0]["bench"]
    assert bench["status"] == "passed" and bench["decode_tokens_per_second"] > 0
    # DFlash with 4 speculative tokens and the pair that agrees on every token: every draft accepted, 4 + 1 a step.
    assert bench["acceptance_length"] == 5.0 and bench["per_position_acceptance"] == [1.0] * 4
    assert bench["elapsed"] > 0


def test_the_speed_report_of_the_first_deploy_is_on_the_controller():
    runs = sorted(os.listdir(RECORD + "/speed"))
    assert len(runs) == 1, runs
    directory = RECORD + "/speed/" + runs[0]
    assert sorted(os.listdir(directory)) == ["report.md", "report.png", "vllm-molecule-1.json"]
    with open(directory + "/vllm-molecule-1.json") as fh:
        record = json.load(fh)
    assert record["bench"] == recorded_deploys()[0]["report"][0]["bench"]
    with open(directory + "/report.md") as fh:
        table = [line for line in fh if line.startswith("| vllm-molecule-1 |")]
    assert len(table) == 1 and "%.2f" % record["bench"]["acceptance_length"] in table[0]
    with open(directory + "/report.png", "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"


def test_prometheus_finds_the_server_in_the_targets_file(tmp_path):
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "helpers"))   # outside the suite's farm
    from prometheus import discovered

    assert discovered(Path(RECORD) / "targets.json", tmp_path) == [{
        "instance": "vllm-molecule-1:8000", "job": "vllm", "host": "vllm-molecule-1", "model": MODEL,
        "vllm_version": "0.32.0", "speculative_method": "dflash", "drafter": "tiny-qwen3-agree-dflash"}]


def test_the_deploy_wrote_alert_rules_prometheus_reads_holding_the_host_to_its_gate(tmp_path):
    import subprocess
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "helpers"))   # outside the suite's farm
    from prometheus import executable

    rules = Path(RECORD) / "rules.yml"
    checked = subprocess.run([executable(), "check", "rules", str(rules)], capture_output=True, text=True, timeout=60,
                             check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    text = rules.read_text()
    # The gate's default floor for a DFlash drafter (the demo sets none), and the 5.0 its first start measured.
    assert 'label_replace(vector(1.1), "host", "vllm-molecule-1", "", "")' in text, text
    assert 'label_replace(vector(5), "host", "vllm-molecule-1", "", "")' in text, text
