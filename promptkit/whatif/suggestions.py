"""Suggestions: candidate transforms derived from where the cache breaks, each replayed and ranked by cost.

:func:`suggest` analyzes the records once, derives candidates (:func:`candidates`), replays each one
(:func:`promptkit.whatif.replay`) and ranks them by the measured saving in USD: a transform that adds
tokens pays for them. Candidates come from:

- **volatile values** in the stable head that change between consecutive requests of a session
  (:func:`find_volatile`, swappable: pass ``detector=``): ``normalize`` with the built-in patterns
  that explain the change, and ``move`` of the changing line (``move:regex=LABEL.*``);
- **contributors** whose output changes between adjacent turns (records with a layout): ``move`` of each
  key to ``turn-context``, and all of them at once (the re-assembly
  :func:`promptkit.assembly.audit` suggests for prompts promptkit built);
- the engine's **divergence columns**: a divergence in the tool definitions (``sort-tools``), a session
  that switches models (``pin-model``);
- the provider's cache settings, asked of its profile: requests without breakpoints where the provider
  caches nothing without them (``needs_explicit_breakpoints``: Anthropic, ``breakpoints:auto``), idle
  gaps between calls longer than the cache model's TTL that a longer lifetime bridges
  (``extended_ttl_options``: Anthropic ``ttl:1h``; ``retention_options``: OpenAI ``retention:24h``).

Finally the best positive candidates are chained (greedily, each kept only if it adds at least 5% to the
chain's saving).

>>> from promptkit.layout import RequestRecord
>>> a = RequestRecord({"messages": [{"role": "system", "content": "Rules.\\nCurrent time: 10:41"}]}, session="s", index=0)
>>> b = RequestRecord({"messages": [{"role": "system", "content": "Rules.\\nCurrent time: 10:42"}]}, session="s", index=1)
>>> [(f.pattern, f.line_regex) for f in find_volatile([a, b])]
[('times', 'Current time:.*')]
"""

from __future__ import annotations

import difflib
import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

from promptkit.layout import HEAD_SLOTS, LoadResult, RequestRecord
from promptkit.whatif.replays import WhatIf, replay
from promptkit.whatif.spec import format_transform
from promptkit.whatif.transforms import (
    BUILTIN_PATTERNS,
    Breakpoints,
    Chain,
    Move,
    Normalize,
    PinModel,
    Selector,
    SetRetention,
    SetTTL,
    SortTools,
    Transform,
    compile_pattern,
    regions,
    substitute,
    text_of,
)

if TYPE_CHECKING:  # pragma: no cover
    from promptkit.analysis.result import AnalysisResult

__all__ = ["Detector", "Suggestion", "VolatileFinding", "candidates", "find_volatile", "rank", "suggest"]

#: A suggestion joins the combined chain only if it adds at least this share to the chain's saving.
_MIN_GAIN: Final[float] = 0.05


@attrs.frozen(slots=True)
class VolatileFinding:
    """A value in the stable head that changed between two consecutive requests of a session.

    ``pattern``: the built-in pattern (:data:`~promptkit.whatif.transforms.BUILTIN_PATTERNS`) that
    explains the change, or None when none does; ``line_regex``: a regular expression for the changing
    line (its unchanged label followed by ``.*``; None when the line has no stable start); ``where``:
    ``system`` (the top-level system), ``key=K`` (a layout contributor) or ``message N``;
    ``session``/``index``: the first request where it changed; ``before``/``after``: the line in the
    request before it and in it; ``changes``: how many consecutive pairs changed it.
    """

    pattern: str | None
    line_regex: str | None
    where: str
    session: str
    index: int
    before: str
    after: str
    changes: int = 1


#: A volatile-value detector: records in, findings out (:func:`find_volatile` is the default).
Detector = Callable[[Sequence[RequestRecord]], list[VolatileFinding]]


def _head_texts(record: RequestRecord) -> dict[str, str]:
    """The texts of the stable head by where they sit (``system``, ``key=K`` or ``message N``)."""
    out: dict[str, str] = {}
    system = record.request.get("system")
    if system not in (None, "", []):
        out["system"] = text_of(system)
    messages = list(record.request.get("messages") or [])
    head, _ = regions(record)
    layout = record.layout if record.layout is not None and len(record.layout) == len(messages) else None
    for i in range(head):
        key = layout[i].key if layout is not None else None
        where = f"key={key}" if key else f"message {i}"
        text = text_of(messages[i].get("content")) if isinstance(messages[i], Mapping) else ""
        out[where] = out[where] + "\n" + text if where in out else text
    return out


