"""Deprecated: the analysis' former single module, now its stages (:mod:`promptkit.analysis.api`,
:mod:`~promptkit.analysis.columns`, :mod:`~promptkit.analysis.result`, ...). This alias re-exports the
public names for one release; import them from :mod:`promptkit.analysis` (or the module named below).

=========================================================  ==========================================
name                                                        now in
=========================================================  ==========================================
``analyze``, ``analyze_requests``                            :mod:`promptkit.analysis.api`
``AnalysisResult``                                           :mod:`promptkit.analysis.result`
``RequestRow``, ``REQUEST_COLUMNS``, ``PROBLEM_COLUMNS``     :mod:`promptkit.analysis.columns`
``VIEWS``, ``DEFAULT_PROVIDER``                              :mod:`promptkit.analysis.spec`
``EXCERPT_TOKENS``                                           :mod:`promptkit.analysis.wire`
``STREAM_CACHE_TOKENS``                                      :mod:`promptkit.analysis.plans.stream`
``composition_frame_empty``                                  :mod:`promptkit.analysis.assemble`
=========================================================  ==========================================
"""

from __future__ import annotations

import warnings

from promptkit.analysis.api import analyze, analyze_requests
from promptkit.analysis.assemble import composition_frame_empty
from promptkit.analysis.columns import COMPOSITION_COLUMNS, PROBLEM_COLUMNS, REQUEST_COLUMNS, RequestRow
from promptkit.analysis.plans.stream import STREAM_CACHE_TOKENS
from promptkit.analysis.result import AnalysisResult
from promptkit.analysis.spec import DEFAULT_PROVIDER, VIEWS
from promptkit.analysis.wire import EXCERPT_TOKENS

__all__ = [
    "COMPOSITION_COLUMNS",
    "DEFAULT_PROVIDER",
    "EXCERPT_TOKENS",
    "PROBLEM_COLUMNS",
    "REQUEST_COLUMNS",
    "STREAM_CACHE_TOKENS",
    "VIEWS",
    "AnalysisResult",
    "RequestRow",
    "analyze",
    "analyze_requests",
    "composition_frame_empty",
]

warnings.warn(
    "promptkit.analysis.engine is deprecated: import from promptkit.analysis (analyze, analyze_requests, "
    "AnalysisResult, REQUEST_COLUMNS, ...) or promptkit.analysis.api / .columns / .result",
    DeprecationWarning,
    stacklevel=2,
)
