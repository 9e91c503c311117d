"""The LLM protocol layer: :class:`Message`, :class:`ToolCall`, :class:`ContentSegment`.

These map one to one onto the OpenAI / DeepSeek chat-completions protocol (pipeline contract §2, §8).
Messages are values: frozen attrs classes; a function that "changes" one returns a new one
(``attrs.evolve``) and leaves its input untouched.

>>> m = Message(role="user", content="hi", name="u_42")
>>> to_openai_dict(m)
{'role': 'user', 'content': 'hi', 'name': 'u_42'}
>>> from_openai_dict(to_openai_dict(m)) == m
True
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import attrs

from promptkit.errors import MessageFormatError

__all__ = [
    "CONTROL_KINDS",
    "DIRECTIVE_KINDS",
    "WELL_KNOWN_ROLES",
    "ContentSegment",
    "Message",
    "MessageFormatError",
    "ToolCall",
    "WellKnownKinds",
    "WellKnownMetadataKeys",
    "WellKnownRole",
    "from_openai_dict",
    "is_directive",
    "is_directive_block",
    "is_directive_kind",
    "to_openai_dict",
]

WellKnownRole = Literal["system", "user", "assistant", "tool"]
#: The four roles every chat protocol accepts. Any other string is a custom role (``notice``, ...)
#: that must be translated by :func:`promptkit.to_llm_role` before it reaches a provider.
WELL_KNOWN_ROLES: Final[tuple[str, ...]] = ("system", "user", "assistant", "tool")


class WellKnownKinds(enum.StrEnum):
    """``Message.kind`` values the framework defines (orthogonal to ``role``)."""

    EVENT_MARKER = "event-marker"
    CROSS_SESSION_DELEGATION = "cross-session-delegation"
    HOST_NOTICE = "host-notice"
    IDLE_PROMPT = "idle-prompt"
    OUTBOUND_IMAGE = "outbound-image"
    OUTBOUND_AUDIO = "outbound-audio"
    OUTBOUND_VIDEO = "outbound-video"
    OUTBOUND_FILE = "outbound-file"
    OUTBOUND_DELIVERY_FAILED = "outbound-delivery-failed"


#: Kinds that carry no meaning for a model (UI and control markers). The caller that builds the
#: history drops them; :func:`promptkit.prepare_llm_messages` does not.
CONTROL_KINDS: Final[tuple[str, ...]] = (WellKnownKinds.EVENT_MARKER.value,)

#: Directive kinds: written by the host or the system, nobody's speech. Two rules read this list:
#: an *archived* message whose ``kind`` is one of these is skipped by extraction and cross-session reads
#: (:func:`is_directive_kind`); a *request-time* message whose ``metadata["injector"]`` is one of these is
#: the turn's *directive block* (:func:`is_directive_block`): the turn-context and turn-hint anchors land
#: before it, trimming never touches it, DeepSeek normalization keeps it system.
DIRECTIVE_KINDS: Final[tuple[str, ...]] = (
    WellKnownKinds.CROSS_SESSION_DELEGATION.value,
    WellKnownKinds.HOST_NOTICE.value,
    WellKnownKinds.IDLE_PROMPT.value,
)


class WellKnownMetadataKeys(enum.StrEnum):
    """Registered ``Message.metadata`` keys (platform message contract, "存档元数据的键")."""

    VISIBLE_CONTENT = "visibleContent"
    SPOKEN_CONTENT = "spokenContent"
    ATTACHMENTS = "attachments"
    FORWARDS = "forwards"
    SENDER_LABEL = "senderLabel"
    MENTIONS = "mentions"
    PLATFORM = "platform"
    USER_ID = "userId"
    NICKNAME = "nickname"
    GROUP_ID = "groupId"
    GROUP_NAME = "groupName"
    SESSION_TYPE = "sessionType"
    MESSAGE_ID = "messageId"
    SOURCE = "source"
    HOST_NOTICE_KIND = "hostNoticeKind"
    HOST_NOTICE_ID = "hostNoticeId"
    HOST_NOTICE_FACTS = "hostNoticeFacts"
    TURN_ID = "turnId"
    TURN_ENTRY = "turnEntry"
    TRIGGER_TYPE = "triggerType"
    TURN_RECORD = "turnRecord"
    CALL_ID = "callId"
    MODEL_INFO = "modelInfo"
    SENT_REF = "ref"
    SENT_NAME = "name"
    DELIVERY_ERROR = "error"
    SENT_PIECES = "sentPieces"
    UNCONFIRMED = "unconfirmed"
    TEXT = "text"


def _opt_tuple(value: Sequence[Any] | None) -> tuple[Any, ...] | None:
    """Sequences become tuples; an empty one becomes None (one canonical form for "none")."""
    if value is None:
        return None
    items = tuple(value)
    return items or None


def _opt_dict(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if value is None else dict(value)


@attrs.frozen
class ToolCall:
    """One function call an assistant message asks for; ``arguments`` is the raw JSON string."""

    id: str
    name: str
    arguments: str = "{}"

    def parsed_arguments(self) -> Any:
        """The arguments decoded from JSON (raises ``json.JSONDecodeError`` when malformed)."""
        return json.loads(self.arguments)


SegmentType = Literal["text", "reasoning_text", "tool_call"]


@attrs.frozen
class ContentSegment:
    """One entry of an assistant message's ordered timeline (pipeline contract §8).

    ``text`` and ``reasoning_text`` segments carry ``text``; a ``tool_call`` segment carries
    ``tool_call`` and, for display, ``start_time`` / ``end_time`` (milliseconds).
    """

    type: SegmentType = attrs.field(validator=attrs.validators.in_(("text", "reasoning_text", "tool_call")))
    text: str | None = None
    tool_call: ToolCall | None = None
    start_time: float | None = None
    end_time: float | None = None


@attrs.frozen
class Message:
    """A chat message of the LLM protocol layer; every field but ``role`` is optional.

    ``role`` is one of the four well-known roles or any custom string (``notice``...). ``kind`` is
    the sub-class orthogonal to role (:class:`WellKnownKinds`). ``metadata`` is never sent to a model.
    ``timestamp`` is milliseconds since the epoch, as the TypeScript framework stores it.
    """

    role: str
    content: str | None = None
    kind: str | None = None
    name: str | None = None
    tool_calls: tuple[ToolCall, ...] | None = attrs.field(default=None, converter=_opt_tuple)
    tool_call_id: str | None = None
    images: tuple[str, ...] | None = attrs.field(default=None, converter=_opt_tuple)
    audios: tuple[str, ...] | None = attrs.field(default=None, converter=_opt_tuple)
    reasoning_content: str | None = None
    segments: tuple[ContentSegment, ...] | None = attrs.field(default=None, converter=_opt_tuple)
    metadata: dict[str, Any] | None = attrs.field(default=None, converter=_opt_dict, hash=False)
    timestamp: float | None = None

    @property
    def injector(self) -> str | None:
        """``metadata["injector"]``: the contributor key or frame role that placed this message."""
        if not self.metadata:
            return None
        value = self.metadata.get("injector")
        return value if isinstance(value, str) else None


def is_directive_kind(message: Message) -> bool:
    """True when ``message.kind`` is in :data:`DIRECTIVE_KINDS`: an archived host notice, delegation...

    The rule for readers of stored history (extraction, memory windows, cross-session reads skip these).
    It says nothing about the request being built: see :func:`is_directive_block`.

    >>> is_directive_kind(Message(role="notice", kind="host-notice", content="任务完成"))
    True
    """
    return message.kind is not None and message.kind in DIRECTIVE_KINDS


def is_directive_block(message: Message) -> bool:
    """True for this turn's directive block: ``metadata["injector"]`` is in :data:`DIRECTIVE_KINDS`.

    Only a request-time message carries an injector, so an archived notice kept in the history never
    matches, whatever its ``kind`` ("injector 只存在于请求期构造的消息上，不会命中历史记录"). This is the
    rule of the DeepSeek exemption and of trimming.

    >>> is_directive_block(Message(role="system", content="...", metadata={"injector": "idle-prompt"}))
    True
    >>> is_directive_block(Message(role="notice", kind="host-notice", content="任务完成"))
    False
    """
    return message.injector is not None and message.injector in DIRECTIVE_KINDS


def is_directive(message: Message) -> bool:
    """:func:`is_directive_kind` or :func:`is_directive_block`: the loose reading
    :func:`promptkit.assembly.turn_frame` accepts a ``directive`` argument by (it then stamps the kind as
    the injector).

    Placement, trimming and providers recognise this turn's directive block with
    :func:`is_directive_block` (injector only); history readers use :func:`is_directive_kind`.

    >>> is_directive(Message(role="system", content="...", metadata={"injector": "idle-prompt"}))
    True
    """
    return is_directive_kind(message) or is_directive_block(message)


def to_openai_dict(message: Message, *, include_reasoning: bool = False) -> dict[str, Any]:
    """The chat-completions message dict for ``message``.

    Only protocol fields are written: ``kind``, ``metadata``, ``segments``, ``audios`` and
    ``timestamp`` stay on our side. ``images`` become ``image_url`` content parts on user messages
    only (other roles cannot carry them in this protocol; :func:`promptkit.prepare_llm_messages`
    moves a tool result's images into a user message first). ``reasoning_content`` is written only
    with ``include_reasoning=True``; ``name`` only when it is set (an empty name is not written, as
    ``if (msg.name) apiMsg.name = msg.name`` does: OpenAI refuses ``"name": ""``). The role is written as it is: call
    :func:`promptkit.prepare_llm_messages` first.
    """
    out: dict[str, Any] = {"role": message.role}
    if message.images and message.role == "user":
        parts: list[dict[str, Any]] = []
        if message.content is not None:
            parts.append({"type": "text", "text": message.content})
        parts.extend({"type": "image_url", "image_url": {"url": url}} for url in message.images)
        out["content"] = parts
    else:
        out["content"] = message.content
    if message.name:
        out["name"] = message.name
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if include_reasoning and message.reasoning_content is not None:
        out["reasoning_content"] = message.reasoning_content
    return out


def _field(d: Mapping[str, Any], key: str, types: type | tuple[type, ...], where: str) -> Any:
    value = d.get(key)
    if value is not None and not isinstance(value, types):
        raise MessageFormatError(f"{where}: field {key!r} must be {types}, got {type(value).__name__}")
    return value


def _parse_tool_calls(raw: Any, where: str) -> tuple[ToolCall, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise MessageFormatError(f"{where}: field 'tool_calls' must be a list, got {type(raw).__name__}")
    calls = []
    for i, call in enumerate(raw):
        at = f"{where}.tool_calls[{i}]"
        if not isinstance(call, Mapping):
            raise MessageFormatError(f"{at}: must be an object")
        fn = call.get("function")
        if not isinstance(fn, Mapping):
            raise MessageFormatError(f"{at}: field 'function' must be an object")
        name = fn.get("name")
        if not isinstance(name, str):
            raise MessageFormatError(f"{at}.function: field 'name' must be a string")
        args = fn.get("arguments", "{}")
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        call_id = call.get("id")
        if not isinstance(call_id, str):
            raise MessageFormatError(f"{at}: field 'id' must be a string")
        calls.append(ToolCall(id=call_id, name=name, arguments=args))
    return tuple(calls)


def from_openai_dict(d: Mapping[str, Any], *, where: str = "message") -> Message:
    """Parse a chat-completions message dict into a :class:`Message`.

    Inverse of :func:`to_openai_dict`: text and ``image_url`` content parts become ``content`` and
    ``images``; ``tool_calls`` become :class:`ToolCall` values (non-string arguments are re-encoded
    as JSON). Raises :class:`MessageFormatError` naming ``where`` and the field on bad input.
    """
    if not isinstance(d, Mapping):
        raise MessageFormatError(f"{where}: must be an object, got {type(d).__name__}")
    role = d.get("role")
    if not isinstance(role, str):
        raise MessageFormatError(f"{where}: field 'role' must be a string")
    raw_content = d.get("content")
    images: list[str] = []
    content: str | None
    if raw_content is None or isinstance(raw_content, str):
        content = raw_content
    elif isinstance(raw_content, list):
        texts: list[str] = []
        for i, part in enumerate(raw_content):
            at = f"{where}.content[{i}]"
            if isinstance(part, str):
                texts.append(part)
                continue
            if not isinstance(part, Mapping):
                raise MessageFormatError(f"{at}: must be an object")
            ptype = part.get("type")
            if ptype == "text":
                text = part.get("text")
                if not isinstance(text, str):
                    raise MessageFormatError(f"{at}: field 'text' must be a string")
                texts.append(text)
            elif ptype == "image_url":
                img = part.get("image_url")
                url = img.get("url") if isinstance(img, Mapping) else img
                if not isinstance(url, str):
                    raise MessageFormatError(f"{at}: field 'image_url.url' must be a string")
                images.append(url)
            else:
                raise MessageFormatError(f"{at}: unsupported content part type {ptype!r}")
        content = "".join(texts) if texts else None
    else:
        raise MessageFormatError(f"{where}: field 'content' must be a string, a list or null")
    return Message(
        role=role,
        content=content,
        name=_field(d, "name", str, where),
        tool_calls=_parse_tool_calls(d.get("tool_calls"), where),
        tool_call_id=_field(d, "tool_call_id", str, where),
        images=tuple(images) if images else None,
        reasoning_content=_field(d, "reasoning_content", str, where),
    )
