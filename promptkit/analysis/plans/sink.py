"""Where a streamed plan's frames go as they are made: :class:`FrameSink` writes each batch of result
rows to a spill folder (the requests as an Arrow IPC file per batch, the composition rows pickled), so
the run holds one batch, not every request's row; the result reads them back when it is assembled
(:meth:`FrameSink.requests`) and makes the composition frame only when something reads it
(:class:`SpilledRows`). The folder is a temporary one (``PROMPTKIT_SPILL_DIR`` names where it is made),
removed when the sink and everything that reads from it are gone, or at exit.

>>> import polars as pl
>>> from promptkit.analysis.composition import CompositionRows
>>> sink = FrameSink()
>>> _ = sink.write(pl.DataFrame({"_pos": [1, 0], "_seq": [0, 1]}), CompositionRows())
>>> _ = sink.write(pl.DataFrame({"_pos": [2], "_seq": [2]}), CompositionRows())
>>> sink.batches, sink.rows, sink.requests()["_pos"].to_list()
(2, 3, [1, 0, 2])
>>> sink.remove(); sink.path.exists()
False
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Mapping

    import polars as pl

    from promptkit.analysis.composition import CompositionRows

__all__ = ["SPILL_ENV", "FrameSink", "SpilledRows"]

#: The environment variable that names the folder spill folders are made in (default: the system's
#: temporary folder, :func:`tempfile.gettempdir`).
SPILL_ENV: Final[str] = "PROMPTKIT_SPILL_DIR"


@attrs.frozen(slots=True, eq=False)
class SpilledRows:
    """One batch's composition rows as the sink wrote them (``path``, a pickled
    :class:`~promptkit.analysis.composition.CompositionRows`), read back by :meth:`frame`; ``sink`` keeps
    the spill folder alive while the rows can still be read."""

    path: Path
    sink: FrameSink

    def frame(self, schema: Mapping[str, Any] | None = None, *, position: bool = False) -> pl.DataFrame:
        """The batch's composition frame (:meth:`~promptkit.analysis.composition.CompositionRows.frame`)."""
        with self.path.open("rb") as handle:
            rows: CompositionRows = pickle.load(handle)  # our own file, written by FrameSink.write
        return rows.frame(schema, position=position)


class FrameSink:
    """A spill folder a streamed plan writes its frames into, batch after batch (:meth:`write`).

    ``directory``: where the folder is made (default: ``$PROMPTKIT_SPILL_DIR``, else the system's
    temporary folder). :attr:`batches` and :attr:`rows` count what was written so far."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        where = directory if directory is not None else os.environ.get(SPILL_ENV) or None
        self.path = Path(tempfile.mkdtemp(prefix="promptkit-frames-", dir=where))
        self.batches = 0
        self.rows = 0
        self._files: list[Path] = []
        self._removed = weakref.finalize(self, shutil.rmtree, str(self.path), ignore_errors=True)

    def write(self, requests: pl.DataFrame, composition: CompositionRows) -> SpilledRows:
        """Write one batch: its ``requests`` rows (an Arrow IPC file) and its ``composition`` rows
        (pickled); the handle that reads the composition rows back."""
        name = f"{self.batches:06d}"
        path = self.path / f"requests-{name}.arrow"
        requests.write_ipc(path, compression="lz4")
        self._files.append(path)
        rows = SpilledRows(self.path / f"composition-{name}.pickle", self)
        with rows.path.open("wb") as handle:
            pickle.dump(composition, handle, protocol=pickle.HIGHEST_PROTOCOL)
        self.batches += 1
        self.rows += requests.height
        return rows

    def requests(self) -> pl.DataFrame:
        """Every requests row written, batch after batch, as one frame (None written: an empty frame)."""
        import polars as pl

        # memory: one scan of the batch files, kept in their chunks (joining them would copy the frame)
        return self.scan().collect() if self._files else pl.DataFrame()

    def scan(self) -> pl.LazyFrame:
        """Every requests row written, as a lazy scan of the batch files (read when collected)."""
        import polars as pl

        return pl.scan_ipc(self._files)

    def remove(self) -> None:
        """Remove the spill folder now (else when the sink is no longer referenced, or at exit)."""
        self._removed()
