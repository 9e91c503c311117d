"""Archive records: how an incoming message, an outgoing one and a turn's end are kept in the history.

The platform message contract says what the archive writes: the archive text of a question
(:func:`promptkit.build_incoming_content`), the registered metadata keys
(:class:`promptkit.WellKnownMetadataKeys`) and when each is written. This module builds those records as
:class:`~promptkit.Message` values; storing them is the caller's business. Metadata values are plain
JSON (dicts, lists, strings, numbers) with the documents' camelCase keys, so a record can be written to
any store as it is.

>>> from promptkit.chat.platform import IncomingMessage
>>> q = IncomingMessage('<at id="7">阿七</at> 在吗', "g1", "onebot", user_id="42", nickname="小明",
...                     group_id="123", message_id="m1")
>>> rec = archive_record(q)
>>> rec.role, rec.content, rec.name
('user', '[小明(42)]: <at id="7">阿七</at> 在吗', '42')
>>> rec.metadata["spokenContent"], rec.metadata["senderLabel"], rec.metadata["mentions"]
('<at id="7">阿七</at> 在吗', '小明(42)', ['7'])
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs

from promptkit.chat.attachments import ATTACHMENT_REF_KINDS, sanitize_desc
from promptkit.chat.identity import get_message_name, get_sender_label
from promptkit.chat.mentions import extract_mentions
from promptkit.chat.message import Message, WellKnownKinds, WellKnownMetadataKeys as K
from promptkit.chat.platform import (
    ATTACHMENT_KINDS,
    AttachmentKind,
    ForwardedChat,
    ForwardFacts,
    IncomingMessage,
    MessageAttachment,
    OutgoingMessage,
    PlatformMessageError,
    Speaker,
    build_incoming_content,
    outbound_marker_message,
    outbound_media_message,
)

__all__ = [
    "TURN_ENTRIES",
    "TURN_OUTCOMES",
    "ArchivedAttachment",
    "ArchivedForward",
    "TurnEntry",
    "TurnOutcome",
    "TurnRecord",
    "archive_address",
    "archive_record",
    "outbound_records",
    "speaker_of",
    "turn_marker",
]

TurnOutcome = Literal["replied", "silent", "aborted", "error"]
#: How a turn ended (``TurnRecord.outcome``): she replied, stayed silent, was aborted, or failed.
TURN_OUTCOMES: Final[tuple[str, ...]] = ("replied", "silent", "aborted", "error")

TurnEntry = Literal["opened", "joined"]
#: How an input entered a turn (metadata ``turnEntry``): it opened the turn, or joined one already running.
TURN_ENTRIES: Final[tuple[str, ...]] = ("opened", "joined")

# A storage address "<root>:/path" (one slash: "file:///" is a local path, "data:image/png" a data URI)
# or a web address.
_ADDRESS: Final[re.Pattern[str]] = re.compile(r"^(?:https?://|[A-Za-z0-9_-]+:/(?!/))", re.IGNORECASE)


def archive_address(attachment: MessageAttachment) -> str | None:
    """The address the archive records for an attachment: the preprocessor's ``ref``, else ``url``, else
    ``data`` when it is an address (a storage address ``<root>:/path`` or an http(s) URL); None otherwise
    (inline data, ``base64://``, ``file://`` and local paths are not addresses). The attachment
    descriptions are never read for it.

    >>> archive_address(MessageAttachment("image", data="/tmp/a.png")) is None
    True
    >>> archive_address(MessageAttachment("image", data="data:/img/a.png"))
    'data:/img/a.png'
    """
    if attachment.ref:
        return attachment.ref
    if attachment.url:
        return attachment.url
    if attachment.data and _ADDRESS.match(attachment.data):
        return attachment.data
    return None


@attrs.frozen
class ArchivedAttachment:
    """One attachment of an archived question (metadata ``attachments``): kind, file name, address."""

    kind: AttachmentKind = attrs.field(validator=attrs.validators.in_(ATTACHMENT_KINDS))
    name: str | None = None
    ref: str | None = None

    @classmethod
    def of(cls, attachment: MessageAttachment) -> ArchivedAttachment:
        """The archived form of an incoming attachment (:func:`archive_address` as ``ref``).

        >>> ArchivedAttachment.of(MessageAttachment("file", data="base64://AA", name="表.xlsx", ref="data:/f/1"))
        ArchivedAttachment(kind='file', name='表.xlsx', ref='data:/f/1')
        """
        return cls(attachment.kind, name=attachment.name, ref=archive_address(attachment))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``kind``, and ``name`` / ``ref`` when set."""
        out: dict[str, Any] = {"kind": self.kind}
        if self.name is not None:
            out["name"] = self.name
        if self.ref is not None:
            out["ref"] = self.ref
        return out


@attrs.frozen
class ArchivedForward:
    """A forwarded chat as the archive keeps it (metadata ``forwards``): its id and its facts, without the
    expansion (which is already in the archive text, in the placeholder's place)."""

    id: str
    facts: ForwardFacts | None = None

    @classmethod
    def of(cls, forward: ForwardedChat) -> ArchivedForward:
        """The archived form of a forwarded chat (``Omit<ForwardedChat, 'content'>``)."""
        return cls(forward.id, facts=forward.facts)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``id``, and ``facts`` (``count``, ``participants``, ``unlisted``?, ``text``,
        ``cutOff``?) when there are facts.

        >>> from promptkit.chat.platform import ForwardFacts
        >>> ArchivedForward("f1", ForwardFacts(3, ["A(1)"], "聊天")).to_dict()
        {'id': 'f1', 'facts': {'count': 3, 'participants': ['A(1)'], 'text': '聊天'}}
        """
        out: dict[str, Any] = {"id": self.id}
        f = self.facts
        if f is not None:
            facts: dict[str, Any] = {"count": f.count, "participants": list(f.participants)}
            if f.unlisted is not None:
                facts["unlisted"] = f.unlisted
            facts["text"] = f.text
            if f.cut_off:
                facts["cutOff"] = True
            out["facts"] = facts
        return out


@attrs.frozen
class TurnRecord:
    """How a turn ended (metadata ``turnRecord``): ``outcome`` and the turn's ``source`` (the input's
    source; None for a turn a person opened)."""

    outcome: TurnOutcome = attrs.field(validator=attrs.validators.in_(TURN_OUTCOMES))
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``{"outcome": ..., "source"?: ...}``.

        >>> TurnRecord("silent", source="cron").to_dict()
        {'outcome': 'silent', 'source': 'cron'}
        """
        return (
            {"outcome": self.outcome}
            if self.source is None
            else {"outcome": self.outcome, "source": self.source}
        )


