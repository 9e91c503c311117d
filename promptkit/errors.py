"""Every error promptkit raises derives from :class:`PromptkitError`.

Catch ``PromptkitError`` to handle any library error; catch a subclass to handle one kind. Each
subclass also derives from the built-in exception it has always been (``ValueError``, ``LookupError``,
``OSError``, ``TypeError``), so existing ``except ValueError`` code keeps working. Messages name what
and where: the file and line of a log record, the field of a request body, the argument of a call.
The command-line tool prints a ``PromptkitError`` as one line and exits with code 1.

>>> issubclass(RecordFormatError, PromptkitError), issubclass(RecordFormatError, ValueError)
(True, True)
"""

from __future__ import annotations

import os
import re

__all__ = [
    "LONE_SURROGATE",
    "AttachmentRefError",
    "CacheGateError",
    "CalibrationError",
    "CaptureError",
    "ChatModelRequestError",
    "CodeInputError",
    "ContentNotSentWarning",
    "ContributorOutputError",
    "HttpCaptureError",
    "InternalError",
    "LayoutFormatError",
    "LayoutMismatchError",
    "LogFileError",
    "LoneSurrogateError",
    "MarkupError",
    "MediaFormatError",
    "MessageFormatError",
    "NoRequestError",
    "NotRegisteredError",
    "OutputFileError",
    "PlatformMessageError",
    "PriceError",
    "PromptkitError",
    "PromptkitWarning",
    "ProviderError",
    "ProxyConfigError",
    "RecordFormatError",
    "RenderError",
    "ReplayError",
    "ReportInputError",
    "RequestBuildError",
    "StreamError",
    "TokenizerNotAvailableError",
    "ToolArgumentsError",
    "ToolDefinitionError",
    "TruncatedLogError",
    "UnknownAttributeError",
    "UsageError",
]


class PromptkitError(Exception):
    """The base of every error promptkit raises."""


class PromptkitWarning(UserWarning):
    """The base of every warning promptkit emits."""


class UsageError(PromptkitError, TypeError, ValueError):
    """An API call with an argument of the wrong type or value; the message names the argument."""


class ReplayError(PromptkitError, ValueError):
    """A what-if replay that cannot run (e.g. no request of the log could be analyzed); names the paths."""


# --- chat contracts ----------------------------------------------------------------------------------


class MessageFormatError(PromptkitError, ValueError):
    """A chat-completions message dict that cannot become a :class:`~promptkit.Message`; names the field."""


class MarkupError(PromptkitError, ValueError):
    """An argument the markup functions cannot work with (names the function and the argument)."""


class AttachmentRefError(PromptkitError, ValueError):
    """An attachment reference that cannot be written: unknown kind, empty or non-string ref/desc."""


class PlatformMessageError(PromptkitError, ValueError):
    """A platform message value that breaks the message contract; the message names class and field."""


class ChatModelRequestError(PromptkitError, ValueError):
    """A :class:`~promptkit.chat.request.ChatModelRequest` field that breaks the contract; names the field."""


class StreamError(PromptkitError, ValueError):
    """A stream chunk or piece that breaks the contract, or a chunk after ``done``; names the field."""


# --- assembly and the layout -------------------------------------------------------------------------


class LayoutFormatError(PromptkitError, ValueError):
    """A layout entry read from JSON that is not ``{"slot": str, "key": str | null}``; names the field."""


class LayoutMismatchError(PromptkitError, IndexError):
    """A request's layout has no entry for one of its messages or template spans (a layout shorter than
    the body it describes); the message names the request."""


class ContributorOutputError(PromptkitError, TypeError):
    """A build returned something other than ``str``, a sequence of ``str`` or ``None``; names the key."""


# --- providers ---------------------------------------------------------------------------------------


class ProviderError(PromptkitError, LookupError, ValueError):
    """An unknown provider name, or a provider profile that is malformed; names the provider."""


class RequestBuildError(PromptkitError, ValueError):
    """A request body cannot be built from these messages; the message says which message or argument."""


