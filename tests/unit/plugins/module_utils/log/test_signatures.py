"""The classifier on the start-up log corpus (tests/fixtures/corpus): its size, its score, its page in the docs.

The corpus is kept apart from the classifier's own fixtures: cases read from vLLM's source across releases and
logs users posted publicly, each replayed as posted and through the manglings of log collectors.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from ansible_collections.llmops.vllm.plugins.module_utils.log.signatures import FAILURE_REASONS
from ansible_collections.llmops.vllm.tests.helpers.log_replay import replay

from ansible_collections.llmops.vllm.tests.fixtures.corpus import corpus

CORPUS = Path(corpus.__file__).resolve().parent

DOC = CORPUS.parents[2] / "docs" / "vllm-wait-corpus.md"


def _replay(lines, exited):
    reason, evidence, _watch = replay(lines, exited)
    return reason, evidence.root_line.raw if evidence is not None else None


@pytest.fixture(scope="module")
def cases():
    return corpus.load()


@pytest.fixture(scope="module")
def results(cases):
    return corpus.run(_replay, cases)


def test_the_corpus_is_large_and_covers_every_reason(cases):
    counts = Counter(case.reason for case in cases)
    assert len(cases) >= 150
    assert set(corpus.REASONS) == set(FAILURE_REASONS) | {"ready"}
    for reason in FAILURE_REASONS:
        assert counts[reason] >= 10, (reason, counts[reason])
    assert counts["ready"] >= 20
    assert all(case.source for case in cases)


def test_reasons_and_root_cause_lines_are_right(results):
    s = corpus.summary(results)
    assert s["reasons_right"] >= 0.97 * s["reasons"], corpus.markdown(results, corpus.load())
    assert s["roots_right"] >= 0.95 * s["roots"]


def test_no_start_that_must_not_fail_is_reported_as_failed(results):
    wrong = [(r.case.id, r.mangling, r.reason) for r in results if r.case.reason == "ready" and r.reason != "ready"]
    assert wrong == []


def test_the_docs_show_this_corpus_score(results, cases):
    assert DOC.read_text(encoding="utf-8") == corpus.markdown(results, cases), \
        "run tests/fixtures/corpus/score.py --write"
