"""The log-format registry: one :class:`LogFormat` per format, found by sniffing a file.

A format is a name, a ``sniff`` test on the first bytes of a file, and a ``read`` function that yields
:class:`~promptkit.layout.RequestRecord` s (with file and line) and
:class:`~promptkit.layout.LoadProblem` s, never raising for a bad record. Third-party packages add
formats through the ``promptkit.formats`` entry-point group: the entry point names a
:class:`LogFormat` object (or a module with ``FORMAT``).

>>> from promptkit.formats import available_formats
>>> "promptkit" in available_formats() and "mini-swe-agent" in available_formats()
True
"""

from __future__ import annotations

import gzip
import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Final

import attrs

from promptkit.errors import LogFileError, PromptkitError
from promptkit.layout import LoadProblem, RequestRecord

__all__ = [
    "ENTRY_POINT_GROUP",
    "HEAD_BYTES",
    "DocumentReader",
    "LogFormat",
    "Source",
    "available_formats",
    "get_format",
    "read_json_document",
    "register_format",
    "sniff_format",
]

#: The entry-point group third-party log formats register under.
ENTRY_POINT_GROUP: Final[str] = "promptkit.formats"
#: How much of a file (decompressed) :attr:`Source.head` holds for sniffing.
HEAD_BYTES: Final[int] = 64 * 1024

_GZIP_MAGIC: Final[bytes] = b"\x1f\x8b"
_ZSTD_MAGIC: Final[bytes] = b"\x28\xb5\x2f\xfd"
_COMPRESSED_SUFFIXES: Final[tuple[str, ...]] = (".gz", ".zst", ".zstd")


def _compression(path: Path) -> str | None:
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except FileNotFoundError:
        raise LogFileError(path, "no such file") from None
    except IsADirectoryError:
        raise LogFileError(path, "is a directory, not a log file") from None
    except OSError as exc:
        raise LogFileError(path, f"cannot be read: {exc.strerror or exc}") from None
    if magic.startswith(_GZIP_MAGIC):
        return "gzip"
    if magic == _ZSTD_MAGIC:
        return "zstd"
    return None


#: Bytes a log file is read by (perf: a log line often holds a whole conversation, 100 kB and more; a
#: line longer than the buffer is read piece by piece, so the default 8 kB buffer reads it in many)
READ_BUFFER: Final[int] = 1 << 20


def _open_binary(path: Path, compression: str | None) -> IO[bytes]:
    if compression == "gzip":
        return io.BufferedReader(gzip.GzipFile(path, "rb"), READ_BUFFER)
    if compression == "zstd":
        try:
            import zstandard
        except ImportError:  # pragma: no cover - zstandard is a dependency
            raise LogFileError(path, "zstd-compressed, and the zstandard package is not installed") from None
        reader = zstandard.ZstdDecompressor().stream_reader(path.open("rb"), closefd=True)
        return io.BufferedReader(reader, READ_BUFFER)
    return path.open("rb", buffering=READ_BUFFER)


