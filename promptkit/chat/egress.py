"""The one mandatory exit: :func:`to_llm_role` and :func:`prepare_llm_messages` (pipeline contract §3, §10).

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

from promptkit.chat.message import WELL_KNOWN_ROLES, Message, WellKnownKinds

__all__ = [
    "CUSTOM_ROLE_MAP",
    "CUSTOM_ROLE_PREFIX",
    "KIND_PREFIX",
    "TOOL_IMAGES_NOTE",
    "prepare_llm_messages",
    "to_llm_role",
    "tool_images_note",
    "well_formed",
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
#: Content of the user message that carries the images of a run of tool results; ``{ids}`` is the source
#: tool call ids joined by ``、`` (:func:`tool_images_note`).
TOOL_IMAGES_NOTE: Final[str] = "[以下图片是工具调用 {ids} 的返回内容]"
#: Joins the call ids in :data:`TOOL_IMAGES_NOTE`.
TOOL_IMAGES_ID_SEPARATOR: Final[str] = "、"


def tool_images_note(call_ids: Sequence[str | None]) -> str:
    """The content of the user message carrying tool-result images: it names every source call id, in
    order; a tool result without ``tool_call_id`` is named ``?``.

    >>> tool_images_note(["call_1", "call_2"])
    '[以下图片是工具调用 call_1、call_2 的返回内容]'
    """
    return TOOL_IMAGES_NOTE.format(ids=TOOL_IMAGES_ID_SEPARATOR.join(i or "?" for i in call_ids))


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
    # The reference's idempotence guard: content that already starts with the prefix gets no second one,
    # whatever follows it ("[系统通知]abc" included).
    return content.startswith(prefix)


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
      joined to non-empty string content by one space; content that already starts with the prefix
      (``[系统通知]abc`` as well as ``[系统通知] abc``) gets none, so the function is idempotent;
    - lone surrogates in string content (and in name, tool_call_id, reasoning_content and tool call
      fields) become U+FFFD so the request serializes as UTF-8 JSON;
    - tool results carrying images: each tool message keeps its text, and the images of a whole run of
      consecutive tool results move to **one** user message placed after that run, whose content names
      every source call id (:func:`tool_images_note`). The tool results stay adjacent to their assistant
      call, as the protocol requires for parallel calls.

    Returns a new list; never mutates its input; a message that needs no change is the same object.
    It does not drop :data:`promptkit.CONTROL_KINDS`: that is the history builder's job
    (:func:`promptkit.drop_control_kinds`).

    >>> from promptkit import ToolCall
    >>> out = prepare_llm_messages([
    ...     Message(role="assistant", tool_calls=[ToolCall("a", "shot"), ToolCall("b", "shot")]),
    ...     Message(role="tool", tool_call_id="a", content="ok", images=["data:image/png;base64,AA"]),
    ...     Message(role="tool", tool_call_id="b", content="ok", images=["data:image/png;base64,BB"])])
    >>> [(m.role, m.content) for m in out]
    [('assistant', None), ('tool', 'ok'), ('tool', 'ok'), ('user', '[以下图片是工具调用 a、b 的返回内容]')]
    >>> out[3].images
    ('data:image/png;base64,AA', 'data:image/png;base64,BB')
    """
    out: list[Message] = []
    pending_images: list[str] = []
    pending_ids: list[str | None] = []

    def flush() -> None:
        if pending_images:
            out.append(Message(role="user", content=tool_images_note(pending_ids), images=tuple(pending_images)))
            pending_images.clear()
            pending_ids.clear()

    for message in messages:
        if to_llm_role(message.role) != "tool":
            flush()
        prepared = _prepare_one(message)
        if prepared.role == "tool" and prepared.images:
            pending_images.extend(prepared.images)
            pending_ids.append(prepared.tool_call_id)
            prepared = attrs.evolve(prepared, images=None)
        out.append(prepared)
    flush()
    return out
