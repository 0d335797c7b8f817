"""The classifier on the start-up log corpus (tests/fixtures/corpus): its size, its score, its page in the docs.

The corpus is kept apart from the classifier's own fixtures: cases read from vLLM's source across releases and
logs users posted publicly, each replayed as posted and through the manglings of log collectors.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

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
    assert DOC.read_text(encoding="utf-8") == corpus.document(results, cases, corpus.fresh_results(_replay)), \
        "run tests/fixtures/corpus/score.py --write"


def test_the_readme_shows_the_newest_fresh_batch_first_score():
    readme = (DOC.parents[1] / "README.md").read_text(encoding="utf-8")
    figure = corpus.readme_figure()
    assert figure and " ".join(figure.split()) in " ".join(readme.split()), "README.md should say: " + figure


def test_the_readme_figure_is_a_batch_first_score_never_a_later_one():
    rows = [dict(batch="batch-2026-01-01", label="before", commit="a", reasons_right=9, reasons=10, roots_right=8,
                 roots=9, clean_failed=0, clean=1),
            dict(batch="batch-2026-02-01", label="before", commit="b", reasons_right=7, reasons=10, roots_right=6,
                 roots=9, clean_failed=1, clean=2),
            dict(batch="batch-2026-02-01", label="after", commit="c", reasons_right=10, reasons=10, roots_right=9,
                 roots=9, clean_failed=0, clean=2)]
    figure = corpus.readme_figure(rows)
    assert "batch-2026-02-01" in figure and "7 of 10 (70.0%)" in figure and "1 of 2 good starts" in figure


def test_a_fresh_batch_is_scored_apart_as_posted_with_its_recorded_scores(tmp_path):
    (tmp_path / corpus.FRESH).mkdir()
    batch = [{"id": "f-ok", "source": "s", "release": "0.20.2", "engine": "gpu", "runner": "vllm serve",
              "exited": False, "reason": "ready", "log": "INFO:     Application startup complete.\n"},
             {"id": "f-oom", "source": "s", "release": "0.20.2", "engine": "gpu", "runner": "vllm serve",
              "exited": True, "reason": "out_of_memory", "root_cause": "CUDA out of memory",
              "log": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"}]
    (tmp_path / corpus.FRESH / "batch-2026-01-01.yml").write_text(yaml.safe_dump(batch))
    (tmp_path / corpus.FRESH / "scores.yml").write_text(yaml.safe_dump([
        {"batch": "batch-2026-01-01", "label": "before", "commit": "abc1234", "reasons_right": 1, "reasons": 2,
         "roots_right": 0, "roots": 1, "clean_failed": 0, "clean": 1}]))
    fresh = corpus.fresh_results(_replay, tmp_path)
    assert list(fresh) == ["batch-2026-01-01"] and [r.mangling for r in fresh["batch-2026-01-01"]] == ["as posted"] * 2
    now = corpus.fresh_summary(fresh["batch-2026-01-01"])
    assert now == {"reasons_right": 2, "reasons": 2, "roots_right": 1, "roots": 1, "clean_failed": 0, "clean": 1}
    rows = corpus.fresh_markdown(corpus.fresh_scores(tmp_path), {"batch-2026-01-01": now})[-2:]
    assert rows == ["| batch-2026-01-01 | before | abc1234 | 1 of 2 (50.0%) | 0 of 1 (0.0%) | 0 of 1 |",
                    "| batch-2026-01-01 | now | this checkout | 2 of 2 (100.0%) | 1 of 1 (100.0%) | 0 of 1 |"]
    assert corpus.fresh_markdown([], {})[-1] == "No fresh batch yet."