@attrs.define(slots=True)
class Source:
    """One log file as a format sees it: its ``path``, its ``name`` without a compression suffix
    (``calls.jsonl.gz`` → ``calls.jsonl``), its ``compression`` (``"gzip"``, ``"zstd"`` or None) and its
    decompressed ``head`` (the first :data:`HEAD_BYTES` bytes as text, for sniffing). :meth:`lines`
    streams ``(line number, text)`` pairs; :meth:`text` reads it whole. Decoding is UTF-8 (a leading BOM
    is dropped); undecodable bytes raise :class:`~promptkit.errors.LogFileError` naming the file and line.
    """

    path: Path
    name: str
    compression: str | None
    head: str

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Source:
        """Open ``path`` for sniffing: detect compression by magic bytes and read the head."""
        p = Path(path)
        compression = _compression(p)
        name = p.name
        for suffix in _COMPRESSED_SUFFIXES:
            if compression and name.endswith(suffix):
                name = name[: -len(suffix)]
        try:
            with _open_binary(p, compression) as f:
                raw = f.read(HEAD_BYTES)
        except (OSError, EOFError) as exc:
            raise LogFileError(p, f"cannot be decompressed ({compression}): {exc}") from None
        except Exception as exc:  # zstandard raises its own ZstdError
            raise LogFileError(p, f"cannot be decompressed ({compression}): {exc}") from None
        head = raw.decode("utf-8", errors="ignore").removeprefix("\ufeff")
        return cls(p, name, compression, head)

    @property
    def file(self) -> str:
        """The path as a string, for records and problems."""
        return str(self.path)

    def _reader(self) -> io.TextIOWrapper:
        return io.TextIOWrapper(_open_binary(self.path, self.compression), encoding="utf-8-sig", newline="")

    def lines(self) -> Iterator[tuple[int, str]]:
        """``(line number, line)`` pairs (1-based, the newline stripped), read lazily one line at a time.
        Lines split at ``\\n`` only: JSON strings may hold U+2028 and friends, which ``str.splitlines``
        would cut at. A line that is not UTF-8 raises :class:`~promptkit.errors.LogFileError` naming it."""
        lineno = 0
        try:
            with _open_binary(self.path, self.compression) as f:
                for raw in f:
                    lineno += 1
                    try:
                        text = raw.decode("utf-8")
                    except UnicodeDecodeError as exc:
                        raise LogFileError(
                            self.path, f"line {lineno}: not UTF-8 text ({exc.reason} at byte {exc.start})"
                        ) from None
                    if lineno == 1:
                        text = text.removeprefix("\ufeff")
                    yield lineno, text.removesuffix("\n").removesuffix("\r")
        except (OSError, EOFError) as exc:
            if isinstance(exc, LogFileError):
                raise
            raise LogFileError(self.path, f"cannot be read after line {lineno}: {exc}") from None

    def text(self) -> str:
        """The whole decompressed text."""
        try:
            with self._reader() as f:
                return f.read()
        except UnicodeDecodeError as exc:
            raise LogFileError(self.path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except (OSError, EOFError) as exc:
            raise LogFileError(self.path, f"cannot be read: {exc}") from None

    @property
    def stem(self) -> str:
        """The file name without its format and compression suffixes: the default session name."""
        name = self.name
        for suffix in (".traj.json", ".traj", ".jsonl", ".json", ".ndjson", ".har"):
            if name.endswith(suffix) and len(name) > len(suffix):
                return name[: -len(suffix)]
        return name


Item = RequestRecord | LoadProblem

#: A reader of one parsed JSON document: ``(data, file, default session, problems) -> records``.
DocumentReader = Callable[[object, str, str, list[LoadProblem]], list[RequestRecord]]


def read_json_document(source: Source, records_of: DocumentReader) -> Iterator[Item]:
    """The ``read`` of a format whose file is one JSON document (a trajectory): parse ``source``, then
    yield the problems and the records ``records_of`` finds in it. Invalid JSON is one problem with its
    line."""
    import json

    from promptkit.formats.fields import loads_json

    try:
        data = loads_json(source.text())
    except json.JSONDecodeError as exc:
        yield LoadProblem(source.file, exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})")
        return
    problems: list[LoadProblem] = []
    records = records_of(data, source.file, source.stem, problems)
    yield from problems
    yield from records


@attrs.frozen(slots=True)
class LogFormat:
    """A log format: its ``name`` (what ``--format`` takes), a one-line ``description``, ``sniff``
    (``Source -> bool``: does this file look like this format?) and ``read`` (``Source -> iterator of
    RequestRecord | LoadProblem``). ``priority`` orders sniffing (higher first): specific formats
    before general ones. Records may leave ``index`` at 0: the loader numbers each session's calls in
    time order.
    """

    name: str
    description: str
    sniff: Callable[[Source], bool]
    read: Callable[[Source], Iterator[Item]]
    priority: int = 0


_REGISTRY: dict[str, LogFormat] = {}
_LOADED_ENTRY_POINTS = False


def register_format(fmt: LogFormat, *, replace: bool = False) -> LogFormat:
    """Add a format to the registry (``replace=True`` to override one of the same name); returns it."""
    if not isinstance(fmt, LogFormat):
        raise PromptkitError(f"register_format: expected a LogFormat, got {type(fmt).__name__}")
    if fmt.name in _REGISTRY and not replace and _REGISTRY[fmt.name] is not fmt:
        raise PromptkitError(f"register_format: a format named {fmt.name!r} is already registered")
    _REGISTRY[fmt.name] = fmt
    return fmt


def _load_entry_points() -> None:
    global _LOADED_ENTRY_POINTS
    if _LOADED_ENTRY_POINTS:
        return
    _LOADED_ENTRY_POINTS = True
    from promptkit.plugins import entry_point_objects

    for fmt in entry_point_objects(
        ENTRY_POINT_GROUP, LogFormat, attribute="FORMAT", what="log format plugin"
    ):
        _REGISTRY.setdefault(fmt.name, fmt)


def _builtins() -> None:
    # imported for their register_format side effect
    from promptkit.formats import builtin  # noqa: F401


def available_formats() -> dict[str, LogFormat]:
    """Every registered format by name, in sniffing order (built-ins and entry-point plugins)."""
    _builtins()
    _load_entry_points()
    return dict(sorted(_REGISTRY.items(), key=lambda kv: -kv[1].priority))


def get_format(name: str) -> LogFormat:
    """The format called ``name``; raises :class:`~promptkit.errors.PromptkitError` listing the known ones."""
    formats = available_formats()
    if name not in formats:
        raise PromptkitError(f"unknown log format {name!r}; known: {', '.join(formats)}")
    return formats[name]


def sniff_format(source: Source) -> LogFormat:
    """The first format (by priority) whose ``sniff`` accepts ``source``; raises
    :class:`~promptkit.errors.LogFileError` naming every format tried."""
    formats = available_formats()
    for fmt in formats.values():
        if fmt.sniff(source):
            return fmt
    raise LogFileError(source.path, f"not a log of any known format (tried: {', '.join(formats)})")