def turn_marker(turn_id: str, record: TurnRecord, *, timestamp: float | None = None) -> Message:
    """The record of a turn that archived no reply (silent, aborted, error): an empty event marker
    (``role: 'system'``, ``kind: 'event-marker'``; never sent to a model, never summarized) carrying only
    ``turnId`` and ``turnRecord``. A replied turn writes its ``turnRecord`` on its last reply instead.

    >>> turn_marker("t7", TurnRecord("aborted")).metadata
    {'turnId': 't7', 'turnRecord': {'outcome': 'aborted'}}
    """
    if not turn_id:
        raise PlatformMessageError("turn_marker: turn_id must be a non-empty string")
    return Message(
        role="system",
        content="",
        kind=WellKnownKinds.EVENT_MARKER.value,
        metadata={K.TURN_ID.value: turn_id, K.TURN_RECORD.value: record.to_dict()},
        timestamp=timestamp,
    )


def speaker_of(incoming: IncomingMessage) -> IncomingMessage | None:
    """Who the archive names as the speaker of ``incoming`` (the sender prefix and ``senderLabel``).

    A person's message with a ``user_id`` or ``nickname`` is spoken by its sender; a host notice and a
    delegated task (``trigger_type='proactive'``) are nobody's speech and have no speaker, nor does a
    message with no sender fields. The platform is not looked at. (The reference's own rule,
    ``speakerOf`` of the message-archive API, is not in the material we have; this is the rule the
    documents imply.)

    >>> speaker_of(IncomingMessage("hi", "s", "webui", user_id="u1")) is not None
    True
    >>> speaker_of(IncomingMessage("任务", "s", "onebot", source="wf", trigger_type="proactive")) is None
    True
    """
    if incoming.host_notice is not None or incoming.trigger_type == "proactive":
        return None
    if not incoming.user_id and not incoming.nickname:
        return None
    return incoming


_UNSET: Any = object()