class ToolArgumentsError(RequestBuildError):
    """A tool call's ``arguments`` are not a JSON object (the provider wants an object); names message and call."""


class ToolDefinitionError(RequestBuildError):
    """A tool definition is not an OpenAI-style function tool dict; names the tool index and the field."""


class MediaFormatError(RequestBuildError):
    """An image or audio reference this provider cannot take in that form; names the message and the item."""


class ContentNotSentWarning(PromptkitWarning):
    """Content the provider's protocol cannot carry in that place (an image on an assistant message, an
    audio clip for a provider without audio input) was left out of the body. Turn it into an error with
    ``warnings.simplefilter("error", ContentNotSentWarning)``."""


# --- logs and records --------------------------------------------------------------------------------


class LogFileError(PromptkitError, OSError):
    """A log file or directory cannot be read (missing, unreadable, compressed in an unknown way, of no
    known format, or holding no logs). ``path`` names it, ``reason`` says why."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"

    def __reduce__(self) -> tuple[type[LogFileError], tuple[str, str]]:
        return (type(self), (self.path, self.reason))


class TruncatedLogError(LogFileError, EOFError):
    """A compressed log that ends inside its last frame (a truncated file), as :mod:`gzip` reports it."""


class RecordFormatError(PromptkitError, ValueError):
    """A request body, layout, usage or timestamp does not have the expected shape; the message names
    the field (``request.messages[2].role: expected a string, got int``)."""


class HttpCaptureError(RecordFormatError):
    """A captured HTTP exchange cannot be used; the message names the field (``response.body: not JSON``)."""


class CaptureError(PromptkitError, RuntimeError):
    """The capture wrapper cannot be set up (a client it cannot wrap, a bad pattern)."""


class ProxyConfigError(PromptkitError, ValueError):
    """The proxy cannot start with this configuration (bad upstream URL, a non-loopback address without
    ``allow_remote``, a bad redaction pattern)."""


# --- analysis and reports ----------------------------------------------------------------------------


class RenderError(PromptkitError, ValueError):
    """A request cannot be rendered; the message says which message and field."""


#: A lone UTF-16 surrogate (a ``\ud800`` escape in a JSON log): what :class:`LoneSurrogateError` is
#: about, and what the analysis engine replaces by U+FFFD.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class LoneSurrogateError(RenderError):
    """A rendered text holds a lone UTF-16 surrogate (a ``\\ud800`` escape in a JSON log), which no
    tokenizer encodes as such; raised by a ``RequestTokenizer(..., reject_surrogates=True)``."""


class TokenizerNotAvailableError(PromptkitError, LookupError):
    """A tokenizer's data is not installed locally (promptkit never downloads tokenizer data)."""


class ReportInputError(PromptkitError, ValueError):
    """The frame handed to a report function lacks columns it needs; the message names them."""


class NoRequestError(PromptkitError, ValueError):
    """Not one request of the logs could be analyzed; the message names the paths and the first problem."""


class OutputFileError(PromptkitError, OSError):
    """An output file (a report file, a calibration) cannot be written; the message names the file."""


class PriceError(PromptkitError, LookupError):
    """No price is known for a model, or a price file is malformed; the message says which and where."""


class CalibrationError(PromptkitError, ValueError):
    """A calibration cannot be fitted, read or applied (the message names the file or field)."""


class CacheGateError(PromptkitError, AssertionError):
    """A cache-stability assertion failed (:func:`promptkit.testing.assert_cache_stable`)."""


class InternalError(PromptkitError, RuntimeError):
    """A broken internal invariant of promptkit (a bug: please report it with the message)."""


class NotRegisteredError(PromptkitError, KeyError, LookupError):
    """A name (a contributor key, a registered model) that is not registered; the message names it."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


class UnknownAttributeError(PromptkitError, AttributeError):
    """A package has no public name of that spelling (``promptkit.whatif.nope``); names the package."""


class CodeInputError(PromptkitError, ValueError):
    """Python source that ``promptkit lint-code`` cannot read: a missing path, a file that is not UTF-8,
    a syntax error; the message names the file and line."""
