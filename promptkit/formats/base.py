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
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Final

import attrs

from promptkit.errors import LogFileError, PromptkitError, TruncatedLogError
from promptkit.layout import LoadProblem, RequestRecord

__all__ = [
    "COMPRESSED_SUFFIXES",
    "ENTRY_POINT_GROUP",
    "HEAD_BYTES",
    "MAX_DECOMPRESSED_BYTES",
    "MAX_LINE_BYTES",
    "DocumentReader",
    "LogFormat",
    "Source",
    "available_formats",
    "get_format",
    "json_lines",
    "json_values",
    "read_json_document",
    "register_format",
    "reporter",
    "sniff_format",
]

#: The entry-point group third-party log formats register under.
ENTRY_POINT_GROUP: Final[str] = "promptkit.formats"
#: How much of a file (decompressed) :attr:`Source.head` holds for sniffing.
HEAD_BYTES: Final[int] = 64 * 1024

_GZIP_MAGIC: Final[bytes] = b"\x1f\x8b"
_ZSTD_MAGIC: Final[bytes] = b"\x28\xb5\x2f\xfd"
#: The file-name suffixes of compressed logs (gzip, zstd), which are read decompressed.
COMPRESSED_SUFFIXES: Final[tuple[str, ...]] = (".gz", ".zst", ".zstd")


#: The longest line a log may hold, in (decompressed) bytes: 256 MiB. A longer line is an error naming
#: the file and line, found without reading the line whole (a log line holds one request, rarely more
#: than a few MB even with images).
MAX_LINE_BYTES: int = 256 * 1024 * 1024
#: The most bytes a compressed log may decompress to: 16 GiB. Past it reading stops with an error naming
#: the file: a small .gz or .zst cannot expand into more than this (a decompression bomb).
MAX_DECOMPRESSED_BYTES: int = 16 * 1024**3
#: A run of blank lines longer than this is passed over at the speed of a memory scan rather than line by
#: line (the line numbers after it stay right): gigabytes of newlines take seconds, not minutes.
_BLANK_RUN: Final[int] = 4096

#: Names of standard input: a log cannot be read from a pipe (the formats read a file more than once).
STDIN_PATHS: Final[tuple[str, ...]] = ("-", "/dev/stdin", "/proc/self/fd/0", "/dev/fd/0")