def _line_regex(old: str, new: str, names: Sequence[str] = ()) -> str | None:
    """``LABEL.*`` for two versions of a line: LABEL is their common start, cut before the first match of
    the patterns ``names`` that explain the change and back to the last separator, kept when it has at
    least 3 word characters."""
    common = 0
    while common < min(len(old), len(new)) and old[common] == new[common]:
        common += 1
    for name in names:
        m = compile_pattern(name)[0].search(new)
        if m is not None:
            common = min(common, m.start())
    label = re.sub(r"[\w.:/+#-]*$", "", old[:common])  # drop the start of the changing value
    if len(re.findall(r"\w", label)) < 3:
        return None
    return re.sub(r"([.^$*+?{}\[\]\\|()])", r"\\\1", label.rstrip()) + ".*"


def _explaining_patterns(old: str, new: str) -> list[str]:
    """Built-in patterns whose placeholders make ``old`` and ``new`` equal (all of them together first)."""
    names = [
        n for n in BUILTIN_PATTERNS if compile_pattern(n)[0].search(old) or compile_pattern(n)[0].search(new)
    ]

    def norm(text: str, use: Sequence[str]) -> str:
        for n in use:
            regex, placeholder = compile_pattern(n)
            text = substitute(regex, placeholder, text)
        return text

    if not names or norm(old, names) != norm(new, names):
        return []
    needed = [
        n for n in names if norm(old, [m for m in names if m != n]) != norm(new, [m for m in names if m != n])
    ]
    return needed or names[:1]


def find_volatile(records: Sequence[RequestRecord]) -> list[VolatileFinding]:
    """The changing values of the stable head: for each pair of consecutive requests of a session, each
    changed line of a head text (compared by where it sits), explained by a built-in pattern when one
    does. Duplicates (same pattern, line regex and place) are reported once, at their first request,
    with the number of changes; most frequent first.

    This is promptkit's own small detector; :func:`suggest` takes any function of the same shape.
    """
    by_session: dict[str, list[RequestRecord]] = {}
    for r in records:
        by_session.setdefault(r.session, []).append(r)
    seen: dict[tuple[str | None, str | None, str], int] = {}
    out: list[VolatileFinding] = []
    for session, items in by_session.items():
        items = sorted(items, key=lambda r: r.index)
        previous: dict[str, str] | None = None
        for record in items:
            texts = _head_texts(record)
            if previous is not None:
                for where, text in texts.items():
                    old = previous.get(where)
                    if old is None or old == text:
                        continue
                    a, b = old.split("\n"), text.split("\n")
                    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(
                        None, a, b, autojunk=False
                    ).get_opcodes():
                        if tag != "replace":
                            continue
                        for old_line, new_line in zip(a[i1:i2], b[j1:j2], strict=False):
                            names = _explaining_patterns(old_line, new_line)
                            regex = _line_regex(old_line, new_line, names)
                            for name in names or [None]:  # type: ignore[list-item]
                                key = (name, regex, where)
                                if name is None and regex is None:
                                    continue
                                if key in seen:
                                    out[seen[key]] = attrs.evolve(
                                        out[seen[key]], changes=out[seen[key]].changes + 1
                                    )
                                    continue
                                seen[key] = len(out)
                                out.append(
                                    VolatileFinding(
                                        name, regex, where, session, record.index, old_line, new_line
                                    )
                                )
            previous = texts
    return sorted(out, key=lambda f: -f.changes)


def _changing_keys(records: Sequence[RequestRecord]) -> list[str]:
    """Contributor keys of the stable head whose text changes between adjacent requests of a session."""
    counts: Counter[str] = Counter()
    by_session: dict[str, list[RequestRecord]] = {}
    for r in records:
        by_session.setdefault(r.session, []).append(r)
    for items in by_session.values():
        previous: dict[str, str] | None = None
        for record in sorted(items, key=lambda r: r.index):
            texts = {k[4:]: v for k, v in _head_texts(record).items() if k.startswith("key=")}
            if previous is not None:
                counts.update(k for k, v in texts.items() if k in previous and previous[k] != v)
            previous = texts
    return [k for k, _ in counts.most_common()]


def _gaps(records: Sequence[RequestRecord]) -> list[float]:
    by_session: dict[str, list[float]] = {}
    for r in records:
        if r.timestamp is not None:
            by_session.setdefault(r.session, []).append(r.timestamp)
    out: list[float] = []
    for times in by_session.values():
        times.sort()
        out.extend(b - a for a, b in itertools.pairwise(times))
    return out


