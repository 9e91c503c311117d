"""Hypothesis profiles for the whole suite.

- ``dev`` (the default): hypothesis' defaults, randomized.
- ``ci`` (selected when the ``CI`` environment variable is set): derandomized, so a failure reproduces
  on every run and on every machine; the failing example's blob is printed (``@reproduce_failure``);
  fewer examples, no deadline (shared runners are slow).
- ``fuzz``: at least 10,000 examples per property, for ``benchmarks/fuzz.py`` (not the suite).

``HYPOTHESIS_PROFILE=<name>`` selects one explicitly. A test with its own ``@settings(max_examples=…)``
keeps that count under every profile.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

REAL_DEEPSEEK = Path(__file__).resolve().parents[1] / "fixtures" / "real-logs" / "deepseek"

settings.register_profile("dev", deadline=None)
settings.register_profile(
    "ci",
    derandomize=True,
    print_blob=True,
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "fuzz",
    max_examples=10_000,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)

settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))

# ``jobs=2`` on the small fixtures runs the workers, as on large logs (not the one-process fallback below
# promptkit.analysis.api.JOBS_MIN_BYTES, which tests/analysis/test_parallel.py checks on its own)
os.environ["PROMPTKIT_JOBS_MIN_BYTES"] = "0"


@pytest.fixture(scope="session")
def real_deepseek() -> Callable[..., Any]:
    """``analyze`` of ``fixtures/real-logs/deepseek`` with the given options, run once per set of options
    for the whole session (several pages' figures are checked against the same analysis; an
    :class:`~promptkit.analysis.AnalysisResult` is immutable, so sharing it is safe)."""
    from promptkit.analysis import analyze

    done: dict[tuple[tuple[str, Any], ...], Any] = {}

    def get(**options: Any) -> Any:
        key = tuple(sorted(options.items()))
        if key not in done:
            done[key] = analyze(REAL_DEEPSEEK, **options)
        return done[key]

    return get


#: The tokenizers of the providers the suite's logs are analyzed under. A local process pool forks its
#: workers from one fork server per process (:func:`~promptkit.analysis.executors.start_fork_server`);
#: started with these, every pool worker of the session has them loaded instead of loading its own
#: (DeepSeek's takes about 0.9 s of CPU, in each of some forty workers).
POOL_TOKENIZERS = ("deepseek", "o200k_base", "cl100k_base")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the pools' fork server with :data:`POOL_TOKENIZERS` when the run has slow tests (those that
    make the process pools; ``pytest -m "not slow"`` starts none here). Its imports run beside the
    first tests. Tests of the server itself start their own, in a fresh interpreter."""
    if any(item.get_closest_marker("slow") for item in session.items):
        from promptkit.analysis.executors import start_fork_server

        start_fork_server(POOL_TOKENIZERS)



#: ``(function name, records, options, answer)`` of every :func:`~promptkit.whatif.advice.lint_advice` and
#: :func:`~promptkit.whatif.suggestions.suggest` made through :func:`shared_replays` in this session.
_REPLAYED: list[tuple[str, Any, dict[str, Any], Any]] = []


@pytest.fixture
def shared_replays(monkeypatch: pytest.MonkeyPatch) -> None:
    """``promptkit lint``'s advice and ``whatif --suggest``'s suggestions (their replays are most of
    their time) made once per session for the same records and options, so tests that print one log's
    lint as text and as JSON, through the command line and through the library, ``analyze --advice``
    and ``whatif --suggest`` on the same log, replay it once. Records that differ in anything (an
    ``attrs`` comparison) or other options get their own. A
    :class:`~promptkit.whatif.advice.LintAdvice` and a :class:`~promptkit.whatif.suggestions.Suggestion`
    are immutable; each caller gets its own list of suggestions."""
    from promptkit.layout import LoadResult
    from promptkit.whatif import advice, suggestions

    def once(name: str, made: Callable[..., Any], copy: Callable[[Any], Any]) -> Callable[..., Any]:
        def call(records: Any, **options: Any) -> Any:
            key = records if isinstance(records, LoadResult) else tuple(records)
            for seen_name, seen, seen_options, done in _REPLAYED:
                if seen_name == name and seen_options == options and seen == key:
                    return copy(done)
            done = made(key, **options)
            _REPLAYED.append((name, key, options, done))
            return copy(done)

        return call

    shared_suggest = once("suggest", suggestions.suggest, list)
    monkeypatch.setattr(suggestions, "suggest", shared_suggest)
    monkeypatch.setattr(advice, "suggest", shared_suggest)
    monkeypatch.setattr(advice, "lint_advice", once("lint_advice", advice.lint_advice, lambda a: a))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """In a pytest-xdist worker (``-n 2 --dist loadscope`` in ``pyproject.toml``: each test module goes
    whole to one worker, so a module's shared fixtures, such as the trimming and what-if figures of
    ``tests/test_figures.py``, are made once): the modules with the most slow tests first, so that no
    long module is handed out last while the other worker has nothing left; the order is otherwise the
    collection's. A run in one process (``-n 0``) keeps the collection's order."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    slow = {name: sum(1 for i in tests if i.get_closest_marker("slow")) for name, tests in modules.items()}
    items[:] = [item for name in sorted(modules, key=lambda m: -slow[m]) for item in modules[name]]