_KINDS: Final[tuple[tuple[Callable[[int], bool], str], ...]] = (
    (stat.S_ISFIFO, "a pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def check_regular(path: Path) -> None:
    """Raise :class:`~promptkit.errors.LogFileError` unless ``path`` is a regular file (after symlinks),
    without opening it: opening a FIFO would block until a writer comes. Standard input piped in
    (``/dev/stdin``, ``-``) gets its own message.

    >>> check_regular(Path("/dev/null"))
    Traceback (most recent call last):
    ...
    promptkit.errors.LogFileError: /dev/null: is a character device, not a regular file; promptkit reads log files only (save the stream to a file first)
    """
    stdin = LogFileError(
        path,
        "standard input: reading a log from a pipe is not supported; save it to a file and pass its path",
    )
    if str(path) == "-":
        raise stdin
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if path.is_symlink():
            raise LogFileError(
                path, f"a dangling symlink (its target {os.readlink(path)!r} does not exist)"
            ) from None
        raise LogFileError(path, "no such file") from None
    except OSError as exc:
        raise LogFileError(path, f"cannot be read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise LogFileError(path, "is a directory, not a log file")
    for test, kind in _KINDS:
        if test(mode):
            if str(path) in STDIN_PATHS:
                raise stdin
            raise LogFileError(
                path,
                f"is {kind}, not a regular file; promptkit reads log files only (save the stream to a file first)",
            )


def _compression(path: Path) -> str | None:
    check_regular(path)
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


class _ZstdReader(io.RawIOBase):
    """The decompressed bytes of a zstd file, every frame of it (``zstd`` concatenates frames), checked to
    its end: a file that stops inside a frame raises ``EOFError`` as :mod:`gzip` does, instead of ending
    quietly early. Input goes in small steps, so one step's output stays small whatever the ratio."""

    _STEP: Final[int] = 1 << 12

    def __init__(self, raw: IO[bytes]) -> None:
        self._where = getattr(raw, "name", "zstd stream")
        import zstandard

        self._zstd = zstandard
        self._raw = raw
        self._dctx = zstandard.ZstdDecompressor()
        self._frame: Any = None  # the decompressor of the frame being read; None between frames
        self._out = b""
        self._pos = 0
        self._ended = False

    def readable(self) -> bool:
        return True

    def _fill(self) -> None:
        while self._pos >= len(self._out) and not self._ended:
            chunk = self._raw.read(self._STEP)
            if not chunk:
                self._ended = True
                if self._frame is not None:
                    raise TruncatedLogError(
                        str(self._where),
                        "compressed file ended before the end of its last zstd frame (a truncated file)",
                    )
                return
            pieces = []
            try:
                while chunk:
                    if self._frame is None:
                        self._frame = self._dctx.decompressobj()
                    pieces.append(self._frame.decompress(chunk))
                    if self._frame.eof:
                        chunk = self._frame.unused_data
                        self._frame = None
                    else:
                        chunk = b""
            except self._zstd.ZstdError as exc:
                raise LogFileError(str(self._where), f"broken zstd data: {exc}") from None
            self._out, self._pos = b"".join(pieces), 0

    def readinto(self, buffer: Any) -> int:
        self._fill()
        n = min(len(buffer), len(self._out) - self._pos)
        buffer[:n] = memoryview(self._out)[self._pos : self._pos + n]  # perf: no intermediate copy
        self._pos += n
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


class _Bounded(io.RawIOBase):
    """A decompressed stream that stops with :class:`~promptkit.errors.LogFileError` past
    :data:`MAX_DECOMPRESSED_BYTES`."""

    def __init__(self, inner: Any, path: Path) -> None:
        self._inner = inner
        self._path = path
        self._read = 0
        self._limit = MAX_DECOMPRESSED_BYTES

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._inner.readinto(buffer)
        self._read += n or 0
        if self._read > self._limit:
            raise LogFileError(
                self._path,
                f"decompresses to more than {self._limit} bytes (promptkit.formats.base.MAX_DECOMPRESSED_BYTES); "
                "a decompression bomb, or a log to split",
            )
        return int(n or 0)

    def close(self) -> None:
        self._inner.close()
        super().close()


def _open_binary(path: Path, compression: str | None) -> IO[bytes]:
    if compression == "gzip":
        return io.BufferedReader(_Bounded(gzip.GzipFile(path, "rb"), path), READ_BUFFER)
    if compression == "zstd":
        try:
            reader = _ZstdReader(path.open("rb"))
        except ImportError:  # pragma: no cover - zstandard is a dependency
            raise LogFileError(path, "zstd-compressed, and the zstandard package is not installed") from None
        return io.BufferedReader(_Bounded(reader, path), READ_BUFFER)
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
        for suffix in COMPRESSED_SUFFIXES:
            if compression and name.endswith(suffix):
                name = name[: -len(suffix)]
        try:
            with _open_binary(p, compression) as f:
                raw = f.read(HEAD_BYTES)
        except LogFileError:
            raise
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
        would cut at. A line that is not UTF-8, or longer than :data:`MAX_LINE_BYTES`, raises
        :class:`~promptkit.errors.LogFileError` naming it; so does a compressed file cut short or one
        that expands past :data:`MAX_DECOMPRESSED_BYTES`. A run of more than a few thousand blank lines is
        passed over quickly (not yielded; the numbers of the lines after it stay right)."""
        lineno = 0
        limit = MAX_LINE_BYTES
        try:
            with _open_binary(self.path, self.compression) as f:
                blank = 0
                for raw in iter(lambda: f.readline(limit + 1), b""):
                    lineno += 1
                    if len(raw) > limit:
                        raise LogFileError(
                            self.path,
                            f"line {lineno}: longer than {limit} bytes (promptkit.formats.base.MAX_LINE_BYTES)",
                        )
                    if raw == b"\n":
                        blank += 1
                        if blank > _BLANK_RUN:
                            lineno += _skip_newlines(f)
                            continue
                    else:
                        blank = 0
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
        """The whole decompressed text (a compressed file checked to its end and bounded by
        :data:`MAX_DECOMPRESSED_BYTES`)."""
        try:
            with self._reader() as f:
                return f.read()
        except UnicodeDecodeError as exc:
            raise LogFileError(self.path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except LogFileError:
            raise
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


def _skip_newlines(f: IO[bytes]) -> int:
    """Read past the newlines at the position of ``f`` (a buffered reader) a buffer at a time; how many."""
    skipped = 0
    peek = getattr(f, "peek", None)
    while peek is not None:
        buf = peek(READ_BUFFER)
        if not buf:
            break
        n = len(buf) - len(buf.lstrip(b"\n"))
        if n == 0:
            break
        f.read(n)
        skipped += n
        if n < len(buf):
            break
    return skipped


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


def reporter(problems: list[LoadProblem], file: str | None, line: int | None = None) -> Callable[[str], None]:
    """A ``report(reason)`` that adds ``LoadProblem(file, line, reason)`` to ``problems``: what a reader
    hands to :func:`~promptkit.formats.fields.optional_field`.

    >>> problems = []
    >>> reporter(problems, "a.jsonl", 3)("bad")
    >>> problems
    [LoadProblem(file='a.jsonl', line=3, reason='bad')]
    """

    def report(reason: str) -> None:
        problems.append(LoadProblem(file, line, reason))

    return report


def json_lines(source: Source) -> Iterator[tuple[int, Any] | LoadProblem]:
    """The JSON value of every non-blank line of a JSON Lines ``source`` as ``(line number, value)``
    (lines split at ``\\n`` only, as :meth:`Source.lines` reads them), and a :class:`LoadProblem`
    naming the line for each line that is not JSON.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "x.jsonl"
    >>> _ = path.write_text('{"a": 1}\\n\\n{broken\\n')
    >>> [(x.line, x.reason) if isinstance(x, LoadProblem) else x for x in json_lines(Source.open(path))]
    [(1, {'a': 1}), (3, 'invalid JSON: Expecting property name enclosed in double quotes (column 2)')]
    """
    return json_values(source.lines(), source.file)


def json_values(lines: Iterable[tuple[int, str]], file: str) -> Iterator[tuple[int, Any] | LoadProblem]:
    """:func:`json_lines` over numbered lines already read (``(line number, text)``, as
    :meth:`Source.lines` gives them): each non-blank line's JSON value, or a problem in ``file`` naming
    the line that is not JSON.

    >>> [x if isinstance(x, tuple) else x.reason for x in json_values([(1, "[1]"), (2, " "), (3, "x")], "f")]
    [(1, [1]), 'invalid JSON: Expecting value (column 1)']
    """
    import json

    from promptkit.formats.fields import loads_json

    for lineno, raw in lines:
        if not raw.strip():
            continue
        try:
            yield lineno, loads_json(raw)
        except json.JSONDecodeError as exc:
            yield LoadProblem(file, lineno, f"invalid JSON: {exc.msg} (column {exc.colno})")


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


#: How many problems of one file are kept one by one; past it they are counted in one closing problem
#: (a log of millions of bad lines, a few KB gzipped, would otherwise hold gigabytes of problems).
MAX_PROBLEMS_PER_FILE: Final[int] = 1000


def read_items(fmt: LogFormat, source: Source) -> Iterator[Item]:
    """``fmt.read(source)`` with its problems bounded: the first :data:`MAX_PROBLEMS_PER_FILE` pass as they
    come, the rest are counted and closed by one problem that says how many there were, which lines, and
    the first reason, so nothing is lost silently and memory stays bounded.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "bad.jsonl"
    >>> _ = path.write_text("x\\n" * 1003)
    >>> items = list(read_items(get_format("promptkit"), Source.open(path)))
    >>> len(items), items[-1].line, items[-1].reason[:60]
    (1001, 1001, '3 more problems like these, lines 1001 to 1003 (not kept one')
    """
    kept = 0
    more = 0
    first_line: int | None = None
    last_line: int | None = None
    first_reason = ""
    for item in fmt.read(source):
        if not isinstance(item, LoadProblem) or kept < MAX_PROBLEMS_PER_FILE:
            kept += isinstance(item, LoadProblem)
            yield item
            continue
        if more == 0:
            first_line, first_reason = item.line, item.reason
        more += 1
        last_line = item.line if item.line is not None else last_line
    if more:
        where = (
            f", lines {first_line} to {last_line}" if first_line is not None and last_line is not None else ""
        )
        yield LoadProblem(
            str(source.path), first_line,
            f"{more:,} more problems like these{where} (not kept one by one past the first "
            f"{MAX_PROBLEMS_PER_FILE:,} of this file); the first of them: {first_reason}",
        )  # fmt: skip


_REGISTRY: dict[str, LogFormat] = {}
_LOADED_ENTRY_POINTS = False
_LOADED_BUILTINS = False


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
    """Register the built-in formats, found by module name
    (:data:`~promptkit.formats.builtin.BUILTIN_FORMAT_MODULES`) the way a plugin's are found by its
    entry point: each module's ``FORMAT``."""
    global _LOADED_BUILTINS
    if _LOADED_BUILTINS:
        return
    import importlib

    from promptkit.formats.builtin import BUILTIN_FORMAT_MODULES

    for name in BUILTIN_FORMAT_MODULES:
        fmt = importlib.import_module(name).FORMAT
        if not isinstance(fmt, LogFormat):
            raise PromptkitError(f"{name}.FORMAT is a {type(fmt).__name__}, not a LogFormat")
        register_format(fmt, replace=True)
    _LOADED_BUILTINS = True


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


def sniff_format(source: Source, formats: Sequence[LogFormat] | None = None) -> LogFormat:
    """The first format (by priority) whose ``sniff`` accepts ``source``; raises
    :class:`~promptkit.errors.LogFileError` naming every format tried. ``formats``: the formats to try,
    in order (default: :func:`available_formats`; a worker is given its caller's)."""
    tried = list(available_formats().values()) if formats is None else list(formats)
    for fmt in tried:
        if fmt.sniff(source):
            return fmt
    names = ", ".join(fmt.name for fmt in tried)
    raise LogFileError(source.path, f"not a log of any known format (tried: {names})")
