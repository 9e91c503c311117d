"""``promptkit statusline``: Claude Code's status line, one line on the session's prompt cache.

Claude Code runs the status-line command after each new assistant message and passes a JSON object on
stdin (``session_id``, ``transcript_path``, ``cwd``, ``model`` with ``id`` and ``display_name``,
``workspace``, ``cost``, ...; https://code.claude.com/docs/en/statusline); the first line of stdout is the
status line. :func:`status_line` reads the transcript's cache clock
(:mod:`promptkit.analysis.transcript_clock`) and prints, for example::

    Opus 4.6 · cache 69.5% hit · 4:31 left (5m) · $0.125 · last miss: ttl_expiry, 12,480 tokens

**Fast.** It runs on every prompt. What it learnt is kept in a small state file per transcript under
the cache folder (``$XDG_CACHE_HOME/promptkit/statusline``, else ``~/.cache/promptkit/statusline``),
keyed by the transcript's path and holding the byte offset it read to, the file's inode, size and
mtime: the next run seeks to that offset and reads only the lines written since (a file that shrank
or was replaced is read again). The models' prices are kept there too, so a run
imports no provider profile once it has priced the session's model (``facts.json``, with Claude Code's
cache lifetimes from the Anthropic profile; dropped when a module of ``promptkit/providers`` changes);
nothing imports polars or numpy.

**Never breaks the prompt.** Bad or missing input (not JSON, no ``transcript_path``, a transcript that
cannot be read) prints one short line starting ``promptkit:`` and exits 0: Claude Code shows the first
line of stdout, so the line says what is wrong where the user looks, and a non-zero exit would only
hide it. A state file that cannot be read or written is ignored (the run reads the transcript from
the start) and never fails the line. Only a wrong command-line option exits 2 (argparse), which the
user sees once when installing.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, TextIO

import attrs

from promptkit.analysis.clock import CacheClock, ClockPrice, Lifetimes, format_left
from promptkit.analysis.transcript_clock import TranscriptClockState, read_transcript
from promptkit.errors import PromptkitError, RecordFormatError

__all__ = ["STATE_VERSION", "default_cache_dir", "format_clock", "run_statusline", "status_line"]

#: The state files' layout version: a file of another version is ignored.
STATE_VERSION: Final[int] = 1
_SEP: Final[str] = " · "


def default_cache_dir() -> Path:
    """Where the status line keeps its state: ``$XDG_CACHE_HOME/promptkit/statusline``, else
    ``~/.cache/promptkit/statusline``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "promptkit" / "statusline"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_json(path: Path, data: Any) -> None:
    """Write ``data`` to ``path`` atomically; a failure is ignored (the state is only a shortcut)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, separators=(",", ":"))
        os.replace(tmp, path)
    except OSError:
        return


def _digest(text: str) -> str:
    """A short name for ``text`` (two checksums: hashlib would load OpenSSL, a tenth of the run; a
    state file also keeps the transcript's path, which is checked)."""
    data = text.encode("utf-8", "surrogatepass")
    return f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}"


def _providers_fingerprint() -> str:
    """What the kept prices and lifetimes were read from: the size and mtime of each module of
    ``promptkit/providers`` (where the profiles carry them), found without importing it."""
    folder = Path(__file__).resolve().parents[1] / "providers"
    try:
        stats = sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in os.scandir(folder))
    except OSError:
        return ""
    return _digest(repr(stats))


class _Facts:
    """What the status line needs from the provider profiles (each model's price, Claude Code's cache
    lifetimes), kept in ``facts.json`` beside the states so a run imports no profile once it has them.
    Kept facts are dropped when a module of ``promptkit/providers`` changes."""

    def __init__(self, path: Path | None) -> None:
        self.path, self.fingerprint, self.dirty = path, _providers_fingerprint(), False
        data = _read_json(path) if path is not None else None
        ok = isinstance(data, Mapping) and data.get("providers") == self.fingerprint
        models = data.get("models") if ok and isinstance(data, Mapping) else None
        self.models: dict[str, Any] = dict(models) if isinstance(models, Mapping) else {}
        self._lifetimes: Lifetimes | None = None
        if ok and isinstance(data, Mapping) and "lifetimes" in data:
            try:
                self._lifetimes = Lifetimes.from_json(data["lifetimes"])
            except PromptkitError:
                self._lifetimes = None

    @property
    def lifetimes(self) -> Lifetimes:
        """The cache lifetimes of the provider Claude Code speaks to."""
        if self._lifetimes is None:
            from promptkit.analysis.clock import lifetimes_of
            from promptkit.providers.registry import native_provider

            provider = native_provider("claude-code")
            self._lifetimes = lifetimes_of(provider) if provider is not None else Lifetimes(None)
            self.dirty = True
        return self._lifetimes

    def price(self, model: str | None) -> ClockPrice | None:
        """``model``'s price (None: unpriced)."""
        if model is None:
            return None
        known = self.models.get(model, False)
        if known is None:
            return None
        if isinstance(known, Mapping):
            try:
                return ClockPrice(**known)
            except TypeError:
                pass
        from promptkit.analysis.clock import clock_price

        price = clock_price(model)
        self.models[model] = None if price is None else attrs.asdict(price)
        self.dirty = True
        return price

    def save(self) -> None:
        if self.dirty and self.path is not None:
            data = {
                "providers": self.fingerprint,
                "lifetimes": self.lifetimes.to_json(),
                "models": self.models,
            }
            _write_json(self.path, data)


