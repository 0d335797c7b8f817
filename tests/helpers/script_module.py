"""A file of the collection that is not a package module (a role's files/ script, a scripts/ tool) loaded as a
module, so its functions are tested as the host or the tool runs them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def load(path: Path, name: str, register: bool = False):
    """The module ``name`` from ``path``; ``register``: also in sys.modules (a module whose dataclasses look
    themselves up there)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