def _reordered_tools(records: Sequence[RequestRecord]) -> int:
    """Requests whose tool definitions differ from the previous request of their session only in order
    (of the tools or of JSON keys)."""
    import json

    from promptkit.whatif.transforms import sorted_json, tool_name

    def canonical(tools: Any) -> str:
        items = sorted((sorted_json(t) for t in tools), key=tool_name) if isinstance(tools, list) else tools
        return json.dumps(items, sort_keys=True, default=str)

    count = 0
    previous: dict[str, Any] = {}
    for r in sorted(records, key=lambda r: (r.session, r.index)):
        tools = r.request.get("tools")
        prev = previous.get(r.session)
        if prev is not None and tools and prev != tools and canonical(prev) == canonical(tools):
            count += 1
        previous[r.session] = tools
    return count


def _has_cache_control(obj: Any) -> bool:
    if isinstance(obj, Mapping):
        return "cache_control" in obj or any(_has_cache_control(v) for v in obj.values())
    if isinstance(obj, list):
        return any(_has_cache_control(v) for v in obj)
    return False


#: How a candidate is proposed: the transform and why (the first reason for a transform is kept).
_Add = Callable[[Transform, str], None]


def candidates(
    records: Sequence[RequestRecord],
    before: AnalysisResult,
    *,
    detector: Detector = find_volatile,
    max_moves: int = 4,
) -> list[tuple[Transform, str]]:
    """Candidate transforms and why each is proposed (see the module docstring). ``before`` is the
    analysis of ``records`` (its divergence columns say where the cache broke); ``max_moves`` bounds
    the changing lines proposed for a move (the most frequently changing first)."""
    out: dict[str, tuple[Transform, str]] = {}

    def add(t: Transform, why: str) -> None:
        out.setdefault(format_transform(t), (t, why))

    _volatile_candidates(detector(records), add, max_moves)
    _head_break_candidates(records, before, add)
    _divergence_candidates(records, before, add)
    _cache_setting_candidates(records, add)
    return list(out.values())


def _volatile_candidates(findings: Sequence[VolatileFinding], add: _Add, max_moves: int) -> None:
    """``normalize`` with the patterns that explain the volatile values, ``move`` of their lines."""
    named = sorted({f.pattern for f in findings if f.pattern is not None})
    if named:
        examples = "; ".join(
            f"{f.where}: {changed_pair(f.before, f.after)}" for f in findings[:2] if f.pattern is not None
        )
        add(
            Normalize(tuple(named)),
            f"volatile values ({', '.join(named)}) change in the stable head, e.g. {examples}",
        )
    for f in [f for f in findings if f.line_regex is not None][:max_moves]:
        if f.line_regex is not None:
            add(
                Move(Selector(regex=f.line_regex)),
                f"a line of the stable head ({f.where}) changes {f.changes} time(s), first at {f.session}#{f.index}: "
                f"{f.after.strip()[:60]!r}",
            )


def changed_pair(before: str, after: str, width: int = 60) -> str:
    """``'before' -> 'after'`` cut to ``width`` characters each around where they first differ (with a
    few characters of context, ``…`` where cut), so the two sides never read the same.

    >>> changed_pair("Build log of a long run, started at 2026-12-03T09:45:00Z", "Build log of a long run, started at 2026-12-03T09:46:10Z", 20)
    "'…6-12-03T09:45:00Z' -> '…6-12-03T09:46:10Z'"
    """
    a, b = before.strip(), after.strip()
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    begin = max(0, start - 12)

    def cut(text: str) -> str:
        part = text[begin : begin + width]
        return ("…" if begin else "") + part + ("…" if begin + width < len(text) else "")

    return f"{cut(a)!r} -> {cut(b)!r}"


def _head_break_candidates(records: Sequence[RequestRecord], before: AnalysisResult, add: _Add) -> None:
    """``move`` of the stable head's contributors where the cache broke (most tokens lost first) and
    of those that change between adjacent turns, and all of the latter at once."""
    import polars as pl

    frame = before.requests
    if frame.height:
        breaks = (
            frame.filter(
                pl.col("divergence_anchor").is_in(sorted(HEAD_SLOTS)) & pl.col("divergence_key").is_not_null()
            )
            .group_by("divergence_key")
            .agg(
                pl.len().alias("n"),
                (pl.col("prompt_tokens") - pl.col("predicted_cached_tokens")).sum().alias("lost"),
            )
            .sort(["lost", "divergence_key"], descending=[True, False])
        )
        for key, n, lost in breaks.iter_rows():
            add(
                Move(Selector(key=key)),
                f"{n} request(s) break the cache at contributor {key!r} before the history ({lost:,} tokens not cached)",
            )
    keys = _changing_keys(records)
    for key in keys:
        add(Move(Selector(key=key)), f"contributor {key!r} changes between adjacent turns before the history")
    if len(keys) > 1:
        add(
            Chain(tuple(Move(Selector(key=k)) for k in keys)),
            f"re-assemble with every changing contributor in turn-context ({', '.join(keys)}), as audit suggests",
        )


