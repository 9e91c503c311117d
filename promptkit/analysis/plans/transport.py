"""How the file plan's pieces travel between its workers and its coordinator
(:mod:`promptkit.analysis.plans.files`): frames as Arrow IPC bytes or, for workers of this machine, as
uncompressed Arrow files the coordinator memory-maps (:func:`frame_out`, :func:`frame_in`); token delta
streams pickled with their arrays out of band, mapped likewise (:func:`arrays_out`, :func:`arrays_in`);
each file's records as one pickle, bytes or a file (:func:`spill_records`), which only the worker that attributes
the divergences reads (:func:`records_at`).

>>> import polars as pl
>>> frame_in(to_ipc(pl.DataFrame({"_pos": [0, 1]})), offset=10)["_pos"].to_list()
[10, 11]
"""

from __future__ import annotations

import io
import os
import pickle
import struct
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from promptkit.analysis.wire import DeltaStream
    from promptkit.layout import RequestRecord

__all__ = [
    "RecordBlobs",
    "arrays_in",
    "arrays_out",
    "files_holding",
    "frame_in",
    "frame_out",
    "maps_arrow",
    "records_at",
    "spill_records",
    "to_ipc",
]

#: Records as stage 1 ships them: (the load-order position of a file's first record, the pickled tuple of
#: the file's records, or the path of the file a worker of this machine wrote it to; on a Dask cluster,
#: the coordinator holds the future of the worker that keeps the pickle, and the cluster hands the
#: attributing task its bytes).
RecordBlobs = Sequence[tuple[int, bytes | str]]


def to_ipc(frame: pl.DataFrame) -> bytes:
    """``frame`` as Arrow IPC stream bytes, zstd-compressed: a file's composition rows repeat each
    request's blocks in the next one, and compress about 200-fold (1.7 MB to 9 kB for one 130-call
    session), which spares both ends the pipe's copies and costs no more CPU than the uncompressed write
    and read. perf: the stream format, not the file format: polars reads a stream in the calling thread
    (0.1 ms for a session's 127 request rows, 0.5 ms for its 16,510 composition rows) where it reads a
    file through a query on its thread pool (0.7 and 1.2 ms of wall time), and the coordinator reads
    every piece."""
    buffer = io.BytesIO()
    frame.write_ipc_stream(buffer, compression="zstd")
    return buffer.getvalue()


def maps_arrow() -> bool:
    """Whether this process maps the Arrow files the workers of this machine write (:func:`_mapped`):
    pyarrow is installed (the ``arrow`` extra) and the system is POSIX (a file removed while mapped
    stays readable until it is unmapped)."""
    import importlib.util

    return os.name == "posix" and importlib.util.find_spec("pyarrow") is not None


def _new_file(folder: str, suffix: str, write: Callable[[BinaryIO], object]) -> str:
    """A new file in ``folder`` (the analysis' shared temporary folder), filled by ``write``: its path."""
    fd, path = tempfile.mkstemp(dir=folder, suffix=suffix)
    with os.fdopen(fd, "wb") as out:
        write(out)
    return path


def frame_out(frame: pl.DataFrame, folder: str | None) -> bytes | str:
    """A large frame of a worker's piece: Arrow IPC bytes (:func:`to_ipc`), or, when the coordinator
    maps them (a shared ``folder``, else None), the path of an uncompressed Arrow file written to the shared
    folder. perf: the coordinator then neither receives nor decodes it: 34 MB of composition rows for
    the benchmark's 2,525 calls took 20-25 ms of its CPU to decompress and copy, mapping them about 3."""
    if folder is None:
        return to_ipc(frame)
    return _new_file(folder, ".arrow", lambda out: frame.write_ipc(out, compression="uncompressed"))


def _mapped(path: str) -> pl.DataFrame:
    """The frame of the Arrow file at ``path`` (:func:`frame_out`), its columns memory maps of the file
    (nothing is copied or decoded: the pages are read from the page cache where the frame is used). The
    file is closed at once, and the map outlives its removal (when the analysis ends)."""
    import polars as pl
    import pyarrow as pa
    import pyarrow.ipc

    with pa.memory_map(path) as source:
        table = pa.ipc.open_file(source).read_all()
    return pl.from_arrow(table, rechunk=False)  # type: ignore[return-value]


