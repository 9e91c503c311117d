"""Any Hugging Face jinja chat template, rendered piece by piece."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from promptkit.errors import RenderError
from promptkit.tokens.render.base import (
    RenderedPiece,
    request_messages,
    request_tools,
)

__all__ = [
    "JinjaTemplateRender",
    "load_chat_template",
]


# ---------------------------------------------------------------------------------------------------
# any HF jinja chat template


def _jinja_env() -> Any:
    import jinja2
    import jinja2.ext
    import jinja2.sandbox

    class _Generation(jinja2.ext.Extension):
        # transformers' {% generation %} … {% endgeneration %} tag: a pass-through here
        tags = {"generation"}  # noqa: RUF012

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.Scope(body, lineno=lineno)

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
               sort_keys: bool = False) -> str:  # fmt: skip
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    def strftime_now(fmt: str) -> str:
        from datetime import datetime

        return datetime.now().strftime(fmt)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


_SENTINEL_BASE = 0xF0000  # Supplementary Private Use Area-A


class JinjaTemplateRender:
    """Any Hugging Face jinja chat template, rendered the way ``transformers`` does.

    The template sees ``messages``, ``tools`` (None when the request has none), ``add_generation_prompt``,
    ``bos_token``, ``eos_token`` and ``raise_exception`` (sandboxed environment with ``trim_blocks``,
    ``lstrip_blocks`` and a ``tojson`` filter). The output is split on ``special_tokens``. Text inside
    the messages that looks like one of them is protected while rendering (swapped for private-use
    sentinels and restored), so it stays ordinary text.

    Message attribution: the template is rendered for each prefix ``messages[:k]``; message ``k``'s text
    starts where that prefix rendering stops agreeing with the full one. This is exact for templates
    that render messages in order; text that a template moves (e.g. hoisted system prompts) is
    attributed to the message at which the prefix renderings diverge. It costs one render per message.
    With ``completion``, the completion's text is what ``messages + [completion]`` renders beyond the
    prompt rendered without generation prompt (it follows the full prompt).

    Example::

        >>> tpl = "{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>{% endfor %}"
        >>> r = JinjaTemplateRender(tpl, special_tokens=["<s>", "</s>"])
        >>> [p.text for p in r.render({"messages": [{"role": "user", "content": "hi"}]})]
        ['<s>', 'user: hi', '</s>']
    """

    __slots__ = ("_split", "_template", "bos_token", "eos_token", "name", "special_tokens", "template")

    def __init__(
        self,
        template: str,
        *,
        special_tokens: Sequence[str],
        bos_token: str = "",
        eos_token: str = "",
        name: str = "jinja",
    ) -> None:
        self.template = template
        self.special_tokens: tuple[str, ...] = tuple(dict.fromkeys(t for t in special_tokens if t))
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.name = name
        self._template = _jinja_env().from_string(template)
        ordered = sorted(self.special_tokens, key=len, reverse=True)
        self._split = re.compile("(" + "|".join(re.escape(t) for t in ordered) + ")") if ordered else None

    def __repr__(self) -> str:
        return f"JinjaTemplateRender(name={self.name!r}, special_tokens={len(self.special_tokens)})"

    def _render(self, messages: list[Any], tools: Any, add_generation_prompt: bool) -> str:
        return str(
            self._template.render(
                messages=messages,
                tools=tools,
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token,
                eos_token=self.eos_token,
            )
        )

    def _protect(self, obj: Any) -> Any:
        if isinstance(obj, str):
            for k, tok in enumerate(self.special_tokens):
                if tok in obj:
                    obj = obj.replace(tok, chr(_SENTINEL_BASE + k))
            return obj
        if isinstance(obj, Mapping):
            return {key: self._protect(v) for key, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self._protect(v) for v in obj]
        return obj

    def _restore(self, text: str) -> str:
        for k, tok in enumerate(self.special_tokens):
            s = chr(_SENTINEL_BASE + k)
            if s in text:
                text = text.replace(s, tok)
        return text

    def render(
        self, request: Mapping[str, Any], *, completion: Mapping[str, Any] | None = None
    ) -> list[RenderedPiece]:
        """Pieces of ``request`` ending with the generation prompt, or with ``completion``."""
        import jinja2

        messages = [self._protect(dict(m)) for m in request_messages(request)]
        tools = self._protect(request_tools(request)) or None
        try:
            full = self._render(messages, tools, True)
            # start of each message: where the prefix renderings stop agreeing with the full rendering
            bounds: list[int] = []
            for k in range(len(messages) + 1):
                try:
                    prefix = self._render(messages[:k], tools, False)
                except jinja2.TemplateError:
                    prefix = ""
                lcp = _common_prefix_len(prefix, full)
                bounds.append(max(lcp, bounds[-1]) if bounds else lcp)
            completion_text = ""
            if completion is not None:
                if not isinstance(completion, Mapping):
                    raise RenderError(
                        f"completion must be an assistant message object, got {type(completion).__name__}"
                    )
                with_c = self._render([*messages, self._protect(dict(completion))], tools, False)
                completion_text = with_c[_common_prefix_len(with_c, full) :]
        except jinja2.TemplateError as exc:
            raise RenderError(f"chat template {self.name!r} failed: {exc}") from exc
        if self._split is not None:  # never cut inside a special token
            inside = {k: m.start() for m in self._split.finditer(full) for k in range(m.start() + 1, m.end())}
            bounds = [inside.get(b, b) for b in bounds]
        out: list[RenderedPiece] = []
        spans: list[tuple[int, int, int | None]] = [(0, bounds[0], None)]
        spans += [(bounds[k], bounds[k + 1], k) for k in range(len(messages))]
        spans.append((bounds[-1], len(full), None))
        for start, end, index in spans:
            before = len(out)
            self._split_into(full[start:end], index, out)
            if index is not None and len(out) == before:
                out.append(RenderedPiece("", False, index))
        if completion_text:
            self._split_into(completion_text, None, out)
        return out

    def _split_into(self, text: str, index: int | None, out: list[RenderedPiece]) -> None:
        if not text:
            return
        parts = self._split.split(text) if self._split is not None else [text]
        for k, part in enumerate(parts):
            if part:
                special = k % 2 == 1
                out.append(RenderedPiece(part if special else self._restore(part), special, index))


def _common_prefix_len(a: str, b: str) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _token_content(value: Any) -> str:
    if isinstance(value, Mapping):
        return str(value.get("content", ""))
    return "" if value is None else str(value)


def load_chat_template(path: str | Path) -> JinjaTemplateRender:
    """A :class:`JinjaTemplateRender` from a ``tokenizer_config.json`` or a ``.jinja`` file.

    The special tokens are the config's ``added_tokens_decoder`` contents (else the ``added_tokens`` of
    a ``tokenizer.json`` next to it) plus ``bos_token`` / ``eos_token``; a ``.jinja`` file takes them from
    a ``tokenizer_config.json`` next to it. Without either, only BOS/EOS are special and the rest of
    the template's markers are tokenized as text: build a :class:`JinjaTemplateRender` with an explicit
    ``special_tokens`` list in that case.
    """
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RenderError(f"cannot read chat template {str(path)!r}: {exc}") from exc
    config: Mapping[str, Any] = {}
    if path.suffix == ".json":
        try:
            config = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise RenderError(f"{path}: line {exc.lineno}: not JSON ({exc.msg})") from exc
        template = config.get("chat_template")
        if isinstance(template, list):  # named templates: take "default"
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, Mapping)}
            template = named.get("default")
        if not isinstance(template, str):
            raise RenderError(f"{path}: field 'chat_template' is missing or not a string")
    else:
        template = raw
        sibling = path.with_name("tokenizer_config.json")
        if sibling.is_file():
            try:
                config = json.loads(sibling.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise RenderError(f"{sibling}: cannot read it: {exc}") from exc
    decoder = config.get("added_tokens_decoder") or {}
    specials = [_token_content(v) for v in decoder.values()] if isinstance(decoder, Mapping) else []
    tokenizer_json = path.with_name("tokenizer.json")
    if not specials and tokenizer_json.is_file():
        try:
            added = json.loads(tokenizer_json.read_text(encoding="utf-8")).get("added_tokens") or []
        except (OSError, json.JSONDecodeError) as exc:
            raise RenderError(f"{tokenizer_json}: cannot read it: {exc}") from exc
        specials = [_token_content(t) for t in added if isinstance(t, Mapping)]
    bos = _token_content(config.get("bos_token"))
    eos = _token_content(config.get("eos_token"))
    return JinjaTemplateRender(
        template, special_tokens=[*specials, bos, eos], bos_token=bos, eos_token=eos, name=f"hf:{path}"
    )
