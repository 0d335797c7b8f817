#!/usr/bin/env bash
# ansible-test bootstraps pip into each sanity virtualenv with a get-pip script
# it downloads from its own file host, which a machine limited to package
# registries cannot reach. It looks in its cache first, so put there an
# equivalent bootstrap that runs pip from the pip wheel taken from the index.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
version="$("$SANITY_VENV/bin/python" - <<'PYEOF'
from ansible_test._internal.python_requirements import get_venv_packages
from types import SimpleNamespace
print(get_venv_packages(SimpleNamespace(version="3.11"))["pip"])
PYEOF
)"
cache="$HOME/.ansible/test/cache"
script="$cache/get_pip_${version//./_}.py"
[[ -f "$script" ]] && exit 0
mkdir -p "$cache"
"$PY" -m pip download -q --no-deps -d "$cache" "pip==$version"
cat >"$script" <<PYEOF
# Offline stand-in for get-pip.py $version: run pip from its wheel to install pip.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "pip-$version-py3-none-any.whl"))
from pip._internal.cli.main import main  # noqa: E402

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.exit(main(["install", "--upgrade", "--force-reinstall"] + args))
PYEOF