def _divergence_candidates(records: Sequence[RequestRecord], before: AnalysisResult, add: _Add) -> None:
    """``sort-tools`` where the tool definitions diverge, ``pin-model`` where sessions switch models."""
    import polars as pl

    frame = before.requests
    if not frame.height:
        return
    tools = frame.filter(pl.col("divergence_role") == "tools").height
    reordered = _reordered_tools(records)
    if tools or reordered:
        add(
            SortTools(),
            f"{max(tools, reordered)} request(s) diverge in the tool definitions or send them in another order",
        )
    per_session = frame.group_by("session").agg(pl.col("model").drop_nulls().n_unique().alias("n"))
    switching = per_session.filter(pl.col("n") > 1).height
    if switching:
        common = Counter(m for m in frame["model"].to_list() if m is not None).most_common(1)[0][0]
        add(PinModel(common), f"{switching} session(s) switch models; the most used is {common}")


def _cache_setting_candidates(records: Sequence[RequestRecord], add: _Add) -> None:
    """The cache settings the providers of ``records`` offer, asked of their profiles: breakpoints
    where the provider caches nothing without them (``needs_explicit_breakpoints``), a longer TTL
    (``extended_ttl_options``) or retention (``retention_options``) where idle gaps between calls
    outlive the cache model's TTL but not the longer lifetime."""
    from promptkit.providers.registry import available_providers

    profiles = available_providers()
    gaps = _gaps(records)
    for name in sorted({r.provider for r in records if r.provider in profiles}):
        profile = profiles[name]
        explicit = profile.needs_explicit_breakpoints
        marked = any(_has_cache_control(r.request) for r in records if r.provider == name)
        if explicit and not marked:
            add(Breakpoints(), f"requests to {name} without cache_control breakpoints")
        default = profile.new_cache_model().ttl
        if default is None:  # entries never expire: no longer lifetime helps
            continue
        for option, seconds in profile.extended_ttl_options:
            long_gaps = sum(1 for g in gaps if default < g <= seconds)
            if long_gaps:
                ttl: Transform = (
                    SetTTL(option) if marked or not explicit else Chain((Breakpoints(), SetTTL(option)))
                )
                add(
                    ttl,
                    f"{long_gaps} gap(s) between calls last longer than {_duration(default)} and at most {_duration(seconds)}",
                )
        for option, seconds in profile.retention_options:
            long_gaps = sum(1 for g in gaps if default < g <= seconds)
            if long_gaps:
                add(
                    SetRetention(option),
                    f"{long_gaps} gap(s) between calls last longer than {_duration(default)} and at most {_duration(seconds)}",
                )


def _duration(seconds: float) -> str:
    """A lifetime in words.

    >>> _duration(300.0), _duration(3600.0), _duration(86400.0), _duration(90.0)
    ('5 minutes', '1 hour', '24 hours', '90 seconds')
    """
    if seconds == 3600:
        return "1 hour"
    if seconds % 3600 == 0:
        return f"{seconds / 3600:g} hours"
    if seconds % 60 == 0:
        return f"{seconds / 60:g} minutes"
    return f"{seconds:g} seconds"


def _ttl_window(name: str) -> tuple[float, float] | None:
    """The idle gaps a breakpoint TTL called ``name`` bridges that the default does not: (the cache
    model's TTL, the option's), from the profile that offers it; None when no profile does."""
    from promptkit.providers.registry import available_providers

    for profile in available_providers().values():
        for option, seconds in profile.extended_ttl_options:
            default = profile.new_cache_model().ttl
            if option == name and default is not None:
                return float(default), seconds
    return None


