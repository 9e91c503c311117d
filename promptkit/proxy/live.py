"""Live cache figures per session: the hit ratio reported by the provider's usage, the one predicted by
promptkit's analyzer, and the last breaks with their cause.

The proxy calls :meth:`LiveFigures.observe` with every record it writes. Reported figures are added at
once; the prediction runs the analyzer (:func:`promptkit.analysis.analyze_requests`, consecutive view) on
the session's previous request and this one, in one background thread, so forwarding never waits for
it. A *break* is a request whose prompt shares less with the previous request than that whole previous
prompt: the cause is the first message (its index, role, and layout slot/key when the record has a
layout) that differs.

Each session also has a cache clock (:mod:`promptkit.analysis.clock`): the time its cache expires
(the provider's lifetime after the last call that read or wrote it: Anthropic's 5 minutes or 1 hour
from the usage's write split, OpenAI's 10 minutes), the time left and whether it has expired, and the
cause of the last miss. The page counts the time left down every second in the browser from the
server's expiry time (``cache_expires_at`` in ``stats.json``, seconds since the epoch).

The live state is bounded, whatever the traffic: only the ``max_held`` most recently active sessions
keep their last request, and only while those requests add up to at most ``max_held_bytes`` (256 MiB;
the size of a request is the length of its text and its structure: 200 calls of 20,000 messages once
held 1.3 GB idle) — the others keep their counters only, and their next request is predicted as a fresh
start; at most ``max_sessions`` sessions are listed (the oldest are retired, their counts kept in
the totals); at most ``max_pending`` predictions wait (a request past that is counted in
``skipped_predictions``, not predicted).

>>> figures = LiveFigures(predict=False)
>>> figures.observe({"request": {"model": "gpt-4o", "messages": []}, "http": {"api": "openai-chat"},
...                  "response": {"usage": {"prompt_tokens": 2000, "prompt_tokens_details": {"cached_tokens": 1536}}}}, "s1")
>>> figures.snapshot()["sessions"][0]["reported_hit_ratio"]
0.768
"""

from __future__ import annotations

import html
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from promptkit.analysis.clock import CacheClock, ClockCall, ClockTally, Lifetimes, lifetimes_of, usage_call
from promptkit.errors import InternalError, RecordFormatError
from promptkit.formats.wire.record import completion_of
from promptkit.layout import LayoutEntry, RequestRecord, Usage
from promptkit.providers.registry import normalize_usage

__all__ = ["LiveFigures", "render_page"]


class _Session:
    __slots__ = (
        "breaks", "clock", "errors", "last", "model", "name", "predicted_cached", "predicted_prompt", "predicted_requests",
        "provider", "reported_cached", "reported_prompt", "reported_requests", "requests",
    )  # fmt: skip

    def __init__(self, name: str, provider: str, model: str | None, max_breaks: int) -> None:
        self.name = name
        self.provider = provider
        self.model = model
        self.requests = 0
        self.errors = 0
        self.reported_requests = 0
        self.reported_prompt = 0
        self.reported_cached = 0
        self.predicted_requests = 0
        self.predicted_prompt = 0
        self.predicted_cached = 0
        self.breaks: deque[dict[str, Any]] = deque(maxlen=max_breaks)
        self.last: RequestRecord | None = None
        self.clock = ClockTally()

    def as_dict(self, now: float | None = None) -> dict[str, Any]:
        def ratio(cached: int, prompt: int) -> float | None:
            return round(cached / prompt, 4) if prompt else None

        return {
            "session": self.name,
            "provider": self.provider,
            "model": self.model,
            "requests": self.requests,
            "errors": self.errors,
            "reported_requests": self.reported_requests,
            "reported_prompt_tokens": self.reported_prompt,
            "reported_cached_tokens": self.reported_cached,
            "reported_hit_ratio": ratio(self.reported_cached, self.reported_prompt),
            "predicted_requests": self.predicted_requests,
            "predicted_prompt_tokens": self.predicted_prompt,
            "predicted_cached_tokens": self.predicted_cached,
            "predicted_hit_ratio": ratio(self.predicted_cached, self.predicted_prompt),
            "last_breaks": list(self.breaks),
            **_clock_fields(
                CacheClock.of(self.clock, session=self.name, now=time.time() if now is None else now)
            ),
        }