def _state_file(cache_dir: Path, transcript: str) -> Path:
    return cache_dir / f"{_digest(transcript)}.json"


def _load_state(path: Path | None, transcript: str) -> TranscriptClockState:
    data = _read_json(path) if path is not None else None
    if isinstance(data, Mapping) and data.get("version") == STATE_VERSION:
        try:
            state = TranscriptClockState.from_json(data["state"])
            if state.path == transcript:
                return state
        except (KeyError, TypeError, ValueError, AttributeError, PromptkitError):
            pass
    return TranscriptClockState.start(transcript)


def format_clock(clock: CacheClock, model_name: str | None = None) -> str:
    """The status line of ``clock`` (one line, no newline).

    >>> from promptkit.analysis.clock import clock_of
    >>> call = Lifetimes(300.0, 3600.0).call(sent_at=0.0, model="m", prompt_tokens=100, cached_tokens=0,
    ...                                      written_tokens=90)
    >>> format_clock(clock_of([call], session="s", now=30.0), "Opus")
    'Opus · cache 0.0% hit · 4:30 left (5m) · last miss: cold_start'
    """
    if not clock.calls:
        return _SEP.join(p for p in (model_name, "cache: no calls yet") if p)
    parts = [model_name] if model_name else []
    ratio = clock.hit_ratio
    parts.append(f"cache {ratio:.1%} hit" if ratio is not None else "cache")
    if clock.expired:
        parts.append("expired")
    elif clock.seconds_left is not None and clock.ttl_seconds is not None:
        parts.append(f"{format_left(clock.seconds_left)} left ({_ttl_name(clock.ttl_seconds)})")
    else:
        parts.append(clock.status)
    if clock.cost_usd is not None:
        parts.append(f"${clock.cost_usd:.3f}" + ("+" if clock.unpriced_calls else ""))
    if clock.last_miss_cause is not None:
        lost = f", {clock.missed_tokens:,} tokens" if clock.missed_tokens else ""
        parts.append(f"last miss: {clock.last_miss_cause}{lost}")
    return _SEP.join(parts)


def _ttl_name(seconds: float) -> str:
    return f"{seconds / 3600:g}h" if seconds >= 3600 else f"{seconds / 60:g}m"


def _input(text: str) -> tuple[str, str | None]:
    """The transcript path and the model's display name from Claude Code's status-line JSON; raises
    :class:`~promptkit.errors.RecordFormatError` with the line to print when the input is not usable."""
    try:
        data = json.loads(text)
    except ValueError:
        raise RecordFormatError("promptkit: the status-line input is not JSON") from None
    if not isinstance(data, Mapping):
        raise RecordFormatError("promptkit: the status-line input is not a JSON object")
    path = data.get("transcript_path")
    if not isinstance(path, str) or not path:
        raise RecordFormatError("promptkit: no transcript_path in the status-line input")
    model = data.get("model")
    name = model.get("display_name") if isinstance(model, Mapping) else None
    return path, name if isinstance(name, str) and name else None


def status_line(text: str, *, now: float | None = None, cache_dir: Path | None = None) -> str:
    """The status line for Claude Code's status-line JSON ``text`` at ``now`` (default: the current
    time), keeping state in ``cache_dir`` (None: keep none). Never raises for bad input: the line then
    says what is wrong.
    """
    try:
        transcript, name = _input(text)
    except RecordFormatError as exc:
        return str(exc)
    transcript = os.path.abspath(os.path.expanduser(transcript))
    state_path = None if cache_dir is None else _state_file(cache_dir, transcript)
    facts = _Facts(None if cache_dir is None else cache_dir / "facts.json")
    before = _load_state(state_path, transcript)
    try:
        state = read_transcript(before, price_of=facts.price, lifetimes=facts.lifetimes)
    except FileNotFoundError:
        return _SEP.join(p for p in (name, "cache: no calls yet") if p)
    except OSError as exc:
        return f"promptkit: cannot read the transcript: {exc.strerror or exc}"
    if state_path is not None and state != before:
        _write_json(state_path, {"version": STATE_VERSION, "state": state.to_json()})
    facts.save()
    return format_clock(state.clock(now=time.time() if now is None else now), name)


def run_statusline(
    stdin: TextIO, stdout: TextIO, *, now: float | None = None, cache_dir: Path | None = None
) -> int:
    """Read Claude Code's JSON from ``stdin``, print the status line; returns 0 (see the module)."""
    try:
        text = stdin.read()
    except (OSError, UnicodeError) as exc:
        text, line = "", f"promptkit: cannot read the status-line input: {exc}"
    else:
        try:
            line = status_line(text, now=now, cache_dir=cache_dir)
        except Exception as exc:  # a status line must never break the user's prompt with a traceback
            if os.environ.get("PROMPTKIT_DEBUG"):
                raise
            line = f"promptkit: status line failed: {type(exc).__name__}: {exc}"
    try:
        stdout.write(line.replace("\n", " ") + "\n")
        stdout.flush()
    except (BrokenPipeError, OSError):
        pass
    return 0