@attrs.frozen(slots=True)
class Suggestion:
    """A candidate transform, replayed: ``transform`` and its ``spec`` (for ``--transform``), ``reason``
    (why it was proposed), the overall figures before and after, and the :class:`~promptkit.whatif.WhatIf`."""

    transform: Transform
    spec: str
    reason: str
    before_hit_ratio: float | None
    after_hit_ratio: float | None
    before_prompt_tokens: int
    after_prompt_tokens: int
    before_cost_usd: float
    after_cost_usd: float
    whatif: WhatIf = attrs.field(repr=False, eq=False)
    priced: bool = True
    tradeoff: str | None = None

    @property
    def saving_usd(self) -> float:
        """``before_cost_usd - after_cost_usd`` (negative: the transform costs more; 0 unpriced)."""
        return self.before_cost_usd - self.after_cost_usd

    @property
    def hit_gain(self) -> float:
        """The hit ratio after minus before (0 when either is unknown)."""
        if self.before_hit_ratio is None or self.after_hit_ratio is None:
            return 0.0
        return self.after_hit_ratio - self.before_hit_ratio

    @property
    def is_cost(self) -> bool:
        """Whether the replay measured it losing money (shown apart, as a cost with its trade-off)."""
        return self.priced and self.saving_usd < -1e-12

    def specs(self) -> list[str]:
        """The ``--transform`` specs that apply it: every change of the set, in order."""
        return self.spec.split(" ; ")

    def command(self, paths: str = "") -> str:
        """The ``promptkit whatif`` command line that replays it (``paths`` as the user gave them)."""
        from shlex import quote

        head = f"promptkit whatif {paths}".rstrip()
        return head + "".join(f" --transform {quote(p)}" for p in self.specs())

    def to_json(self) -> dict[str, Any]:
        """The suggestion as plain JSON values (what ``promptkit whatif --suggest --json`` prints)."""
        return {
            "transform": self.transform.describe(),
            "spec": self.spec,
            "reason": self.reason,
            "before_hit_ratio": self.before_hit_ratio,
            "after_hit_ratio": self.after_hit_ratio,
            "before_prompt_tokens": self.before_prompt_tokens,
            "after_prompt_tokens": self.after_prompt_tokens,
            "before_cost_usd": self.before_cost_usd,
            "after_cost_usd": self.after_cost_usd,
            "saving_usd": self.saving_usd if self.priced else None,
            "priced": self.priced,
            "is_cost": self.is_cost,
            "tradeoff": self.tradeoff,
            "specs": self.specs(),
        }


def _parts(t: Transform) -> list[Transform]:
    return [p for q in t.transforms for p in _parts(q)] if isinstance(t, Chain) else [t]


def _tradeoff(t: Transform, w: WhatIf, gaps: Sequence[float]) -> str:
    """What a transform that loses money on this log trades, in words."""
    o = w.overall
    tokens = int(o["after_prompt_tokens"] or 0) - int(o["before_prompt_tokens"] or 0)
    ttls = [p for p in _parts(t) if isinstance(p, SetTTL)]
    if ttls:
        window = _ttl_window(ttls[0].ttl)
        low, high = window if window is not None else (0.0, 0.0)
        fit = sum(1 for g in gaps if low < g <= high)
        return (
            "a 1-hour cache write costs 2x the input price instead of 1.25x (platform.claude.com/docs/en/"
            "build-with-claude/prompt-caching): it pays only when calls come back after an idle gap of "
            f"{_duration(low)} to {_duration(high)} and read what was written; this log has {fit} such "
            f"gap(s) in {len(gaps)}, too few to pay for the dearer writes"
        )
    if any(isinstance(p, Breakpoints) for p in _parts(t)):
        return (
            "Anthropic bills a cache write at 1.25x the input price: breakpoints pay only when later calls "
            "read the written prefix within its TTL, which this log's calls do too rarely"
        )
    if tokens > 0:
        return f"it adds {tokens:,} prompt tokens, which cost more than the extra cache hits save"
    before, after = o["before_hit_ratio"], o["after_hit_ratio"]
    hits = "n/a" if before is None or after is None else f"{before:.1%} → {after:.1%}"
    extra = (o["after_cost_usd"] or 0.0) - (o["before_cost_usd"] or 0.0)
    return (
        f"it moves where the cache breaks without more hits (hit ratio {hits}), and the replayed calls "
        f"cost {format_usd(extra)} USD more"
    )


def format_usd(value: float) -> str:
    """A USD amount as the tables print it: 4 decimals, or 3 significant digits when smaller.

    >>> format_usd(0.10507), format_usd(-0.0000161)
    ('0.1051', '-1.61e-05')
    """
    return f"{value:.4f}" if value == 0 or abs(value) >= 5e-5 else f"{value:.2e}"