def arrays_out(value: DeltaStream, folder: str | None) -> DeltaStream | str:
    """A worker's token delta streams: as they are (pickled with the piece), or, when the coordinator maps
    them (a shared ``folder``, else None), the path of a file in the shared folder holding their pickle and, after
    it, their arrays' memory (pickle protocol 5's out-of-band buffers), each at a 64-byte boundary:
    :func:`arrays_in` maps the arrays instead of copying them. perf: 7 MB of delta tails for the
    benchmark's 2,525 calls no longer cross the coordinator's pipe (about 5 ms of its CPU)."""
    if folder is None:
        return value
    buffers: list[pickle.PickleBuffer] = []
    head = pickle.dumps(value, protocol=5, buffer_callback=buffers.append)
    parts: list[bytes | memoryview] = [head, *(b.raw() for b in buffers)]

    def write(out: BinaryIO) -> None:
        out.write(struct.pack(f"<{len(parts) + 1}Q", len(parts), *(len(x) for x in parts)))
        for part in parts:
            out.write(b"\0" * (-out.tell() % 64))
            out.write(part)

    return _new_file(folder, ".deltas", write)


def arrays_in(value: DeltaStream | str) -> DeltaStream:
    """The delta streams :func:`arrays_out` returned, their arrays read-only maps of its file (which
    is closed at once: the map outlives its removal)."""
    if not isinstance(value, str):
        return value
    import pyarrow as pa

    with pa.memory_map(value) as source:
        data = memoryview(source.read_buffer())
    count = struct.unpack_from("<Q", data)[0]
    sizes = struct.unpack_from(f"<{count}Q", data, 8)
    parts, at = [], 8 * (count + 1)
    for size in sizes:
        at += -at % 64
        parts.append(data[at : at + size])
        at += size
    return pickle.loads(parts[0], buffers=parts[1:])  # type: ignore[no-any-return]


def frame_in(data: bytes | str, offset: int = 0) -> pl.DataFrame:
    """The frame :func:`to_ipc` wrote (or :func:`frame_out`: a path is mapped), its ``_pos`` (a file's
    own record positions) moved by ``offset`` to the load order's (a Series sum: no query plan per
    piece)."""
    import polars as pl

    frame = _mapped(data) if isinstance(data, str) else pl.read_ipc_stream(io.BytesIO(data))
    if offset:  # in place: the frame was just read, nothing else holds it
        frame.replace_column(frame.get_column_index("_pos"), frame.get_column("_pos") + offset)
    return frame


def spill_records(folder: str, data: bytes) -> str:
    """``data`` written to a new file in ``folder``: its path. perf: memory: a worker of this machine
    leaves its file's records where the worker that attributes the divergences reads them, so they do
    not cross the coordinator's pipe twice (about 1.5 ms of its CPU a MB) nor stay in its memory until
    the simulation ends (they grow with the logs: 6 MB for the benchmark's 2,525 calls)."""
    return _new_file(folder, ".records", lambda out: out.write(data))


def files_holding(blobs: RecordBlobs, positions: Iterable[int]) -> list[tuple[int, bytes | str]]:
    """The files of ``blobs`` (all of a load, in its order) that hold a record at one of ``positions``:
    what :func:`attribute` is sent."""
    wanted = set(positions)
    ends: list[int | None] = [offset for offset, _ in blobs[1:]]
    return [
        (offset, blob)
        for (offset, blob), end in zip(blobs, [*ends, None], strict=True)
        if any(offset <= p and (end is None or p < end) for p in wanted)
    ]


def records_at(blobs: RecordBlobs, positions: set[int]) -> dict[int, RequestRecord]:
    """The records at ``positions`` (load order) in the files ``blobs`` (:func:`files_holding`)."""
    found: dict[int, RequestRecord] = {}
    for offset, blob in blobs:
        records = pickle.loads(Path(blob).read_bytes() if isinstance(blob, str) else blob)
        found.update((p, records[p - offset]) for p in positions if 0 <= p - offset < len(records))
    return found