def _clock_fields(clock: CacheClock) -> dict[str, Any]:
    """A session's cache clock in ``stats.json``: when its cache expires (seconds since the epoch; None
    without a use or a known lifetime), the lifetime, the seconds left and whether it has expired at
    the snapshot, and the cause of the last call's miss (None when it hit)."""
    return {
        "cache_ttl_seconds": clock.ttl_seconds,
        "cache_last_use": clock.last_use_at,
        "cache_expires_at": clock.expires_at,
        "cache_seconds_left": None if clock.seconds_left is None else round(clock.seconds_left, 3),
        "cache_expired": clock.expired,
        "last_miss_cause": clock.last_miss_cause,
    }


def _clock_call(provider: str, request: Mapping[str, Any], usage: Usage, at: float) -> ClockCall | None:
    """One call as the clock sees it, with ``provider``'s cache lifetimes (none for a provider the
    registry does not know)."""
    from promptkit.errors import PromptkitError

    model = request.get("model")
    try:
        life = lifetimes_of(provider, request)
    except PromptkitError:
        life = Lifetimes(None)
    return usage_call(usage, sent_at=at, model=model if isinstance(model, str) else None, lifetimes=life)


def _size(value: Any) -> int:
    """The size of a JSON value held in memory, roughly: the length of its strings and 16 bytes a number
    or container entry (a walk with a stack: any depth)."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, Mapping):
            total += 16 * len(item)
            for key, inner in item.items():
                stack.append(inner)
                if isinstance(key, str):
                    total += len(key)
        elif isinstance(item, list | tuple):
            total += 16 * len(item)
            stack.extend(item)
        else:
            total += 16
    return total


def _provider(record: Mapping[str, Any], override: str | None) -> str:
    """The provider whose rules predict this call: ``override``, else the one the provider registry
    recognises from the recorded URL or model name, else the generic profile (exact prefix, no unit), never
    another provider's rules."""
    if override:
        return override
    from promptkit.providers.registry import GENERIC_PROVIDER, available_providers, infer_provider

    raw = record.get("http")
    http: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    named = http.get("provider")
    if isinstance(named, str) and named in available_providers():
        return named
    request = record.get("request")
    model = request.get("model") if isinstance(request, Mapping) else None
    url = http.get("url")
    found = infer_provider(
        model=model if isinstance(model, str) else None, url=url if isinstance(url, str) else None
    )
    return found or GENERIC_PROVIDER  # the live page says which provider each session was given


def _layout(value: object) -> tuple[LayoutEntry, ...] | None:
    if not isinstance(value, list):
        return None
    out = []
    for item in value:
        if not isinstance(item, Mapping) or not isinstance(item.get("slot"), str):
            return None
        key = item.get("key")
        out.append(LayoutEntry(item["slot"], key if isinstance(key, str) else None))
    return tuple(out)


