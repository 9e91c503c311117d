"""The frames ``promptkit analyze`` writes are unchanged on every bundled log (tests/golden_frames.py).

The golden CSVs in ``fixtures/golden/`` were written by ``python -m tests.golden_frames`` before the
analysis and the report were split into ``promptkit.analysis`` and ``promptkit.report``; a refactoring
must leave every cell as it was. A change of the figures that is meant is made by rewriting them with
that command, in a commit that says why.
"""

from __future__ import annotations

import io
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from tests.golden_frames import FRAMES, GOLDEN, LOGS, analyze_into, normalized


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(LOGS))
def test_frames_unchanged(name: str, tmp_path: Path) -> None:
    analyze_into(name, tmp_path)
    compared = 0
    for frame in FRAMES:
        golden = GOLDEN / name / frame
        fresh = tmp_path / frame
        assert fresh.exists() == golden.exists(), f"{name}: {frame} written now: {fresh.exists()}"
        if not golden.exists():
            continue
        got = pl.read_csv(io.StringIO(normalized(fresh)), infer_schema_length=None)
        want = pl.read_csv(golden, infer_schema_length=None)
        assert got.columns == want.columns, f"{name}/{frame}: columns changed"
        assert_frame_equal(got, want, check_exact=True, check_dtypes=False)
        compared += 1
    assert compared >= 1, f"{name}: no frame compared"
