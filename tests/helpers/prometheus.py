"""What Prometheus finds in a deploy's targets file: the distribution's promtool (LLMOPS_PROMTOOL, unpacked by
scripts/bootstrap.sh) checks the config that names it, then runs its file-based discovery. Used by the integration
test of the targets and by both scenarios' verify (which put this folder on sys.path: they run outside the suite's
collection farm)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path


def executable() -> str:
    """The distribution's promtool, unpacked by scripts/bootstrap.sh."""
    promtool = os.environ.get("LLMOPS_PROMTOOL", "")
    assert os.access(promtool, os.X_OK), "LLMOPS_PROMTOOL is not promtool: run the suite with scripts/test.sh"
    return promtool


def discovered(targets: Path, work: Path) -> list[dict]:
    """The labels of every target Prometheus discovers in ``targets`` (``__``-prefixed ones left out)."""
    config = work / "prometheus.yml"
    config.write_text("scrape_configs:\n  - job_name: vllm\n    file_sd_configs:\n      - files: [%s]\n" % targets)
    promtool = executable()
    checked = subprocess.run([promtool, "check", "config", str(config)], capture_output=True, text=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    found = subprocess.run([promtool, "check", "service-discovery", "--timeout=5s", str(config), "vllm"],
                           capture_output=True, text=True, timeout=60, check=False)
    assert found.returncode == 0, found.stderr
    # promtool lists the discovered targets in no fixed order (seen both ways): by instance.
    return sorted(({k: v for k, v in target["labels"].items() if not k.startswith("__")} for target in json.loads(found.stdout)),
                  key=lambda labels: labels.get("instance", ""))