def archive_record(
    incoming: IncomingMessage,
    *,
    speaker: Speaker | None = _UNSET,
    timestamp: float | None = None,
    turn_id: str | None = None,
    turn_entry: TurnEntry | None = None,
) -> Message | None:
    """The archived :class:`Message` for ``incoming``, or None for an ``idle`` trigger (never archived).

    Role and kind:

    - a host notice: ``role: 'notice'``, ``kind: 'host-notice'``, no ``name``; only its ``content`` is
      kept (no prefix, never the ``untrusted`` segment, ``from_turn`` or ``reply_to``); metadata
      ``hostNoticeKind`` and, when set, ``hostNoticeId`` and ``hostNoticeFacts``;
    - a delegated task (``trigger_type='proactive'``): ``role: 'notice'``, ``kind: 'cross-session-delegation'``;
    - anything else: ``role: 'user'`` with ``name`` from :func:`promptkit.get_message_name`, and
      ``notice_type`` (``poke``...) as its ``kind``.

    Content: :func:`promptkit.build_incoming_content` with ``speaker`` (default :func:`speaker_of`).

    Metadata, each key only when the documents say so: ``platform``, ``userId``, ``nickname``,
    ``groupId``, ``groupName``, ``sessionType``, ``messageId``, ``source``, ``triggerType`` when set;
    ``spokenContent`` (the input's own ``content``, possibly empty) only when it differs from the archive
    text; ``attachments`` (:class:`ArchivedAttachment`, in order) when there are attachments; ``forwards``
    (:class:`ArchivedForward`) when there are forwards; ``senderLabel`` only when a sender prefix was
    added; ``mentions`` (:func:`promptkit.extract_mentions` of the input's own ``content``, not of quotes,
    descriptions or forwards) when there are some; ``text`` (the event's or host notice's text object)
    when set; ``turnId`` / ``turnEntry`` when given (``turn_entry`` needs ``turn_id``). The metadata is
    None when it would be empty.

    >>> from promptkit.chat.platform import HostNotice, self_initiated_actor
    >>> n = IncomingMessage("任务 t1 完成", "s", "webui", source="bg:t1", actor=self_initiated_actor("webui"),
    ...                     host_notice=HostNotice("background-task", id="t1", untrusted="<u>x</u>", facts={"code": 0}))
    >>> rec = archive_record(n)
    >>> rec.role, rec.kind, rec.content
    ('notice', 'host-notice', '任务 t1 完成')
    >>> rec.metadata
    {'platform': 'webui', 'source': 'bg:t1', 'hostNoticeKind': 'background-task', 'hostNoticeId': 't1', 'hostNoticeFacts': {'code': 0}}
    """
    if incoming.trigger_type == "idle":
        return None
    if turn_entry is not None:
        if turn_entry not in TURN_ENTRIES:
            raise PlatformMessageError(
                f"archive_record: turn_entry must be one of {', '.join(TURN_ENTRIES)}; got {turn_entry!r}"
            )
        if turn_id is None:
            raise PlatformMessageError(
                "archive_record: turn_entry is written with turn_id; turn_id is missing"
            )
    notice = incoming.host_notice
    who = speaker_of(incoming) if speaker is _UNSET else speaker
    if notice is not None:
        content = incoming.content
        label = None
    else:
        content = build_incoming_content(incoming, who)
        label = get_sender_label(who.nickname, who.user_id) if who is not None else None

    meta: dict[str, Any] = {}

    def put(key: K, value: Any) -> None:
        if value is not None:
            meta[key.value] = value

    put(K.PLATFORM, incoming.platform or None)
    put(K.USER_ID, incoming.user_id or None)
    put(K.NICKNAME, incoming.nickname or None)
    put(K.GROUP_ID, incoming.group_id or None)
    put(K.GROUP_NAME, incoming.group_name or None)
    put(K.SESSION_TYPE, incoming.session_type or None)
    put(K.MESSAGE_ID, incoming.message_id or None)
    put(K.SOURCE, incoming.source)
    put(K.TRIGGER_TYPE, incoming.trigger_type)
    if notice is None:
        if incoming.content != content:
            put(K.SPOKEN_CONTENT, incoming.content)
        if incoming.attachments:
            put(K.ATTACHMENTS, [ArchivedAttachment.of(a).to_dict() for a in incoming.attachments])
        if incoming.forwards:
            put(K.FORWARDS, [ArchivedForward.of(f).to_dict() for f in incoming.forwards])
        put(K.SENDER_LABEL, label)
        mentions = extract_mentions(incoming.content)
        put(K.MENTIONS, mentions or None)
        put(K.TEXT, incoming.text)
    else:
        put(K.HOST_NOTICE_KIND, notice.kind)
        put(K.HOST_NOTICE_ID, notice.id)
        put(K.HOST_NOTICE_FACTS, dict(notice.facts) if notice.facts else None)
        put(K.TEXT, notice.text)
    put(K.TURN_ID, turn_id)
    put(K.TURN_ENTRY, turn_entry)

    role: str = "user"
    kind: str | None = incoming.notice_type
    name: str | None = get_message_name(incoming.user_id)
    if notice is not None:
        role, kind, name = "notice", WellKnownKinds.HOST_NOTICE.value, None
    elif incoming.trigger_type == "proactive":
        role, kind, name = "notice", WellKnownKinds.CROSS_SESSION_DELEGATION.value, None
    return Message(
        role=role, content=content, kind=kind, name=name, metadata=meta or None, timestamp=timestamp
    )


