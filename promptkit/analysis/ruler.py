"""Ruler mode: the provider's own counts as the ruler of every position in a prompt.

A call's reported prompt tokens are the exact offset, in the provider's units, of the end of its
prompt; Anthropic's usage also gives the offset of the call's last cache breakpoint: ``cache reads +
cache writes`` (the tokens after it are ``input_tokens``). Later calls that share the prompt up to such
a point share its offset. So each call carries **anchors**: pairs ``(local, provider)`` of the same
position counted by the local tokenizer and by the provider. A position between anchors is placed by
the local tokenizer's proportions (linear interpolation between the two anchors around it); a position
that *is* an anchor is exact.

Where the local tokenizer is the provider's and its count equals the reported one, positions stay as
they are (``exact``). Where it is not (Claude's tokenizer is not public: the local count is a cl100k
estimate), the engine converts every position of a call (prompt length, shared prefix, predicted
cached tokens, divergence...) to provider units with :meth:`Ruler.to_provider`, and says in the
``position_basis`` column how the predicted cached point was placed: ``exact`` (on an anchor),
``interpolated`` (between anchors) or ``local`` (no anchor: the log has no usage for it or before it).

Anthropic's documentation gives the invariants the anchors rely on: ``input_tokens`` counts the tokens
after the last cache breakpoint, ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` the
ones before it ("Tracking cache performance",
https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching#tracking-cache-performance), so
``reads + writes`` is the breakpoint's offset, and the next call that keeps that prefix reads it:
``reads(n) = reads(n-1) + writes(n-1)``.

>>> r = Ruler.start().extended([(1000, 1100), (1003, 1104)])
>>> r.to_provider(0), r.to_provider(1000), r.to_provider(500)
((0, 'exact'), (1100, 'exact'), (550, 'interpolated'))
>>> later = r.inherited(1000).extended([(2000, 2250)])  # shares the first 1000 local tokens
>>> later.to_provider(1000), later.to_provider(1500)
((1100, 'exact'), (1675, 'interpolated'))
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

import attrs

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from promptkit.tokens.cache_models import CacheModel

__all__ = [
    "POSITION_BASES",
    "POSITION_COLUMNS",
    "Ruler",
    "local_basis",
    "own_anchors",
    "place_head",
    "place_row",
    "reads_from_outside",
    "row_to_provider",
    "ruler_of",
    "stays_local",
    "usage_contradictions",
]

#: The values of the ``position_basis`` column, most certain first.
POSITION_BASES: Final[tuple[str, ...]] = ("exact", "interpolated", "local")


@attrs.frozen(slots=True)
class Ruler:
    """Anchors ``(local, provider)``, both strictly increasing (``local[0] == provider[0] == 0``)."""

    local: tuple[int, ...] = (0,)
    provider: tuple[int, ...] = (0,)

    @classmethod
    def start(cls) -> Ruler:
        """A ruler with the one anchor every prompt has: its start."""
        return cls()

    @property
    def anchored(self) -> bool:
        """Whether the ruler has an anchor past the start (some provider count placed it)."""
        return len(self.local) > 1

    def inherited(self, shared: int) -> Ruler:
        """The anchors a later prompt keeps when it shares this one's first ``shared`` local tokens."""
        k = bisect.bisect_right(self.local, shared)
        return Ruler(self.local[:k], self.provider[:k])

    def extended(self, points: Iterable[tuple[int, int]]) -> Ruler:
        """This ruler with ``points`` added. A new point wins over an old one it contradicts (an old
        anchor at or after a new one in either unit is dropped): the newest count is the truth."""
        new = sorted(set(points))
        last = (self.local[-1], self.provider[-1])
        if all(0 < x and 0 < y for x, y in new) and all(
            x > a and y > b for (a, b), (x, y) in zip([last, *new], new, strict=False)
        ):
            # perf: each point beyond the last anchor in both units (a session's next prompt end): they
            # contradict none and are appended (a session's ruler grows by a call's anchors, and
            # adding them costs no pass over the earlier ones)
            return Ruler(self.local + tuple(x for x, _ in new), self.provider + tuple(y for _, y in new))
        local, provider = list(self.local), list(self.provider)
        for x, y in new:
            if x <= 0 or y <= 0:
                continue
            keep = [i for i in range(len(local)) if (local[i] < x and provider[i] < y) or local[i] > x]
            local = [local[i] for i in keep]
            provider = [provider[i] for i in keep]
            i = bisect.bisect_left(local, x)
            local.insert(i, x)
            provider.insert(i, y)
            # anchors after the new one that are not above it in provider units contradict it
            j = i + 1
            while j < len(local) and provider[j] <= y:
                del local[j], provider[j]
        return Ruler(tuple(local), tuple(provider))

    def to_provider(self, position: int) -> tuple[int, str]:
        """``position`` (local tokens) in provider units, and how it was placed (``exact`` on an
        anchor, ``interpolated`` between two, ``local`` past the last anchor or with none)."""
        if position <= 0:
            return max(position, 0), "exact"
        i = bisect.bisect_left(self.local, position)
        if i < len(self.local) and self.local[i] == position:
            return self.provider[i], "exact"
        if i == len(self.local):  # past the last anchor: local units from there on
            return self.provider[-1] + position - self.local[
                -1
            ], "local" if not self.anchored else "interpolated"
        x0, x1, y0, y1 = self.local[i - 1], self.local[i], self.provider[i - 1], self.provider[i]
        return y0 + round((position - x0) * (y1 - y0) / (x1 - x0)), "interpolated"