def rank(found: Iterable[Suggestion]) -> list[Suggestion]:
    """Suggestions in the order they are shown: those that save (or cost nothing) first, largest
    measured saving first (then the larger hit-ratio gain); those that lose money after them, least
    costly first. A suggestion with a negative saving is never ranked above one with a positive saving.

    >>> rank([])
    []
    """
    items = list(found)
    return sorted(items, key=lambda s: (s.is_cost, -s.saving_usd, -s.hit_gain, s.spec))


def _suggestion(t: Transform, why: str, w: WhatIf, gaps: Sequence[float] = ()) -> Suggestion:
    o = w.overall
    priced = o["before_cost_usd"] is not None and o["after_cost_usd"] is not None
    saving = (o["before_cost_usd"] or 0.0) - (o["after_cost_usd"] or 0.0)
    return Suggestion(
        transform=t,
        spec=format_transform(t),
        reason=why,
        before_hit_ratio=o["before_hit_ratio"],
        after_hit_ratio=o["after_hit_ratio"],
        before_prompt_tokens=int(o["before_prompt_tokens"] or 0),
        after_prompt_tokens=int(o["after_prompt_tokens"] or 0),
        before_cost_usd=float(o["before_cost_usd"] or 0.0),
        after_cost_usd=float(o["after_cost_usd"] or 0.0),
        whatif=w,
        priced=priced,
        tradeoff=_tradeoff(t, w, gaps) if priced and saving < -1e-12 else None,
    )


def suggest(
    records: LoadResult | Iterable[RequestRecord],
    *,
    detector: Detector = find_volatile,
    prices: Any = None,
    model: str | None = None,
    combine: bool = True,
    **analysis_options: Any,
) -> list[Suggestion]:
    """Candidate transforms for ``records``, each replayed, ranked by :func:`rank`: best measured saving
    (USD) first, and those that lose money after every one that saves, each with its ``tradeoff``.

    ``detector`` finds volatile values (default :func:`find_volatile`); ``prices`` / ``model`` price the
    calls; ``analysis_options`` go to :func:`promptkit.analysis.analyze_requests`. With ``combine`` the
    candidates that save money are also chained greedily (best first, each kept only if it adds at least
    5% to the chain's saving) and the chain is one more suggestion.

    Example::

        >>> rules = "Answer in English. Cite the file and line of every claim. " * 30
        >>> records = [RequestRecord({"model": "deepseek-chat", "messages": [
        ...     {"role": "system", "content": f"Current time: 2026-01-01 10:0{i}\\n{rules}"},
        ...     {"role": "user", "content": f"question {i}"}]}, session="s", index=i, provider="deepseek")
        ...     for i in range(4)]
        >>> best = suggest(records)[0]
        >>> best.spec, f"{best.before_hit_ratio:.0%} -> {best.after_hit_ratio:.0%}"
        ('normalize:timestamps', '0% -> 71%')
    """
    from promptkit.analysis.api import analyze_requests

    if isinstance(records, LoadResult):
        loaded: LoadResult | None = records
        items = list(records.records)
    else:
        loaded, items = None, list(records)
    before = analyze_requests(loaded if loaded is not None else items, **analysis_options)
    source: LoadResult | list[RequestRecord] = loaded if loaded is not None else items
    found: list[Suggestion] = []
    gaps = _gaps(items)
    for t, why in candidates(items, before, detector=detector):
        w = replay(source, [t], prices=prices, model=model, before=before, **analysis_options)
        found.append(_suggestion(t, why, w, gaps))
    found = rank(found)
    positive = [s for s in found if not s.is_cost and (s.saving_usd > 0 or (not s.priced and s.hit_gain > 0))]
    if combine and len(positive) > 1:
        chain: list[Transform] = [positive[0].transform]
        best = positive[0]
        for s in positive[1:]:
            trial = [*chain, s.transform]
            w = replay(source, trial, prices=prices, model=model, before=before, **analysis_options)
            candidate = _suggestion(Chain(tuple(trial)), "", w, gaps)
            better = (
                candidate.after_cost_usd < best.after_cost_usd - _MIN_GAIN * best.saving_usd
                if best.priced
                else candidate.hit_gain > best.hit_gain * (1 + _MIN_GAIN)
            )
            if better:
                chain, best = trial, candidate
        if len(chain) > 1:
            combined = Chain(tuple(chain))
            found.append(
                _suggestion(combined, f"the {len(chain)} best suggestions together", best.whatif, gaps)
            )
            found = rank(found)
    return found
