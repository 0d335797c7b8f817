"""Where a failure was raised (module_utils/log/places), against every start-path text of every vLLM release's source
and of the libraries under it."""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.log import places
from ansible_collections.llmops.vllm.plugins.module_utils.log.signatures import FAILURE_REASONS
from ansible_collections.llmops.vllm.tests.helpers.log_replay import replay

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "fixtures" / "corpus" / "vocabulary"))
import vllm_texts  # noqa: E402

ENTRIES = vllm_texts.load()
LIBRARY_ENTRIES = vllm_texts.load(vllm_texts.LIBRARY_TABLE)
SITE = "/opt/vllm/lib/python3.12/site-packages/"


@pytest.mark.parametrize("where, cls, text, reason", [
    # 0.33's budget check in the worker: a ValueError about memory, whatever its words
    ("vllm/v1/worker/utils.py:request_memory", "ValueError",
     "Free memory on device cuda:0 (3.1/79.1 GiB) on startup is less than the engine's budget", "out_of_memory"),
    ("vllm/v1/worker/cpu_worker.py:determine_available_memory", "ValueError",
     "The worker already uses 30 GiB (model weights and runtime), more than the 24 GiB of CPU memory", "out_of_memory"),
    # the same function refusing a setting: no memory in its words
    ("vllm/v1/worker/tpu_worker.py:determine_available_memory", "ValueError", "Unsupported KV cache spec 'x'", None),
    # elsewhere, the same class proves nothing of its own
    ("vllm/config/model.py:__post_init__", "ValueError", "not enough memory for the model", None),
    ("vllm/distributed/utils.py:barrier", "RuntimeError", "Barrier timed out after 300 seconds", "distributed_error"),
    ("vllm/distributed/device_communicators/cuda_wrapper.py:CUDART_CHECK", "RuntimeError", "CUDART error: x",
     "distributed_error"),
    # vLLM checking its own settings in the same module: not the processes failing to meet
    ("vllm/distributed/parallel_state.py:init_distributed_environment", "RuntimeError",
     "Elastic EP is not yet supported with multi-node TP/PP", None),
    ("vllm/distributed/utils.py:barrier", "ValueError", "Barrier timed out", None),
    ("vllm/distributed/device_communicators/shm_broadcast.py:check_shm_free_space", "RuntimeError",
     "Insufficient space in /dev/shm: 512 MiB required, 60 MiB free", "out_of_memory"),
    # a path outside the packages read (a plugin's), or a torch module the rules do not name
    ("/usr/lib/python3/dist-packages/vllm_plugin/distributed/utils.py:barrier", "RuntimeError", "x", None),
    ("torch/distributed/utils.py:barrier", "RuntimeError", "x", None),
    # transformers looking for a model's files; its permission error is the cache directory's, not the model's
    ("transformers/utils/hub.py:cached_files", "OSError",
     "We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the cached files.",
     "model_not_found"),
    ("transformers/utils/hub.py:cached_files", "OSError", "PermissionError at /root/.cache when downloading x", None),
    ("transformers/configuration_utils.py:__init__", "ValueError", "The embed_dim (3) is not a multiple", None),
    # torch's stores and rendezvous timing out; its handler registry's misuse is not the ranks failing to meet
    ("torch/distributed/distributed_c10d.py:_store_based_barrier", "DistStoreError",
     "Timed out initializing process group in store based barrier on rank 1", "distributed_error"),
    ("torch/distributed/rendezvous.py:_tcp_rendezvous_handler", "RuntimeError",
     "Unable to perform re-rendezvous using tcp:// method", "distributed_error"),
    ("torch/distributed/rendezvous.py:register_rendezvous_handler", "RuntimeError",
     "Rendezvous handler for tcp:// already registered", None),
])
def test_the_place_a_release_raises_it_proves_a_reason(where, cls, text, reason):
    assert places.raised_reason(SITE + where, cls, text) == reason


def test_the_table_covers_every_release_from_0_6():
    seen = {release for entry in ENTRIES for release in entry["releases"]}
    assert {"0.6.0", "0.6.3", "0.10.2", "0.15.0", "0.15.1", "0.20.1", "0.20.2", "0.32.0", "0.33.0", "0.34.0"} <= seen
    assert len(seen) == 67
    assert len(ENTRIES) > 7000
    assert all(entry["where"] and entry["releases"] for entry in ENTRIES)


def test_the_texts_raised_there_are_the_enumerations():
    """TEXTS are written from the enumeration (vllm_texts.py --where): a rule changed without them fails here."""
    assert list(places.TEXTS) == vllm_texts.where_rows(ENTRIES + LIBRARY_ENTRIES)
    assert collections.Counter(row[0] for row in places.TEXTS)["out_of_memory"] >= 20


@pytest.mark.parametrize("frame", [True, False], ids=["with-its-frame", "last-line-only"])
def test_every_text_raised_in_a_where_place_gives_its_reason(frame):
    wrong = []
    for reason, cls, text, where, _first, _last in places.TEXTS:
        entry = {"cls": cls, "text": text, "where": [where]}
        got = replay(vllm_texts.log_of(entry, frame), True)
        if got[0] != reason:
            wrong.append((where, text[:80], got[0]))
    assert not wrong, wrong


def test_the_libraries_are_those_the_serving_venv_has_and_the_kernel_builders():
    assert sorted({entry["releases"][0] for entry in LIBRARY_ENTRIES}) == [
        "flashinfer_python 0.7.4", "huggingface_hub 2.4.0", "torch 2.13.0+cpu", "transformers 5.19.0", "triton 3.5.1"]
    assert len(LIBRARY_ENTRIES) > 400


def test_every_start_path_text_of_every_release_is_a_failure():
    """Each start-up failure of vLLM and of the libraries under it, as an engine's last traceback, is read as a failure
    with a reason."""
    wrong = collections.Counter()
    for entry in ENTRIES + LIBRARY_ENTRIES:
        reason = replay(vllm_texts.log_of(entry), True)[0]
        if reason not in FAILURE_REASONS:
            wrong[reason] += 1
    assert not wrong, wrong


def test_no_other_text_of_any_release_begins_as_one_raised_there():
    """The prefix TEXTS are matched by is theirs alone, so a line cut short is still known."""
    import re
    patterns = dict((row[2], re.compile(places._regex(row[2]))) for row in places.TEXTS)
    where = {row[2] for row in places.TEXTS}
    clashes = [(entry["text"][:60], text[:60]) for entry in ENTRIES + LIBRARY_ENTRIES if entry["text"] not in where
               for text, pattern in patterns.items()
               if pattern.match(entry["text"].replace("{}", "X1").split("\n")[0])]
    assert not clashes, clashes