#: Request columns that are positions in the call's own prompt (converted to provider units).
POSITION_COLUMNS: Final[tuple[str, ...]] = (
    "prompt_tokens",
    "prefix_tokens",
    "divergence_token",
    "unexpired_cached_tokens",
    "unevicted_cached_tokens",
    "model_switch_tokens",
    "source_stored_tokens",
)


def own_anchors(
    prompt_len: int, breakpoint_end: int | None, usage: object | None, answer_end: int | None = None
) -> list[tuple[int, int]]:
    """The anchors a call's own usage gives: the end of its prompt (``prompt_len`` local tokens =
    reported prompt tokens) and, where the usage counts cache reads and writes (Anthropic), its last
    breakpoint (``breakpoint_end`` local tokens = reads + writes). A usage that contradicts itself
    (reads + writes above the prompt) gives only the prompt's end. ``answer_end``: where the cache
    keeps the generated answer too (the entry covers prompt + answer: OpenAI, DeepSeek), the local end
    of the answer = reported prompt + reported completion tokens (reasoning included: the next request
    sends the reasoning back, and the provider's reads never pass that sum).

    >>> from promptkit.layout import Usage
    >>> own_anchors(950, 947, Usage(prompt_tokens=1000, cached_tokens=600, cache_write_tokens=396))
    [(950, 1000), (947, 996)]
    >>> own_anchors(950, None, Usage(prompt_tokens=1000, completion_tokens=300), answer_end=990)
    [(950, 1000), (990, 1300)]
    """
    reported = getattr(usage, "prompt_tokens", None)
    if reported is None or reported <= 0 or prompt_len <= 0:
        return []
    points = [(prompt_len, int(reported))]
    reads, writes = getattr(usage, "cached_tokens", None), getattr(usage, "cache_write_tokens", None)
    if breakpoint_end is not None and 0 < breakpoint_end < prompt_len and writes is not None:
        mark = int(reads or 0) + int(writes)
        if 0 < mark < reported:
            points.append((breakpoint_end, mark))
        elif mark == reported:  # nothing after the breakpoint: it is the prompt's end
            points = [(breakpoint_end, mark)]
    answer = getattr(usage, "completion_tokens", None)
    if answer_end is not None and answer_end > prompt_len and isinstance(answer, int) and answer > 0:
        points.append((answer_end, int(reported) + answer))
    return points


def row_to_provider(row: dict[str, object], ruler: Ruler, reported_prompt: int | None = None) -> str:
    """Convert ``row``'s positions (:data:`POSITION_COLUMNS`, the predicted cached and written tokens)
    from local to provider units in place; return how the predicted cached point was placed."""
    cached = int(row["predicted_cached_tokens"])  # type: ignore[call-overload]
    new_cached, basis = ruler.to_provider(cached)
    for column in POSITION_COLUMNS:
        value = row.get(column)
        if isinstance(value, int):
            row[column] = ruler.to_provider(value)[0]
    written = row.get("predicted_cache_write_tokens")
    if isinstance(written, int) and written > 0:
        new_written = max(0, ruler.to_provider(cached + written)[0] - new_cached)
        written_1h = row.get("predicted_cache_write_1h_tokens")
        if isinstance(written_1h, int):
            row["predicted_cache_write_1h_tokens"] = round(written_1h * new_written / written)
        row["predicted_cache_write_tokens"] = new_written
    row["predicted_cached_tokens"] = new_cached
    if isinstance(reported_prompt, int):  # the prompt of a call with usage is its reported prompt
        row["prompt_tokens"] = reported_prompt
    prompt = row["prompt_tokens"]
    row["hit_ratio"] = new_cached / prompt if isinstance(prompt, int) and prompt > 0 else None
    return basis