class LiveFigures:
    """Per-session reported and predicted cache figures, updated as records arrive (thread-safe reads).

    ``provider`` forces the provider whose cache rules predict (default: from the upstream's host, the
    API, the model name); ``predict=False`` keeps only the reported figures.
    """

    def __init__(
        self,
        *,
        provider: str | None = None,
        predict: bool = True,
        max_breaks: int = 5,
        max_held: int = 64,
        max_sessions: int = 2000,
        max_pending: int = 64,
        max_held_bytes: int = 256 * 1024 * 1024,
    ) -> None:
        self.provider = provider
        self.predict = predict
        self.max_breaks = max_breaks
        self.max_held = max_held
        self.max_held_bytes = max_held_bytes
        self._held_bytes = 0
        self.max_sessions = max_sessions
        self.max_pending = max_pending
        self.prediction_errors = 0
        self.last_prediction_error: str | None = None
        self.skipped_predictions = 0
        self.released = 0
        self._retired = {"sessions": 0, "requests": 0, "errors": 0, "reported_prompt_tokens": 0,
                         "reported_cached_tokens": 0, "predicted_prompt_tokens": 0,
                         "predicted_cached_tokens": 0}  # fmt: skip
        self._held: OrderedDict[str, int] = OrderedDict()  # sessions whose last request is held (bytes), LRU
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._lock = threading.Lock()
        self._pending: set[Future[None]] = set()
        self._executor: ThreadPoolExecutor | None = None

    def observe(self, record: Mapping[str, Any], session: str) -> None:
        """Count one written record of ``session`` and schedule its prediction."""
        request = record.get("request")
        if not isinstance(request, Mapping):
            return
        provider = _provider(record, self.provider)
        with self._lock:
            state = self._sessions.get(session)
            if state is None:
                model = request.get("model")
                state = _Session(
                    session, provider, model if isinstance(model, str) else None, self.max_breaks
                )
                self._sessions[session] = state
            self._retire()
            state.requests += 1
            if record.get("error") is not None:
                state.errors += 1
                return
            response = record.get("response")
            usage = None
            if isinstance(response, Mapping) and response.get("usage") is not None:
                try:
                    usage = normalize_usage(response["usage"])
                except RecordFormatError:
                    usage = None
            if usage is not None and usage.prompt_tokens is not None:
                state.reported_requests += 1
                state.reported_prompt += usage.prompt_tokens
                state.reported_cached += usage.cached_tokens or 0
                stamp = record.get("timestamp")
                if isinstance(stamp, float | int) and not isinstance(stamp, bool):
                    call = _clock_call(provider, request, usage, stamp)
                    state.clock = state.clock.add(call) if call is not None else state.clock
            if not self.predict:
                return
            index = state.last.index + 1 if state.last is not None else 0
            current = RequestRecord(
                request=request,
                session=session,
                index=index,
                timestamp=record.get("timestamp")
                if isinstance(record.get("timestamp"), float | int)
                else None,
                completion=completion_of(response) if isinstance(response, Mapping) else None,
                usage=usage,
                layout=_layout(record.get("layout")),
            )
            previous, state.last = state.last, current
            self._hold(session, _size(request))
            if len(self._pending) >= self.max_pending:
                self.skipped_predictions += 1
                return
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="promptkit-predict")
            future = self._executor.submit(self._predict, state, previous, current)
            self._pending.add(future)
            future.add_done_callback(self._pending.discard)

    def _hold(self, session: str, size: int) -> None:
        """Mark ``session``'s last request (of ``size`` bytes) as held; release the least recently active
        beyond ``max_held`` requests or ``max_held_bytes`` (called with the lock held)."""
        self._held_bytes += size - self._held.pop(session, 0)
        self._held[session] = size
        while self._held and (len(self._held) > self.max_held or self._held_bytes > self.max_held_bytes):
            name, freed = self._held.popitem(last=False)
            self._held_bytes -= freed
            state = self._sessions.get(name)
            if state is not None and state.last is not None:
                state.last = None
                self.released += 1

    def held_bytes(self) -> int:
        """The size of the requests held now (at most ``max_held_bytes``)."""
        with self._lock:
            return self._held_bytes

    def _retire(self) -> None:
        """Retire the oldest sessions beyond ``max_sessions``, their counts kept in the
        totals (called with the lock held)."""
        while len(self._sessions) > self.max_sessions:
            name, state = self._sessions.popitem(last=False)
            self._held_bytes -= self._held.pop(name, 0)
            old = state.as_dict()
            self._retired["sessions"] += 1
            for key in self._retired:
                if key != "sessions":
                    self._retired[key] += old[key]

    def held_requests(self) -> int:
        """How many sessions' last requests are held now (at most ``max_held``)."""
        with self._lock:
            return sum(1 for s in self._sessions.values() if s.last is not None)

    def _predict(self, state: _Session, previous: RequestRecord | None, current: RequestRecord) -> None:
        from promptkit.analysis import analyze_requests

        records = [current] if previous is None else [previous, current]
        try:
            frame = analyze_requests(records, provider=state.provider).requests
            if frame.height != len(records):
                raise InternalError(f"the analyzer left out {len(records) - frame.height} request(s)")
        except Exception as exc:  # a prediction must never take the proxy down
            with self._lock:
                self.prediction_errors += 1
                self.last_prediction_error = f"{state.name}#{current.index}: {exc}"
            return
        row = frame.row(frame.height - 1, named=True)
        with self._lock:
            state.predicted_requests += 1
            state.predicted_prompt += int(row["prompt_tokens"] or 0)
            state.predicted_cached += int(row["predicted_cached_tokens"] or 0)
            if previous is not None:
                before = int(frame["prompt_tokens"][0] or 0)
                shared = int(row["prefix_tokens"] or 0)
                if shared < before and row["divergence_role"] is not None:
                    state.breaks.append(
                        {
                            "index": current.index,
                            "timestamp": current.timestamp,
                            "lost_tokens": before - shared,
                            "message": row["divergence_message"],
                            "role": row["divergence_role"],
                            "slot": row["divergence_anchor"],
                            "key": row["divergence_key"],
                        }
                    )

    def wait(self, timeout: float | None = None) -> None:
        """Block until every scheduled prediction has run (for tests and shutdown)."""
        from concurrent.futures import wait

        wait(list(self._pending), timeout=timeout)

    def snapshot(self, now: float | None = None) -> dict[str, Any]:
        """The figures as JSON-ready data at ``now`` (default: the current time): ``sessions`` (one dict
        each, in arrival order, with its cache clock), ``totals`` and the prediction errors."""
        at = time.time() if now is None else now
        with self._lock:
            sessions = [s.as_dict(at) for s in self._sessions.values()]
            errors, last_error = self.prediction_errors, self.last_prediction_error
            retired = dict(self._retired)
            skipped, released = self.skipped_predictions, self.released

        def total(key: str) -> int:
            return int(sum(s[key] for s in sessions)) + retired[key]

        prompt = total("reported_prompt_tokens")
        cached = total("reported_cached_tokens")
        pprompt = total("predicted_prompt_tokens")
        pcached = total("predicted_cached_tokens")
        return {
            "now": at,
            "sessions": sessions,
            "retired_sessions": retired["sessions"],
            "released_requests": released,
            "skipped_predictions": skipped,
            "totals": {
                "requests": total("requests"),
                "errors": total("errors"),
                "reported_hit_ratio": round(cached / prompt, 4) if prompt else None,
                "predicted_hit_ratio": round(pcached / pprompt, 4) if pprompt else None,
            },
            "pending_predictions": len(self._pending),
            "prediction_errors": errors,
            "last_prediction_error": last_error,
        }

    def close(self) -> None:
        """Stop the prediction thread (pending predictions are dropped)."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


def _pct(value: object) -> str:
    return "–" if not isinstance(value, float | int) else f"{value:.1%}"


#: The page's one script: counts every ``data-expires-at`` element down each second from the server's
#: expiry time (seconds since the epoch), as ``m:ss left`` (``h:mm:ss`` from an hour), then ``expired``.
COUNTDOWN_SCRIPT = (
    "<script>function promptkitTick(){const now=Date.now()/1000;"
    "for(const el of document.querySelectorAll('[data-expires-at]')){"
    "const left=Math.floor(Number(el.dataset.expiresAt)-now);"
    "if(left<=0){el.textContent='expired';el.className='clock expired';continue;}"
    "const h=Math.floor(left/3600),m=Math.floor(left%3600/60),x=String(left%60).padStart(2,'0');"
    "el.textContent=(h?h+':'+String(m).padStart(2,'0'):m)+':'+x+' left';}}"
    "promptkitTick();setInterval(promptkitTick,1000);</script>"
)


def _clock_cell(session: Mapping[str, Any]) -> str:
    """The time-left cell: the server's figure, counted down by :data:`COUNTDOWN_SCRIPT`."""
    from promptkit.analysis.clock import format_left

    expires = session.get("cache_expires_at")
    if not isinstance(expires, float | int):
        return "<td>–</td>"
    if session.get("cache_expired"):
        text, cls = "expired", "clock expired"
    else:
        text, cls = f"{format_left(float(session.get('cache_seconds_left') or 0.0))} left", "clock"
    ttl = session.get("cache_ttl_seconds")
    title = f" title='TTL {html.escape(str(ttl))} s'" if ttl is not None else ""
    return f"<td><span class='{cls}' data-expires-at='{float(expires)!r}'{title}>{text}</span></td>"


