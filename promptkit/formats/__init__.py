"""Log formats: one module per format, each sniffing a file and reading it into request records.

Built in: promptkit's own JSONL (:mod:`~promptkit.formats.promptkit_jsonl`) and mini-swe-agent
trajectories (:mod:`~promptkit.formats.mini_swe_agent`). Third-party formats register through the
``promptkit.formats`` entry-point group (:data:`~promptkit.formats.base.ENTRY_POINT_GROUP`).

>>> result = read_logs("fixtures/real-logs/deepseek")
>>> len(result.records), result.records[0].provider
(154, 'deepseek')
"""

from __future__ import annotations

from promptkit.formats.base import (
    ENTRY_POINT_GROUP,
    LogFormat,
    Source,
    available_formats,
    get_format,
    register_format,
    sniff_format,
)
from promptkit.formats.discovery import (
    LogStream,
    find_log_files,
    intern_messages,
    iter_sessions,
    read_file,
    read_logs,
    records_from_requests,
    stream_logs,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "LogFormat",
    "LogStream",
    "Source",
    "available_formats",
    "find_log_files",
    "get_format",
    "intern_messages",
    "iter_sessions",
    "read_file",
    "read_logs",
    "records_from_requests",
    "register_format",
    "sniff_format",
    "stream_logs",
]