def usage_contradictions(usage: object) -> list[str]:
    """What is wrong with a call's usage, one reason per contradiction (empty when nothing is): a
    negative count; cache reads and writes adding up to more than the prompt (reads + writes + the
    uncached rest = the prompt). The analysis reports each as a problem naming the file, line and field
    and keeps the counts as reported: never corrected. (Reads larger than anything the log's earlier
    calls could have written are no contradiction: a prefix another session or a retried request wrote,
    which the analysis counts in a note, :func:`reads_from_outside`.)

    >>> from promptkit.layout import Usage
    >>> usage_contradictions(Usage(prompt_tokens=100, cached_tokens=80, cache_write_tokens=30))
    ['usage.cached_tokens + usage.cache_write_tokens: 80 + 30 = 110 exceed usage.prompt_tokens 100']
    """
    fields = (
        "prompt_tokens",
        "completion_tokens",
        "cached_tokens",
        "cache_write_tokens",
        "cache_write_1h_tokens",
    )
    values = {f: getattr(usage, f, None) for f in fields}
    out = [f"usage.{f}: {v} is negative" for f, v in values.items() if isinstance(v, int) and v < 0]
    if out:
        return out
    prompt, reads, writes = (
        values["prompt_tokens"],
        values["cached_tokens"] or 0,
        values["cache_write_tokens"] or 0,
    )
    if isinstance(prompt, int) and reads + writes > prompt:
        parts = ["usage.cached_tokens", "usage.cache_write_tokens"] if writes else ["usage.cached_tokens"]
        shown = f"{reads} + {writes} = {reads + writes}" if writes else f"{reads}"
        out.append(f"{' + '.join(parts)}: {shown} exceed usage.prompt_tokens {prompt}")
    return out


def reads_from_outside(requests: pl.DataFrame) -> pl.DataFrame:
    """The calls of an analysis' ``requests`` frame (in the order they were analyzed) whose reported
    cache reads are larger than anything the log's earlier calls could have written: more than every
    earlier call's reported prompt plus its answer (a provider stores at most the prompt, and some the
    answer too), or any read on the log's first call. Such a read is no load problem: the prefix was
    written by a call the log does not hold (another session of the account, a retried request), and
    the reported figures are kept as they are. Columns ``session, index, reported_cached_tokens`` and
    ``written_before`` (the most an earlier call could have written; null on the first call).

    >>> import polars as pl
    >>> q = pl.DataFrame({"session": ["a", "a", "b"], "index": [0, 1, 0],
    ...                   "reported_prompt_tokens": [500, 900, 700], "reported_completion_tokens": [20, 20, 5],
    ...                   "reported_cached_tokens": [0, 600, 520]})
    >>> reads_from_outside(q).rows()
    [('a', 1, 600, 520)]
    """
    import polars as pl

    written = (
        pl.col("reported_prompt_tokens").fill_null(0) + pl.col("reported_completion_tokens").fill_null(0)
    ).cum_max()
    return (
        requests.select(
            "session",
            "index",
            "reported_cached_tokens",
            written.shift(1).alias("written_before"),
        )
        .filter(
            (pl.col("reported_cached_tokens").fill_null(0) > 0)
            & (pl.col("reported_cached_tokens") > pl.col("written_before").fill_null(0))
        )
    )


# ---------------------------------------------------------------------------------------------------
# placing a request's row (stage 2 of an analysis in ruler mode)


#: The ruler of a prompt with no anchor past its start (immutable: shared by every such prompt).
_NO_ANCHOR: Final = Ruler.start()


def ruler_of(
    rulers: dict[str, Ruler],
    source_id: str,
    src_id: str | None,
    prompt_len: int,
    shared: int,
    plan: Any,
    usage: Any,
) -> Ruler:
    """The request's ruler (kept in ``rulers`` under ``source_id``): the anchors it shares with its
    source (its first ``shared`` local tokens are the source's) and its own usage's."""
    inherited = rulers.get(src_id) if src_id is not None else None
    end = max((e.length for e in plan.entries), default=None)
    if end is not None and end > prompt_len:  # the entry covers the answer: its end is an anchor too
        points = own_anchors(prompt_len, None, usage, end)
    else:
        points = own_anchors(prompt_len, end, usage)
    if not points and (inherited is None or not inherited.anchored):
        ruler = _NO_ANCHOR  # perf: nothing to inherit or add: the one ruler of no anchor, not a new one
    else:
        ruler = (inherited.inherited(shared) if inherited is not None else _NO_ANCHOR).extended(points)
    rulers[source_id] = ruler
    return ruler


def stays_local(ruler: Ruler, usage: Any, head_breakpoint: int | None) -> bool:
    """Whether a request's positions stay its local ones: no anchor (a call without usage, read from
    none with one) and no reported prompt or marked head to place, so every position is its own
    (:meth:`Ruler.to_provider`) and the row only says how they were placed (:func:`local_basis`)."""
    return (
        not ruler.anchored
        and not isinstance(getattr(usage, "prompt_tokens", None), int)
        and head_breakpoint is None
    )


def local_basis(predicted_cached: int) -> str:
    """The position basis of a row whose positions stay local: ``local`` where something was read (the
    read's end is the local tokenizer's count), ``exact`` where nothing was."""
    return "local" if predicted_cached > 0 else "exact"


