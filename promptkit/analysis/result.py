"""What an analysis returns: :class:`AnalysisResult`, three polars frames, the configuration that
produced them and the notes on what it had to assume. Its :attr:`~AnalysisResult.causes` calls down
into :mod:`promptkit.analysis.causes` once and holds the frame.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:  # pragma: no cover
    import polars as pl

    from promptkit.tokens.cache_models import CacheModel

__all__ = ["AnalysisResult"]


@attrs.frozen(slots=True, eq=False, repr=False)
class AnalysisResult:
    """The outcome of an analysis: three polars frames and the configuration that produced them.

    - ``requests``: one row per analyzed request, columns :data:`~promptkit.analysis.columns.REQUEST_COLUMNS` (``session, index,
      timestamp, prompt_tokens, prefix_tokens, predicted_cached_tokens, hit_ratio,
      reported_prompt_tokens, reported_cached_tokens, divergence_message, divergence_role,
      divergence_anchor, divergence_key`` then the extras ``file, line, model, completion_tokens,
      reported_completion_tokens, predicted_cache_write_tokens, reported_cache_write_tokens,
      divergence_token, cached_source, divergence_cached_text, divergence_prompt_text``). Token counts are
      ours (the analyzed rendering), ``reported_*`` the provider's; null where unknown (no usage, no
      layout, no divergence). The two ``*_text`` columns decode :data:`~promptkit.analysis.wire.EXCERPT_TOKENS` tokens from the
      divergence on: what the cache held there, and what the prompt sent instead.
    - ``composition``: per request, the token span (``start``, ``tokens``) of the header (``tools`` or
      ``header``), of each message (its layout ``slot`` and ``key``, or its role without a layout)
      and of the trailing generation prompt (``generation``); ``message`` is the message index. It has
      one row per message of every request, so a conversation's frame grows with the square of its
      length: the analysis holds each request's message offsets (linear: a request extending another
      shares its arrays) and makes the frame when it is first read, then holds it (``composition=``
      takes a frame, or a callable that makes it).
    - ``problems``: every line, record or request that could not be used (``file, line, reason``).
    - ``provider``, ``tokenizer``, ``render``, ``cache_model``, ``view``: the configuration; ``notes``:
      what the analysis had to assume (e.g. no timestamps, so no expiry); ``provider_assumed``: True when
      some session's provider was not recognised and the generic profile
      (:data:`~promptkit.analysis.spec.DEFAULT_PROVIDER`) was used for it (a note says so too).
    """

    requests: pl.DataFrame
    # memory: the frame, or what makes it on first read (see the ``composition`` property)
    _composition: pl.DataFrame | Callable[[], pl.DataFrame] = attrs.field(alias="composition")
    problems: pl.DataFrame
    provider: str
    tokenizer: str
    render: str
    cache_model: CacheModel
    view: str
    notes: tuple[str, ...] = ()
    provider_assumed: bool = False
    # what is computed from the frames once and then held (a copy made by attrs.evolve starts empty)
    _held: dict[str, Any] = attrs.field(factory=dict, init=False)

    @property
    def composition(self) -> pl.DataFrame:
        """The composition frame (see the class), made on first read and then held."""
        made = self._composition
        if not callable(made):
            return made
        held = self._held.get("composition")
        if held is None:
            held = self._held["composition"] = made()
        return held

    @property
    def causes(self) -> pl.DataFrame:
        """Per request, the uncached tokens split by cause (:func:`~promptkit.analysis.causes.explain_causes`),
        computed on first use and held by the result, so every table, report file and gate reads the same
        frame without computing it again."""
        held = self._held.get("causes")
        if held is None:
            from promptkit.analysis.causes import explain_causes

            held = self._held["causes"] = explain_causes(self.requests, self.cache_model)
        return held

    @property
    def hit_ratio(self) -> float | None:
        """Token-weighted predicted hit ratio over every analyzed request (None without tokens)."""
        prompt = int(self.requests["prompt_tokens"].sum())
        cached = int(self.requests["predicted_cached_tokens"].sum())
        return cached / prompt if prompt else None

    def __repr__(self) -> str:
        sessions = self.requests["session"].n_unique() if self.requests.height else 0
        ratio = self.hit_ratio
        shown = "n/a" if ratio is None else f"{ratio:.1%}"
        return (
            f"<AnalysisResult {self.requests.height} requests in {sessions} session(s), predicted hit ratio "
            f"{shown}; {self.problems.height} problem(s); provider={self.provider!r} tokenizer={self.tokenizer!r} "
            f"render={self.render!r} cache_model={self.cache_model.name!r} view={self.view!r}>"
        )

    @property
    def config(self) -> dict[str, Any]:
        """The configuration as plain values (for reports)."""
        return {
            "provider": self.provider,
            "tokenizer": self.tokenizer,
            "render": self.render,
            "cache_model": self.cache_model.name,
            "cache_model_params": (
                attrs.asdict(self.cache_model)  # type: ignore[arg-type]
                if attrs.has(type(self.cache_model))
                else repr(self.cache_model)
            ),
            "view": self.view,
        }
