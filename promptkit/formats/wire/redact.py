"""Keeping credentials out of recorded calls: headers, URLs (user info and query), body fields and the
shapes of known API keys.

What is redacted, by default, everywhere a call is recorded (:class:`promptkit.capture.RecordLog`, the
proxy):

- **headers** (:func:`is_secret_header`): ``authorization``, ``proxy-authorization``, ``x-api-key``,
  ``api-key``, ``cookie``, ``set-cookie`` and every header whose name contains ``auth``, ``key``,
  ``token``, ``secret``, ``cookie``, ``password``, ``credential``, ``signature`` or ``session-id``
  (so ``X-Custom-Token``, ``X-Goog-Api-Key``, ``X-Amz-Security-Token``): such a header is never written;
- **URLs** (:func:`redact_url`): the password of ``user:password@host``, and the values of query
  parameters that carry credentials (``key``, ``api_key``, ``token``, ``access-token``, ``auth``,
  ``sig``, ``signature``, ``client_secret``, ``password``, ``x-api-key``, and any name ending in
  ``_token`` / ``_key`` / ``_secret``);
- **body fields** (:func:`redact`): the value (a string, a number, a list or an object, whole) of a field named ``api_key``, ``apikey``, ``x_api_key``,
  ``access_token``, ``refresh_token``, ``id_token``, ``auth_token``, ``session_token``,
  ``client_secret``, ``secret_key``, ``private_key``, ``password`` or ``authorization`` (any case, ``-``
  or ``_``);
- **key shapes** (:data:`SECRET_PATTERNS`) in every string, prompts included.

:func:`redact` walks a value with an explicit stack, not recursion, so a body nested thousands of levels
deep costs no Python frames; a part nested deeper than ``max_depth`` (:data:`MAX_DEPTH`) is replaced by
:data:`TOO_DEEP` and counted (:func:`redact_counted`), so the record is still written, and says so.

>>> redact_url("http://user:pw@127.0.0.1:9/v1/chat/completions?sig=abc&alt=json")
'http://user:%5BREDACTED%5D@127.0.0.1:9/v1/chat/completions?sig=%5BREDACTED%5D&alt=json'
>>> redact({"api_key": "plain-value", "content": "use ghp_0123456789abcdefghijABCDEFGHIJ012345"}, default_patterns())
{'api_key': '[REDACTED]', 'content': 'use [REDACTED]'}
>>> is_secret_header("X-Custom-Token"), is_secret_header("Content-Type")
(True, False)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Any, Final
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

__all__ = [
    "CUT_KEY_PATTERNS",
    "MAX_DEPTH",
    "REDACTED",
    "SECRET_PATTERNS",
    "SENSITIVE_HEADERS",
    "TOO_DEEP",
    "default_patterns",
    "is_secret_field",
    "is_secret_header",
    "is_secret_query",
    "redact",
    "redact_counted",
    "redact_text",
    "redact_url",
    "safe_headers",
    "url_credentials",
]

REDACTED: Final[str] = "[REDACTED]"

#: Headers never written to a log (compared case-insensitively): credentials and cookies. Any other
#: header whose name contains one of :data:`_SECRET_WORDS` is left out too (:func:`is_secret_header`).
SENSITIVE_HEADERS: Final[frozenset[str]] = frozenset(
    {
        "authorization", "proxy-authorization", "x-api-key", "api-key", "openai-api-key", "cookie",
        "set-cookie", "x-goog-api-key", "anthropic-api-key",
    }
)  # fmt: skip
#: Substrings of header names that mark a header as a credential.
_SECRET_WORDS: Final[tuple[str, ...]] = (
    "auth", "key", "token", "secret", "cookie", "session-id", "password", "credential", "signature",
)  # fmt: skip

#: Query parameter names (lower case, ``-`` read as ``_``) whose value is redacted in recorded URLs.
_SECRET_QUERY: Final[frozenset[str]] = frozenset(
    {
        "key", "api_key", "apikey", "x_api_key", "token", "access_token", "auth", "sig", "signature",
        "client_secret", "password", "passwd", "secret", "code", "x_amz_signature", "x_amz_credential",
    }
)  # fmt: skip
#: Name endings that mark a query parameter as a credential.
_SECRET_QUERY_SUFFIXES: Final[tuple[str, ...]] = ("_token", "_key", "_secret", "_signature", "_password")

#: Body field names (lower case, ``-`` read as ``_``) whose string value is redacted wherever they appear.
_SECRET_FIELDS: Final[frozenset[str]] = frozenset(
    {
        "api_key", "apikey", "x_api_key", "access_token", "refresh_token", "id_token", "auth_token",
        "session_token", "client_secret", "secret_key", "private_key", "password", "authorization",
    }
)  # fmt: skip

#: Patterns of API keys replaced by ``[REDACTED]`` in every recorded string (keys pasted into prompts
#: included), each from the issuer's documented token format. A pattern with a group named ``secret``
#: replaces only that group, so the words around it (``postgres://user:``, ``Basic ``) stay readable.
#:
#: - OpenAI / DeepSeek ``sk-...`` and Anthropic ``sk-ant-...`` keys: a whole word (``risk-management-…``
#:   is no key) with a digit or a capital letter in it (issued keys are mixed-case base62: the chance that
#:   one has neither is nil; lower-case hyphenated words have neither);
#: - Google ``AIza...`` API keys;
#: - ``Bearer ...`` tokens;
#: - HTTP Basic credentials (RFC 7617): ``Basic`` and a base64 token with a digit, ``+``, ``/``, ``=`` or
#:   a capital letter after its first (so "Basic understanding" is prose, ``Basic dXNlcjpwYXNz`` a secret);
#: - Groq ``gsk_...`` (https://console.groq.com/docs/quickstart), Hugging Face ``hf_...``
#:   (https://huggingface.co/docs/hub/security-tokens), xAI ``xai-...`` (https://docs.x.ai/docs/overview);
#: - AWS access key ids ``AKIA`` / ``ASIA`` + 16 characters (the IAM unique-identifier prefixes,
#:   https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_identifiers.html#identifiers-unique-ids),
#:   and secret access keys (40 base64 characters) after ``aws_secret_access_key`` (any case, ``=`` or
#:   ``:``; https://docs.aws.amazon.com/cli/latest/userguide/cli-configure-files.html);
#: - GitHub ``ghp_`` / ``gho_`` / ``ghu_`` / ``ghs_`` / ``ghr_`` tokens and fine-grained ``github_pat_``
#:   tokens (https://github.blog/changelog/2021-03-31-authentication-token-format-updates-are-generally-available);
#: - Slack ``xoxb-`` / ``xoxp-`` / ``xoxa-`` / ``xoxr-`` / ``xoxs-`` / ``xoxe-`` tokens
#:   (https://api.slack.com/authentication/token-types);
#: - Stripe secret and restricted keys ``sk_live_`` / ``sk_test_`` / ``rk_live_`` / ``rk_test_``
#:   (https://docs.stripe.com/keys);
#: - PEM private keys (RFC 7468), ``-----BEGIN … PRIVATE KEY-----`` to its ``END`` line (at most 16 KiB
#:   apart, so a lone ``BEGIN`` costs a bounded scan);
#: - the password of any ``scheme://user:password@host`` address (database URLs: ``postgres://``,
#:   ``mysql://``, ``mongodb+srv://``, ``redis://``; RFC 3986 user information).
SECRET_PATTERNS: Final[tuple[str, ...]] = (
    r"(?<![A-Za-z0-9_])sk-(?:ant-|proj-)?(?=[a-z_\-]{0,200}[0-9A-Z])[A-Za-z0-9_\-]{20,}",
    r"AIza[0-9A-Za-z_\-]{35}",
    r"(?i)bearer\s+[A-Za-z0-9._\-]{20,}",
    r"\bBasic\s+(?P<secret>(?=[A-Za-z0-9+/]*[0-9+/=]|[A-Za-z][a-z]*[A-Z])[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])",
    r"\bgsk_[A-Za-z0-9]{20,}",
    r"\bhf_[A-Za-z0-9]{20,}",
    r"\bxai-[A-Za-z0-9]{20,}",
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    r"(?i:aws_?secret_?access_?key)[\"']?\s*[:=]\s*[\"']?(?P<secret>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
    r"\bgh[pousr]_[A-Za-z0-9]{36,}",
    r"\bgithub_pat_[A-Za-z0-9_]{22,}",
    r"\bxox[abposre]-[A-Za-z0-9\-]{10,}",
    r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]{0,16384}?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
    r"\b[A-Za-z][A-Za-z0-9+.\-]{1,30}://[^\s:/@\"'<>]+:(?P<secret>[^\s@/\"'<>]+)@",
)

#: Key shapes cut short: an excerpt a report copies (a few tokens from a cache break) may end inside a key
#: (``'my key is sk-proj-Qx7Lm2'``), shorter than :data:`SECRET_PATTERNS` match. For a report to share
#: (``promptkit analyze --redact-outputs``), a known key prefix with a few key characters after it is
#: enough to redact; ``sk-`` keeps its whole-word and digit-or-capital rule.
CUT_KEY_PATTERNS: Final[tuple[str, ...]] = (
    r"(?<![A-Za-z0-9_])sk-(?:ant-|proj-)?(?=[a-z_\-]{0,200}[0-9A-Z])[A-Za-z0-9_\-]{3,}",
    r"\b(?:AIza|gsk_|hf_|xai-|gh[pousr]_|github_pat_|xox[abposre]-|[sr]k_(?:live|test)_|AKIA|ASIA)[A-Za-z0-9_\-]{3,}",
)

#: How deep :func:`redact` walks a JSON value; a part nested deeper becomes :data:`TOO_DEEP`.
MAX_DEPTH: Final[int] = 128
#: What stands in for a part nested deeper than the limit (:data:`MAX_DEPTH`).
TOO_DEEP: Final[str] = f"[REDACTED: nested deeper than {MAX_DEPTH} levels]"


@cache
def default_patterns() -> tuple[re.Pattern[str], ...]:
    """:data:`SECRET_PATTERNS`, compiled once.

    >>> len(default_patterns()) == len(SECRET_PATTERNS)
    True
    """
    return tuple(re.compile(p) for p in SECRET_PATTERNS)


def _norm(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def is_secret_header(name: str) -> bool:
    """Whether a header may carry a credential (and so is never recorded).

    >>> [is_secret_header(h) for h in ("Authorization", "X-Api-Key", "X-Custom-Token", "Set-Cookie", "Accept")]
    [True, True, True, True, False]
    """
    low = name.strip().lower()
    return low in SENSITIVE_HEADERS or any(word in low for word in _SECRET_WORDS)


def safe_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """The headers (names lower-cased) that may be recorded: every credential header left out.

    >>> safe_headers({"Content-Type": "application/json", "X-Custom-Token": "t0k", "Cookie": "a=1"})
    {'content-type': 'application/json'}
    """
    items = headers.items() if isinstance(headers, Mapping) else headers
    return {str(k).lower(): str(v) for k, v in items if not is_secret_header(str(k))}


def is_secret_query(name: str) -> bool:
    """Whether a URL query parameter carries a credential.

    >>> [is_secret_query(q) for q in ("access-token", "auth", "sig", "client_secret", "X-Api-Key", "alt")]
    [True, True, True, True, True, False]
    """
    low = _norm(name)
    return low in _SECRET_QUERY or low.endswith(_SECRET_QUERY_SUFFIXES)


def is_secret_field(name: str) -> bool:
    """Whether a body field's value is a credential (``api_key``, ``client_secret``, ``password``...).

    >>> is_secret_field("api_key"), is_secret_field("Client-Secret"), is_secret_field("max_tokens")
    (True, True, False)
    """
    return _norm(name) in _SECRET_FIELDS


def url_credentials(url: str) -> tuple[str, str | None, str | None]:
    """``url`` without its user info, and the user name and password it carried (None when absent).

    >>> url_credentials("https://me:p%40ss@api.example.com:8443/v1")
    ('https://api.example.com:8443/v1', 'me', 'p@ss')
    """
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None, None
    host = parts.netloc.rsplit("@", 1)[1]
    user = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return urlunsplit(parts._replace(netloc=host)), user, password


def redact_url(url: str) -> str:
    """``url`` with the password of its user info and the values of credential query parameters
    (:func:`is_secret_query`) replaced by ``[REDACTED]``.

    >>> redact_url("https://x.example/v1/models?key=abc&alt=json")
    'https://x.example/v1/models?key=%5BREDACTED%5D&alt=json'
    >>> redact_url("http://user:secret@h.example/v1")
    'http://user:%5BREDACTED%5D@h.example/v1'
    """
    parts = urlsplit(url)
    if "@" in parts.netloc:
        userinfo, host = parts.netloc.rsplit("@", 1)
        if ":" in userinfo:
            user = userinfo.split(":", 1)[0]
            parts = parts._replace(netloc=f"{user}:{quote(REDACTED, safe='')}@{host}")
        elif userinfo:  # a token given as the user name alone
            parts = parts._replace(netloc=f"{quote(REDACTED, safe='')}@{host}")
    if parts.query:
        query = [
            (k, REDACTED if is_secret_query(k) else v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
        ]
        parts = parts._replace(query=urlencode(query))
    return urlunsplit(parts)


def _secret_only(match: re.Match[str]) -> str:
    start, end = match.span("secret")
    if start < 0:  # the group did not take part: nothing to hide
        return match.group(0)
    base = match.start()
    whole = match.group(0)
    return whole[: start - base] + REDACTED + whole[end - base :]


def _text(value: str, patterns: Sequence[re.Pattern[str]]) -> str:
    for pattern in patterns:
        value = pattern.sub(_secret_only if "secret" in pattern.groupindex else REDACTED, value)
    return value


def redact_text(text: str, patterns: Sequence[re.Pattern[str]] | None = None) -> str:
    """Free text (an error message, a log line) with the key shapes of ``patterns`` (by default
    :data:`SECRET_PATTERNS`) and the credentials of every URL in it (:func:`redact_url`) redacted.

    >>> redact_text("GET https://x.example/v1?key=abc failed: 403")
    'GET https://x.example/v1?key=%5BREDACTED%5D failed: 403'
    """
    text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    return _text(text, default_patterns() if patterns is None else patterns)


_URL: Final[re.Pattern[str]] = re.compile(r"\bhttps?://[^\s'\"<>]+")


def redact_counted(
    value: Any, patterns: Sequence[re.Pattern[str]], *, max_depth: int = MAX_DEPTH
) -> tuple[Any, int]:
    """A copy of a JSON value with every match of ``patterns`` in its strings (keys included) and every
    secret field's value (:func:`is_secret_field`) replaced by ``[REDACTED]``, and how many parts nested
    deeper than ``max_depth`` were replaced by :data:`TOO_DEEP`. Iterative: no recursion, whatever the
    depth.

    >>> deep = {"a": [[["x"]]]}
    >>> redact_counted(deep, [], max_depth=2)
    ({'a': ['[REDACTED: nested deeper than 2 levels]']}, 1)
    """
    holder: list[Any] = [None]
    cut = 0
    too_deep = TOO_DEEP if max_depth == MAX_DEPTH else f"[REDACTED: nested deeper than {max_depth} levels]"
    # (source, destination container, key or index in it, depth of the source)
    stack: list[tuple[Any, Any, Any, int]] = [(value, holder, 0, 0)]
    while stack:
        src, dest, slot, depth = stack.pop()
        if isinstance(src, str):
            dest[slot] = _text(src, patterns)
        elif isinstance(src, Mapping | list | tuple):
            if depth >= max_depth:
                dest[slot] = too_deep
                cut += 1
                continue
            if isinstance(src, Mapping):
                out: dict[Any, Any] = {}
                dest[slot] = out
                for k, v in src.items():
                    key = _text(k, patterns) if isinstance(k, str) else k
                    if (
                        isinstance(k, str)
                        and is_secret_field(k)
                        and v is not None
                        and not isinstance(v, bool)
                    ):
                        out[key] = REDACTED  # a list or an object under a secret name too, whole
                        continue
                    out[key] = None
                    stack.append((v, out, key, depth + 1))
            else:
                items: list[Any] = [None] * len(src)
                dest[slot] = items
                stack.extend((v, items, i, depth + 1) for i, v in enumerate(src))
        else:
            dest[slot] = src
    return holder[0], cut


def redact(value: Any, patterns: Sequence[re.Pattern[str]], *, max_depth: int = MAX_DEPTH) -> Any:
    """:func:`redact_counted` without the count.

    >>> redact({"content": "my key is sk-abcdefghijklmnopqrstuv42"}, [re.compile(SECRET_PATTERNS[0])])
    {'content': 'my key is [REDACTED]'}
    """
    return redact_counted(value, patterns, max_depth=max_depth)[0]