def render_page(
    snapshot: Mapping[str, Any], *, upstream: str, log: str | None, recording: Mapping[str, Any]
) -> str:
    """The live page (HTML, refreshes itself every 2 s, no forms; one script counts the cache time left
    down each second) for a :meth:`LiveFigures.snapshot`.

    >>> page = render_page(LiveFigures(predict=False).snapshot(), upstream="https://api.openai.com",
    ...                    log="calls.jsonl", recording={"written": 0, "failures": 0, "last_error": None})
    >>> "<title>promptkit proxy</title>" in page
    True
    """
    e = html.escape
    rows = []
    for s in snapshot["sessions"]:
        breaks = "<br>".join(
            e(
                f"#{b['index']}: message {b['message']} ({b['role']}"
                + (f", {b['slot']}" if b.get("slot") else "")
                + (f" {b['key']}" if b.get("key") else "")
                + f"), {b['lost_tokens']} tokens lost"
            )
            for b in reversed(s["last_breaks"])
        )
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{e(str(v))}</td>"
                for v in (
                    s["session"],
                    s["provider"],
                    s["model"] or "",
                    s["requests"],
                    s["errors"],
                    _pct(s["reported_hit_ratio"]),
                    _pct(s["predicted_hit_ratio"]),
                )
            )
            + _clock_cell(s)
            + f"<td>{e(str(s.get('last_miss_cause') or '–'))}</td>"
            + f"<td>{breaks or '–'}</td></tr>"
        )
    totals = snapshot["totals"]
    failure = ""
    if recording.get("failures"):
        failure = (
            f'<p class="fail">RECORDING FAILED {e(str(recording["failures"]))} time(s): '
            f"{e(str(recording.get('last_error')))}</p>"
        )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><meta http-equiv='refresh' content='2'>"
        "<title>promptkit proxy</title><style>body{font-family:sans-serif;margin:1.5em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}"
        ".fail{color:#b00;font-weight:bold}.expired{color:#b00}</style></head><body>"
        f"<h1>promptkit proxy</h1><p>upstream {e(upstream)} · log {e(log or 'off')} · "
        f"{e(str(recording.get('written', 0)))} records written · {totals['requests']} requests, "
        f"{totals['errors']} errors · hit ratio reported {_pct(totals['reported_hit_ratio'])}, "
        f"predicted {_pct(totals['predicted_hit_ratio'])}</p>{failure}"
        "<table><tr><th>session</th><th>provider</th><th>model</th><th>requests</th><th>errors</th>"
        "<th>reported hit ratio</th><th>predicted hit ratio</th><th>cache time left</th><th>last miss</th>"
        "<th>last breaks (cause)</th></tr>"
        + "".join(rows)
        + "</table><p><a href='stats.json'>stats.json</a></p>"
        + COUNTDOWN_SCRIPT
        + "</body></html>"
    )
