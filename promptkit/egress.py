"""The one mandatory exit: :func:`to_llm_role` and :func:`prepare_llm_messages` (pipeline seed §3, §10).

Every provider calls :func:`prepare_llm_messages` before it serializes a request body. It translates
custom roles to the four well-known ones and writes a readable prefix into the content:

>>> from promptkit import Message
>>> [m.content for m in prepare_llm_messages([Message(role="notice", content="服务重启")])]
['[系统通知] 服务重启']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import attrs

from promptkit.schema.message import WELL_KNOWN_ROLES, Message, WellKnownKinds

__all__ = [
    "CUSTOM_ROLE_MAP",
    "CUSTOM_ROLE_PREFIX",
    "KIND_PREFIX",
    "TOOL_IMAGES_NOTE",
    "prepare_llm_messages",
    "to_llm_role",
]

#: Custom roles with a documented translation; any other unknown role falls back to ``system``.
CUSTOM_ROLE_MAP: Final[dict[str, str]] = {"notice": "system"}
#: Kind-level prefixes (checked first).
KIND_PREFIX: Final[dict[str, str]] = {
    WellKnownKinds.CROSS_SESSION_DELEGATION.value: "[跨会话委派]",
    WellKnownKinds.HOST_NOTICE.value: "[宿主通知]",
}
#: Role-level prefixes (used when the kind has none).
CUSTOM_ROLE_PREFIX: Final[dict[str, str]] = {"notice": "[系统通知]"}
#: Content of the user message that carries a tool result's images; ``{id}`` is the tool call id.
TOOL_IMAGES_NOTE: Final[str] = "[工具结果图片] 以下图片来自工具调用 {id} 的结果"


def to_llm_role(role: str) -> str:
    """Translate any role to one of the four well-known ones.

    >>> to_llm_role("assistant"), to_llm_role("notice"), to_llm_role("observation")
    ('assistant', 'system', 'system')
    """
    if role in WELL_KNOWN_ROLES:
        return role
    return CUSTOM_ROLE_MAP.get(role, "system")


def _prefix_for(message: Message) -> str | None:
    if message.kind is not None and message.kind in KIND_PREFIX:
        return KIND_PREFIX[message.kind]
    return CUSTOM_ROLE_PREFIX.get(message.role)


def _has_prefix(content: str, prefix: str) -> bool:
    return content == prefix or content.startswith(prefix + " ")


def well_formed(text: str) -> str:
    """``text`` with every lone UTF-16 surrogate replaced by U+FFFD (a valid pair is joined).

    >>> well_formed("a\\ud800b") == "a\\ufffdb"
    True
    """
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _clean_strings(message: Message) -> dict[str, object]:
    """Changes that make every string field other than content well-formed UTF-8."""
    changes: dict[str, object] = {}
    for field in ("name", "tool_call_id", "reasoning_content"):
        value = getattr(message, field)
        if isinstance(value, str) and well_formed(value) != value:
            changes[field] = well_formed(value)
    if message.tool_calls:
        calls = tuple(
            attrs.evolve(
                c, id=well_formed(c.id), name=well_formed(c.name), arguments=well_formed(c.arguments)
            )
            for c in message.tool_calls
        )
        if calls != message.tool_calls:
            changes["tool_calls"] = calls
    return changes


def _prepare_one(message: Message) -> Message:
    changes = _clean_strings(message)
    role = to_llm_role(message.role)
    if role != message.role:
        changes["role"] = role
    content = message.content
    if isinstance(content, str) and content:
        fixed = well_formed(content)
        prefix = _prefix_for(message)
        if prefix is not None and not _has_prefix(fixed, prefix):
            fixed = f"{prefix} {fixed}"
        if fixed != content:
            changes["content"] = fixed
    return attrs.evolve(message, **changes) if changes else message  # type: ignore[arg-type]


def prepare_llm_messages(messages: Sequence[Message]) -> list[Message]:
    """Make ``messages`` safe for any chat-completions provider.

    - role normalization: well-known roles unchanged, ``notice`` -> ``system``, any other -> ``system``;
    - readable prefix, kind first (``[跨会话委派]``, ``[宿主通知]``), then role (``[系统通知]``),
      joined to non-empty string content by one space, never stacked (idempotent);
    - lone surrogates in string content (and in name, tool_call_id, reasoning_content and tool call
      fields) become U+FFFD so the request serializes as UTF-8 JSON;
    - a tool message carrying images keeps its text, and the images move to a user message that says
      which tool call they came from, placed after the run of tool results (so the tool results stay
      adjacent to their assistant call, as the protocol requires).

    Returns a new list; never mutates its input; a message that needs no change is the same object.
    It does not drop :data:`promptkit.CONTROL_KINDS`: that is the history builder's job
    (:func:`promptkit.drop_control_kinds`).
    """
    out: list[Message] = []
    pending_images: list[Message] = []
    for message in messages:
        if pending_images and to_llm_role(message.role) != "tool":
            out.extend(pending_images)
            pending_images = []
        prepared = _prepare_one(message)
        if prepared.role == "tool" and prepared.images:
            note = TOOL_IMAGES_NOTE.format(id=prepared.tool_call_id or "?")
            pending_images.append(Message(role="user", content=note, images=prepared.images))
            prepared = attrs.evolve(prepared, images=None)
        out.append(prepared)
    out.extend(pending_images)
    return out
