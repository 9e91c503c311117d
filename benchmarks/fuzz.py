"""Fuzz every log format's loader and every grammar at 10,000 examples each (a benchmark-style run).

Runs the properties of ``tests/test_fuzz.py`` (the suite runs them with the ``ci``/``dev`` hypothesis
profile) under the ``fuzz`` profile of ``tests/conftest.py`` and prints, per property, how many examples
ran and what they gave: records, problems, one-line ``PromptkitError`` s. A property that fails stops the
run with hypothesis' report (the minimal failing example and its reproduction blob).

    PYTHONPATH=$PWD python benchmarks/fuzz.py                 # 10,000 examples each
    PYTHONPATH=$PWD python benchmarks/fuzz.py --examples 500 --only loader
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import sys
import time
import types
from collections.abc import Callable
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _load(name: str, path: pathlib.Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=None, help="examples per property (default: the fuzz profile's 10,000)")
    parser.add_argument("--only", default="", help="run only the properties whose name contains this")
    args = parser.parse_args()

    from hypothesis import settings

    _load("promptkit_tests_conftest", ROOT / "tests" / "conftest.py")  # registers the profiles
    settings.load_profile("fuzz")
    if args.examples is not None:
        settings.register_profile("fuzz-n", settings.get_profile("fuzz"), max_examples=args.examples)
        settings.load_profile("fuzz-n")
    fuzz = _load("promptkit_tests_fuzz", ROOT / "tests" / "test_fuzz.py")

    runs: list[tuple[str, str, Callable[..., Any], dict[str, Any]]] = []
    for fmt in fuzz.FORMAT_NAMES:
        runs.append((f"loader:{fmt}", f"loader:{fmt}", fuzz.test_format_loader_fuzz, {"fmt": fmt}))
    for grammar in sorted(fuzz.GRAMMARS):
        runs.append((f"grammar:{grammar}", f"grammar:{grammar}", fuzz.test_grammar_fuzz, {"grammar": grammar}))
        runs.append(
            (f"grammar-types:{grammar}", "", fuzz.test_grammar_functions_take_only_strings, {"grammar": grammar})
        )
    runs = [r for r in runs if args.only in r[0]]

    print(f"profile: {settings.default.max_examples} examples per property, {len(runs)} properties")
    print(f"{'property':<34} {'examples':>9} {'records':>9} {'problems':>9} {'errors':>7} {'seconds':>8}")
    stats = fuzz.STATS
    for label, key, test, kwargs in runs:
        start = time.perf_counter()
        test(**kwargs)
        seconds = time.perf_counter() - start
        keys = [key, key.replace("loader:", "sniffed:")] if key.startswith("loader:") else [key]
        for k in keys:
            examples = stats[(k, "examples")] if k else settings.default.max_examples
            print(
                f"{k or label:<34} {examples:>9} {stats[(k, 'records')]:>9} {stats[(k, 'problems')]:>9} "
                f"{stats[(k, 'errors')]:>7} {seconds:>8.1f}",
                flush=True,
            )
    print("no exception other than PromptkitError escaped; every record and line was accounted for")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