def _outbound_meta(msg: OutgoingMessage, extra: Mapping[str, Any]) -> dict[str, Any] | None:
    meta: dict[str, Any] = dict(extra)
    if msg.source is not None:
        meta[K.SOURCE.value] = msg.source
    if msg.turn_id is not None:
        meta[K.TURN_ID.value] = msg.turn_id
    if msg.call_id is not None:
        meta[K.CALL_ID.value] = msg.call_id
    return meta or None


def _unaddressed_marker(kind: str, desc: str | None) -> Message:
    """The event marker recorded for an outbound attachment that has no address (see
    :func:`outbound_records`): the placeholder of its kind and description, without ``| ref:``."""
    label = ATTACHMENT_REF_KINDS[kind].value
    text = sanitize_desc(desc) if desc else ""
    return Message(
        role="system",
        content=f"[{label}: {text}]" if text else f"[{label}]",
        kind=WellKnownKinds.EVENT_MARKER.value,
    )


def outbound_records(msg: OutgoingMessage, *, timestamp: float | None = None) -> list[Message]:
    """What the archive records for a delivered outbound message (``recordOutbound``), in order:

    - the text, when it is not her reply: :func:`promptkit.outbound_marker_message` (her reply is
      archived by the agent with its reasoning and segments, not here);
    - one :func:`promptkit.outbound_media_message` per attachment that has an address, whatever ``markup``
      says (those with ``skip_archive`` set are left out): the address is :func:`archive_address` (the
      attachment's ``ref``, else ``url``, else ``data`` when it is a storage address or a web address);
      the description slot is the ``description`` (for a file, the file ``name``); metadata ``ref`` /
      ``name`` (the address and the file name as given);
    - an attachment without an address (inline data such as ``base64://…`` or a ``data:`` URI, a local
      path, nothing at all) is no media reference the history could show again: it is recorded as an
      event marker (``system``, kind ``event-marker``, kept out of the model's context) whose content is
      the placeholder without an address, ``[图片: 描述]``; the inline payload never reaches the history.

    Every record gets ``source``, ``turnId`` and ``callId`` from the outbound message when set.

    >>> out = OutgoingMessage("", "s", source="agent", turn_id="t1", attachments=[
    ...     MessageAttachment("image", ref="data:/img/1.png", description="猫"),
    ...     MessageAttachment("image", ref="data:/img/0.png", skip_archive=True)])
    >>> [(r.role, r.content, r.metadata) for r in outbound_records(out)]
    [('assistant', '[图片: 猫 | ref:data:/img/1.png]', {'ref': 'data:/img/1.png', 'source': 'agent', 'turnId': 't1'})]
    """
    records: list[Message] = []
    marker = outbound_marker_message(msg)
    if marker is not None:
        meta = _outbound_meta(msg, marker.metadata or {})
        records.append(attrs.evolve(marker, metadata=meta, timestamp=timestamp))
    for att in msg.attachments or ():
        if att.skip_archive:
            continue
        ref = archive_address(att)
        desc = (att.name or att.description) if att.kind == "file" else att.description
        if ref is None:
            marker = _unaddressed_marker(att.kind, desc)
            records.append(attrs.evolve(marker, metadata=_outbound_meta(msg, {}), timestamp=timestamp))
            continue
        sent: dict[str, Any] = {K.SENT_REF.value: ref}
        if att.name is not None:
            sent[K.SENT_NAME.value] = att.name
        media = outbound_media_message(att.kind, ref, desc=desc, source=msg.source)
        records.append(attrs.evolve(media, metadata=_outbound_meta(msg, sent), timestamp=timestamp))
    return records
