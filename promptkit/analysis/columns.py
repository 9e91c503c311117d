"""The columns of an analysis: :class:`RequestRow` (one row of the requests frame) and the column sets and
polars schemas derived from it, plus :class:`RowTable`, the rows of a run as tuples.

A new column is one field of :class:`RequestRow`, set where its stage makes it: the record's figures in
stage 1 (:data:`FIXED_COLUMNS`, :func:`promptkit.analysis.prepare.fixed_fields`), the cache's outcome in
stage 2 (:data:`OUTCOME_COLUMNS`, :func:`promptkit.analysis.replay.outcome_values`), the divergence's
message and excerpts in stage 3 (:data:`promptkit.analysis.attribute.ATTRIBUTED`).

>>> REQUEST_COLUMNS[:3]
('session', 'index', 'timestamp')
>>> set(FIXED_COLUMNS) | set(OUTCOME_COLUMNS) == set(REQUEST_COLUMNS)
True
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, Final

import attrs

from promptkit.analysis.composition import COMPOSITION_COLUMNS

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

__all__ = [
    "BASIS_AT",
    "COMPOSITION_COLUMNS",
    "FIXED_COLUMNS",
    "OUTCOME_COLUMNS",
    "PROBLEM_COLUMNS",
    "REQUEST_COLUMNS",
    "ROW_FIELDS",
    "ROW_VALUES",
    "RequestRow",
    "RowTable",
    "frame_schemas",
]


def _column(dtype: str) -> Any:
    """A :class:`RequestRow` field: a column of the requests frame of polars type ``dtype`` (``"str"``,
    ``"int"``, ``"float"`` or ``"bool"``), null (None) unless set."""
    return attrs.field(default=None, metadata={"dtype": dtype})


@attrs.frozen(slots=True, kw_only=True)
class RequestRow:
    """One row of :attr:`~promptkit.analysis.result.AnalysisResult.requests`: the frame's columns are this class' fields, in
    order, and their polars types are the fields' ``dtype`` metadata (:data:`REQUEST_COLUMNS` and the
    frame schema are derived from it: a new column is one field here, set where the row is made).

    >>> RequestRow(session="s", index=0, prompt_tokens=10).prompt_tokens
    10
    >>> REQUEST_COLUMNS[:3]
    ('session', 'index', 'timestamp')
    """

    session: str | None = _column("str")
    index: int | None = _column("int")
    timestamp: float | None = _column("float")
    prompt_tokens: int | None = _column("int")
    prefix_tokens: int | None = _column("int")
    predicted_cached_tokens: int | None = _column("int")
    hit_ratio: float | None = _column("float")
    reported_prompt_tokens: int | None = _column("int")
    reported_cached_tokens: int | None = _column("int")
    divergence_message: int | None = _column("int")
    divergence_role: str | None = _column("str")
    divergence_anchor: str | None = _column("str")
    divergence_key: str | None = _column("str")
    file: str | None = _column("str")
    line: int | None = _column("int")
    model: str | None = _column("str")
    completion_tokens: int | None = _column("int")
    reported_completion_tokens: int | None = _column("int")
    predicted_cache_write_tokens: int | None = _column("int")
    reported_cache_write_tokens: int | None = _column("int")
    divergence_token: int | None = _column("int")
    cached_source: str | None = _column("str")
    divergence_cached_text: str | None = _column("str")
    divergence_prompt_text: str | None = _column("str")
    divergence_context_text: str | None = _column("str")
    # facts for promptkit.analysis.causes (see its module docstring)
    unexpired_cached_tokens: int | None = _column("int")
    unevicted_cached_tokens: int | None = _column("int")
    idle_seconds: float | None = _column("float")
    source_stored_tokens: int | None = _column("int")
    model_switch_tokens: int | None = _column("int")
    change_class: str | None = _column("str")
    change_detail: str | None = _column("str")
    predicted_cache_write_1h_tokens: int | None = _column("int")
    reported_cache_write_1h_tokens: int | None = _column("int")
    provider_miss_reason: str | None = _column("str")
    provider_missed_tokens: int | None = _column("int")
    # ruler mode (promptkit.analysis.ruler): how the positions were placed, where the prompt's head ends
    position_basis: str | None = _column("str")
    head_end_tokens: int | None = _column("int")
    best_effort_cache: bool | None = _column("bool")
    log_events: str | None = _column("str")
    # the breakpoints placed from the reported counts where the log shows none
    # (promptkit.analysis.breakpoints): ``head``, ``system``, ``messages[i]``, comma-separated
    inferred_breakpoints: str | None = _column("str")


#: Columns of :attr:`AnalysisResult.requests`, in order: the fields of :class:`RequestRow`.
REQUEST_COLUMNS: Final[tuple[str, ...]] = tuple(f.name for f in attrs.fields(RequestRow))

#: Columns of :attr:`~promptkit.analysis.result.AnalysisResult.problems`.
PROBLEM_COLUMNS: Final[tuple[str, ...]] = ("file", "line", "reason")

#: The columns of a request's row that need no cache outcome: its record's figures and the ruler facts
#: (:func:`~promptkit.analysis.prepare.fixed_fields`, stage 1, made where the request is tokenized).
FIXED_COLUMNS: Final = (
    "session", "index", "timestamp", "prompt_tokens", "reported_prompt_tokens", "reported_cached_tokens", "file",
    "line", "model", "completion_tokens", "reported_completion_tokens", "reported_cache_write_tokens",
    "reported_cache_write_1h_tokens", "provider_miss_reason", "provider_missed_tokens", "position_basis",
    "head_end_tokens", "best_effort_cache", "log_events", "inferred_breakpoints",
)  # fmt: skip
#: The columns the cache's outcome, the divergence and the causes' facts give (stages 2 and 3,
#: :func:`~promptkit.analysis.replay.outcome_values`): with :data:`FIXED_COLUMNS`, every column once.
OUTCOME_COLUMNS: Final = tuple(c for c in REQUEST_COLUMNS if c not in FIXED_COLUMNS)

#: A :class:`RequestRow`'s fields as a tuple, in column order (perf: one C call, not ``attrs.astuple``).
ROW_FIELDS: Final = operator.attrgetter(*REQUEST_COLUMNS)
#: The same of a row's fields by name (a dict), in column order.
ROW_VALUES: Final = operator.itemgetter(*REQUEST_COLUMNS)
#: Where ``position_basis`` stands in a row's tuple.
BASIS_AT: Final = REQUEST_COLUMNS.index("position_basis")


def frame_schemas() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The polars schemas of the requests, composition and problems frames (requests: from the
    ``dtype`` metadata of :class:`RequestRow`'s fields)."""
    import polars as pl

    s, i, f = pl.String, pl.Int64, pl.Float64
    dtypes = {"str": s, "int": i, "float": f, "bool": pl.Boolean}
    requests = {a.name: dtypes[a.metadata["dtype"]] for a in attrs.fields(RequestRow)}
    composition = dict(zip(COMPOSITION_COLUMNS, (s, i, s, s, i, i, i, s), strict=True))
    problems = dict(zip(PROBLEM_COLUMNS, (s, i, s), strict=True))
    return requests, composition, problems


class RowTable:
    """The requests frame of a run: :meth:`add` keeps a row's fields as one tuple (perf: one append per
    row); :meth:`frame` turns them into one list per column (``zip``, in C) and the frame (plus ``_pos``,
    the record's place in the load order, and ``_seq``, the order it was analyzed in)."""

    __slots__ = ("_names", "_rows")

    def __init__(self) -> None:
        self._names = (*REQUEST_COLUMNS, "_pos", "_seq")
        self._rows: list[tuple[Any, ...]] = []

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, fields: tuple[Any, ...], pos: int) -> None:
        """Add a row: its fields in :data:`REQUEST_COLUMNS` order."""
        self._rows.append((*fields, pos, len(self._rows)))

    def frame(self) -> pl.DataFrame:
        """The rows as a frame."""
        import polars as pl

        schema = {**frame_schemas()[0], "_pos": pl.Int64, "_seq": pl.Int64}
        columns = [list(c) for c in zip(*self._rows, strict=True)] or [[] for _ in self._names]
        return pl.DataFrame(dict(zip(self._names, columns, strict=True)), schema=schema)