def place_row(
    row: dict[str, Any],
    ruler: Ruler,
    rulers: dict[str, Ruler],
    source_id: str,
    src_id: str | None,
    plan: Any,
    usage: Any,
    model: CacheModel | None = None,
    head_breakpoint: int | None = None,
) -> None:
    """Ruler mode (:mod:`promptkit.analysis.ruler`): convert the request's positions to provider units
    by its ``ruler`` (:func:`ruler_of`: the anchors it shares with its source and its own usage's; one
    that stays local, :func:`stays_local`, is the caller's: only the basis changes). ``head_breakpoint``:
    the local end of an opaque head that ends in a breakpoint (:func:`place_head`)."""
    reported = getattr(usage, "prompt_tokens", None)
    local_prefix, local_cached = int(row["prefix_tokens"] or 0), int(row["predicted_cached_tokens"])
    # the reads without expiry or eviction that equal the read: the same point, ruled the same way below
    same = [c for c in ("unexpired_cached_tokens", "unevicted_cached_tokens") if row.get(c) == local_cached]
    row["head_end_tokens"] = ruler.to_provider(int(row["head_end_tokens"]))[0]
    row["position_basis"] = row_to_provider(row, ruler, reported)
    if (
        model is not None
        and plan.lookup_points is None
        and local_cached > 0
        and model.cached_tokens(plan, local_prefix) == local_cached
    ):
        # an any-prefix cache's rule (minimum, unit) applies in the provider's units: to the shared
        # prefix placed by the ruler, not to the local count
        prompt = int(row["prompt_tokens"])
        cached = model.cached_tokens(attrs.evolve(plan, prompt_len=prompt), int(row["prefix_tokens"] or 0))
        row["predicted_cached_tokens"] = cached
        for column in same:  # nothing expired or was evicted: not a loss of the rounding's difference
            row[column] = cached
        row["hit_ratio"] = cached / prompt if prompt > 0 else None
        row["position_basis"] = ruler.to_provider(local_prefix)[1]  # the rule's input was placed so
    if head_breakpoint is not None:
        place_head(row, rulers, source_id, src_id, usage, head_breakpoint, local_cached)


def place_head(
    row: dict[str, Any],
    rulers: dict[str, Ruler],
    source_id: str,
    src_id: str | None,
    usage: Any,
    head: int,
    local_cached: int,
) -> None:
    """Ruler mode for a head that ends in a breakpoint the log does not show (Claude Code's system
    prompt: :func:`~promptkit.formats.opaque_head.opaque_head_breakpoint`), at local position ``head``.

    - A read predicted at the head (after a compaction) is a position every earlier call of the head
      shares: without an anchor there it is placed by the proportions of the call it read from, not by
      this call's own prompt (whose part after the head the log may not show, as Claude Code's
      re-attached files after a compaction), and never past the head's own length: its placeholder
      tokens are the provider's count on the call the head was estimated on (a compaction sub-agent,
      sent the whole conversation, has proportions that the transcript's hidden parts stretch).
    - The call's reported reads mark where the head's breakpoint is, in the provider's units, for the
      calls after it, when they landed on it: the read was predicted at the head, or the reads fell back
      into the head from further on (``head_changed``), not after a change of the tools the log shows.
    """
    reads = getattr(usage, "cached_tokens", None)
    source = rulers.get(src_id) if src_id is not None else None
    if local_cached == head and row["position_basis"] != "exact" and source is not None:
        own = row["predicted_cached_tokens"]  # the head placed by this call's own anchors
        placed, basis = source.to_provider(head)
        if basis != "exact" and placed > head:
            # the head's placeholder tokens were counted in the provider's units (its reported prompt less
            # the rest, on the call they were estimated on): the head ends there at the latest, wherever
            # the proportions of a call whose prompt the log shows less of would stretch it
            placed, basis = head, "interpolated"
        placed = min(placed, own)  # never past what this call's own reported prompt allows
        for column in ("head_end_tokens", *POSITION_COLUMNS):  # the same point, placed the same way
            if row.get(column) == own:
                row[column] = placed
        row["predicted_cached_tokens"], row["position_basis"] = placed, basis
        prompt = row["prompt_tokens"]
        row["hit_ratio"] = placed / prompt if isinstance(prompt, int) and prompt > 0 else None
    if not isinstance(reads, int) or reads <= 0 or local_cached < head:
        return
    events = str(row.get("log_events") or "").split(",")
    fell_back = (
        local_cached > head
        and reads < int(row["predicted_cached_tokens"])
        and reads <= int(row["head_end_tokens"])
        and "tools_changed" not in events
    )
    if local_cached == head or fell_back:
        rulers[source_id] = rulers[source_id].extended([(head, reads)])
