"""The operations guide's commands (docs/operations.md), as the fleet scenario runs them (side_effect.yml).

Each command the guide marks with ``<!-- fleet phase: NAME -->`` is the first ``$ ansible-playbook ...`` line of the
console block after the mark. Printed as JSON, {NAME: [arguments]}: the words after ``ansible-playbook``, without the
guide's inventory (the scenario gives its own) and with the guide's host names as the scenario's. So the scenario runs
what the guide says, and a guide that drifts from the playbooks fails the scenario.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
MARK = re.compile(r"<!--\s*fleet phase:\s*([\w-]+)\s*-->")
# The guide's example hosts (inventories/example) and the scenario's.
HOSTS = {"gpu-node-1": "vllm-fleet-1", "gpu-node-2": "vllm-fleet-2"}


def commands(text):
    out, lines = {}, text.splitlines()
    for index, line in enumerate(lines):
        mark = MARK.search(line)
        if not mark:
            continue
        command = next((candidate for candidate in lines[index + 1:] if candidate.startswith("$ ansible-playbook ")), None)
        if command is None:
            raise SystemExit("%s: no '$ ansible-playbook' line after the mark of %s" % (GUIDE, mark.group(1)))
        words = shlex.split(command[2:])[1:]
        args, skip = [], False
        for word in words:
            if skip:
                skip = False
                continue
            if word in ("-i", "--inventory"):
                skip = True
                continue
            for guide_host, fleet_host in HOSTS.items():
                word = re.sub(r"\b%s\b" % re.escape(guide_host), fleet_host, word)
            args.append(word)
        out[mark.group(1)] = args
    return out


if __name__ == "__main__":
    json.dump(commands(GUIDE.read_text()), sys.stdout)
