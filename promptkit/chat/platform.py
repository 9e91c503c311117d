"""The platform layer: what adapters emit and receive (platform message contract).

:class:`IncomingMessage` flows in from a platform adapter (OneBot, WebUI, CLI), :class:`OutgoingMessage`
flows out to one. They are platform semantics and stay strictly apart from the LLM protocol layer
(:class:`promptkit.Message`); the helpers here are the few documented bridges between the two:

- :func:`build_incoming_content`: the archive text of an incoming message (forwards expanded in place,
  sender prefix, reply quote, attachment descriptions);
- :func:`forward_placeholder` / :func:`with_forwards`: a forwarded chat's place in ``content``;
- :func:`outbound_media_message` / :func:`outbound_marker_message`: how outbound attachments and
  outbound text that is not her reply are archived into the conversation history;
- :func:`one_speaker`, :func:`was_addressed`, :func:`arrival_tag`: small judgements every reader shares.

Field names are the contract's, in snake_case (``sessionId`` -> ``session_id``). Every optional field
defaults to ``None`` ("not set" in the contract); validators enforce the contract's "must" rules at the boundary
and raise :class:`PlatformMessageError` naming the class and the field. ``TextRef`` values (the i18n text
objects of ``@aalis/schema-i18n``) are opaque here: they are stored and passed on as given.

>>> incoming = IncomingMessage("看这个", "s1", "onebot", user_id="42", nickname="小明")
>>> build_incoming_content(incoming, speaker=incoming)
'[小明(42)]: 看这个'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal, Protocol

import attrs

from promptkit.chat.attachments import ATTACHMENT_REF_KINDS, AttachmentRef, format_attachment_ref
from promptkit.chat.identity import get_sender_label, prefix_sender
from promptkit.chat.message import Message, WellKnownKinds, WellKnownMetadataKeys
from promptkit.errors import PlatformMessageError

__all__ = [
    "ATTACHMENT_KINDS",
    "FORWARD_PLACEHOLDER_TEXT",
    "GROUP_ROLES",
    "HOST_NOTICE_INJECTOR",
    "HOST_NOTICE_PREFIX",
    "OUTGOING_SOURCES",
    "PRIVATE_SESSION",
    "REPLY_QUOTE",
    "TRIGGER_TYPES",
    "Actor",
    "AttachmentKind",
    "ForwardFacts",
    "ForwardedChat",
    "FromTurn",
    "HostNotice",
    "IncomingMessage",
    "MessageAttachment",
    "ModelInfo",
    "OutgoingMessage",
    "OutgoingSource",
    "PlatformMessageError",
    "ReplyTo",
    "SessionTypeDecl",
    "Speaker",
    "TriggerType",
    "arrival_tag",
    "build_incoming_content",
    "forward_placeholder",
    "host_notice_message",
    "one_speaker",
    "outbound_marker_message",
    "outbound_media_message",
    "reply_quote_line",
    "self_initiated_actor",
    "session_type_of",
    "was_addressed",
    "with_forwards",
]

TriggerType = Literal["direct", "immediate", "interval", "idle", "proactive"]
#: ``IncomingMessage.trigger_type`` values: direct (private chat / a single user, ``user_id`` is the main
#: speaker), immediate (group chat, she was @-ed or named), interval (group chat, picked by frequency or
#: activity, no explicit main speaker), idle (idle auto-trigger, no ``user_id``), proactive (a task the
#: system hands the agent; ``content`` is the task, not someone's speech).
TRIGGER_TYPES: Final[tuple[str, ...]] = ("direct", "immediate", "interval", "idle", "proactive")

AttachmentKind = Literal["image", "audio", "video", "file"]
#: ``MessageAttachment.kind`` values (the keys of :data:`promptkit.ATTACHMENT_REF_KINDS`).
ATTACHMENT_KINDS: Final[tuple[str, ...]] = ("image", "audio", "video", "file")

OutgoingSource = Literal["agent", "system", "command"]
#: ``OutgoingMessage.source``: agent = sent by her (her reply, attachments she sent through a tool),
#: system = a host hint, command = a command's reply.
OUTGOING_SOURCES: Final[tuple[str, ...]] = ("agent", "system", "command")

GroupRole = Literal["owner", "admin", "member"]
#: A group member's role (``sender_role``, ``self_role``).
GROUP_ROLES: Final[tuple[str, ...]] = ("owner", "admin", "member")

#: The visible text of a forward placeholder: ``<forward id="…">[合并转发消息]</forward>``.
FORWARD_PLACEHOLDER_TEXT: Final[str] = "[合并转发消息]"

_OUTBOUND_KINDS: Final[dict[str, str]] = {
    "image": WellKnownKinds.OUTBOUND_IMAGE.value,
    "audio": WellKnownKinds.OUTBOUND_AUDIO.value,
    "video": WellKnownKinds.OUTBOUND_VIDEO.value,
    "file": WellKnownKinds.OUTBOUND_FILE.value,
}


# --- validators ---------------------------------------------------------------------------------------


def _one_of(choices: tuple[str, ...]) -> Any:
    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None and value not in choices:
            raise PlatformMessageError(
                f"{type(instance).__name__}.{attribute.name}: must be one of {', '.join(choices)}; got {value!r}"
            )

    return check


def _opt_tuple(value: Sequence[Any] | None) -> tuple[Any, ...] | None:
    return None if value is None else tuple(value)


def _str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _actor_tuple(value: Iterable[Actor]) -> tuple[Actor, ...]:
    return tuple(value)


def _opt_dict(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if value is None else dict(value)


def _no_quote(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if '"' in value:
        raise PlatformMessageError(
            f"{type(instance).__name__}.{attribute.name}: a forward id must not contain a double quote; got {value!r}"
        )


def _non_negative_int(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise PlatformMessageError(
            f"{type(instance).__name__}.{attribute.name}: must be a non-negative int; got {value!r}"
        )


def _positive_int(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise PlatformMessageError(
            f"{type(instance).__name__}.{attribute.name}: must be a positive int or absent; got {value!r}"
        )


# --- small value classes ------------------------------------------------------------------------------


@attrs.frozen
class Actor:
    """An authorization identity ``{platform, userId}``: ``IncomingMessage.actor`` and ``FromTurn.participants``.

    An empty ``user_id`` means "no subject" (``selfInitiatedActor(platform)``: judged at the default
    level, never as owner).
    """

    platform: str
    user_id: str


@attrs.frozen
class ReplyTo:
    """The message an incoming message quotes: its platform message id and, when known, its text and sender."""

    message_id: str
    content: str | None = None
    user_id: str | None = None
    nickname: str | None = None


@attrs.frozen
class ForwardFacts:
    """Facts about a forwarded chat, for the UI (never for the model).

    ``count`` is the number of top-level entries; ``participants`` at most the first 8 people (written as
    the adapter chooses, e.g. OneBot's ``昵称(账号)``); ``unlisted`` the number of people not listed (None
    when all are listed: the contract writes no ``unlisted`` then, so 0 is refused); ``text`` the summary or the (maybe truncated) text; ``cut_off`` True when the
    text was truncated, else None.
    """

    count: int = attrs.field(validator=_non_negative_int)
    participants: tuple[str, ...] = attrs.field(converter=_str_tuple)
    text: str
    unlisted: int | None = attrs.field(default=None, validator=_positive_int)
    cut_off: Literal[True] | None = attrs.field(default=None)

    @participants.validator
    def _at_most_eight(self, attribute: attrs.Attribute[tuple[str, ...]], value: tuple[str, ...]) -> None:
        if len(value) > 8:
            raise PlatformMessageError(f"ForwardFacts.participants: at most 8 are listed; got {len(value)}")

    @cut_off.validator
    def _true_or_none(self, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is not None and value is not True:
            raise PlatformMessageError(f"ForwardFacts.cut_off: must be True or None; got {value!r}")


@attrs.frozen
class ForwardedChat:
    """A chat forwarded with a message (e.g. a OneBot merged forward).

    ``id`` is the platform's forward id; its placeholder in ``content`` is :func:`forward_placeholder`.
    ``content`` is the expansion for the model (the archive text puts it in the placeholder's place; a
    reason when it could not be fetched; the placeholder itself when the adapter turned expansion off).
    ``facts`` is for the UI and absent when the content could not be fetched or expansion is off.
    """

    id: str = attrs.field(validator=_no_quote)
    content: str
    facts: ForwardFacts | None = None


@attrs.frozen
class FromTurn:
    """The turn that started this one (a continuation or a sub-task carries it).

    ``participants`` are that call's authorization identities; ``user_id`` that turn's physical speaker;
    ``source`` that turn's source (None when a person sent it); ``from_turn`` the turn that started that one.
    Not a speaker: archive, profiles, relations and prompt hooks ignore it.
    """

    platform: str
    participants: tuple[Actor, ...] = attrs.field(converter=_actor_tuple)
    user_id: str | None = None
    source: str | None = None
    from_turn: FromTurn | None = None


@attrs.frozen
class HostNotice:
    """An event notice written by the host (nobody's speech), e.g. a background task's end notice.

    ``kind`` is the notice's sub-class (``'background-task'``), ``id`` the injector's notice id,
    ``untrusted`` an already wrapped untrusted segment (put last, never archived), ``report_only`` asks
    the agent to relay the host's result without tools, ``reply_to`` the platform message id to quote
    when replying, ``facts`` flat key/values for the UI (never for the model; each value a string or a
    number, checked), ``text`` an i18n text object.
    On an :class:`OutgoingMessage` only ``kind`` and ``id`` may be set (:meth:`for_outbound`).
    """

    kind: str
    id: str | None = None
    untrusted: str | None = None
    report_only: bool | None = None
    reply_to: str | None = None
    facts: dict[str, str | int | float] | None = attrs.field(default=None, converter=_opt_dict, hash=False)
    text: Any = attrs.field(default=None, hash=False)

    @facts.validator
    def _flat_facts(self, attribute: attrs.Attribute[Any], value: dict[str, Any] | None) -> None:
        for key, fact in (value or {}).items():
            if not isinstance(key, str):
                raise PlatformMessageError(f"HostNotice.facts: keys must be strings; got {key!r}")
            if isinstance(fact, bool) or not isinstance(fact, (str, int, float)):
                raise PlatformMessageError(
                    f"HostNotice.facts[{key!r}]: facts are flat, a string or a number; got {type(fact).__name__}"
                )

    def for_outbound(self) -> HostNotice:
        """The outbound correlation: only ``kind`` and ``id`` (no untrusted text, no caller identity).

        >>> HostNotice("background-task", id="t1", untrusted="...").for_outbound()
        HostNotice(kind='background-task', id='t1', untrusted=None, report_only=None, reply_to=None, facts=None, text=None)
        """
        return HostNotice(self.kind, id=self.id)


@attrs.frozen
class MessageAttachment:
    """A multimodal attachment: the only entry point adapters fill for media.

    ``kind`` is image / audio / video / file. ``data`` is what the adapter received (inline data, a
    local path, a URL...); ``url`` a network address when the platform gives one; ``ref`` the stored
    address (``<root>:/path``) a preprocessor wrote after saving or replacing ``data``. ``name`` is the
    file name, ``mime_type`` the media type, ``description`` the attachment's own text description
    (outbound: the description written into the archived ref placeholder). ``skip_archive`` (outbound):
    the attachment is sent but not archived (a re-send of media already in the history).

    :attr:`address` is what the archive and the description placeholders cite: ``ref``, else ``url``,
    else ``data`` when it is not inline (``data:`` URIs and ``base64://`` payloads are not addresses).
    """

    kind: AttachmentKind = attrs.field(validator=_one_of(ATTACHMENT_KINDS))
    data: str | None = None
    url: str | None = None
    ref: str | None = None
    name: str | None = None
    mime_type: str | None = None
    description: str | None = None
    skip_archive: bool | None = None

    @property
    def address(self) -> str | None:
        """``ref``, else ``url``, else ``data`` unless it is inline data; None when there is none.

        >>> MessageAttachment("image", data="data:image/png;base64,AA", ref="data:/img/a.png").address
        'data:/img/a.png'
        >>> MessageAttachment("image", data="base64://AA").address is None
        True
        """
        if self.ref:
            return self.ref
        if self.url:
            return self.url
        if self.data and not self.data.startswith(("data:", "base64://")):
            return self.data
        return None


@attrs.frozen
class ModelInfo:
    """Which model produced a turn's reply and the turn's tokens (``OutgoingMessage.model_info``).

    ``prompt_tokens`` is the context when the reply was finalized, ``completion_tokens`` the sum of the
    turn's calls' outputs.
    """

    provider: str | None = None
    model: str | None = None
    prompt_tokens: int | None = attrs.field(default=None, validator=_non_negative_int)
    completion_tokens: int | None = attrs.field(default=None, validator=_non_negative_int)

    @property
    def total_tokens(self) -> int | None:
        """``prompt_tokens + completion_tokens``; None unless both are known."""
        if self.prompt_tokens is None or self.completion_tokens is None:
            return None
        return self.prompt_tokens + self.completion_tokens


# --- incoming and outgoing ----------------------------------------------------------------------------


@attrs.frozen
class IncomingMessage:
    """A message an adapter emits on ``inbound:message`` (platform message contract, "IncomingMessage 关键字段").

    Required: ``content`` (the text; a chat forwarded with the message only leaves its
    :func:`forward_placeholder` here, the expansion is in ``forwards``), ``session_id``, ``platform``.
    Every other field is keyword-only and ``None`` when not set:

    - ``user_id``, ``nickname``, ``message_id`` (the platform's message id, used to look up quoted
      messages), ``self_id`` (the bot account that received it), ``session_type`` (one of the adapter's
      declared session types; None lets session management pick the default);
    - ``attachments`` (the only multimodal entry) and ``attachment_descriptions`` (text descriptions
      written by a media plugin, aligned by index with ``attachments``; None where an attachment has none);
    - ``source`` (the system-side injector; a person's message has none: injected messages skip the
      trigger, cooldown and command parsing and are never merged with other inputs), ``owner_approved``
      (the injector declares the owner saw the original text; requires ``source``), ``arrival`` (the
      gateway's per-run arrival number, logs only);
    - group facts: ``group_name``, ``group_id``, ``sender_role`` / ``self_role`` (owner / admin /
      member), ``sender_title`` / ``self_title``;
    - ``reply_to`` (:class:`ReplyTo`), ``forwards`` (:class:`ForwardedChat`, in order of appearance);
    - ``notice_type`` (a non-message event such as ``poke``; archived as the message kind),
      ``notice_target_is_self`` (False: a poke at someone else; None keeps "poke at the bot"),
      ``text`` (the human-readable sentence of a synthesized event; an i18n text object, never for the model);
    - ``trigger_type`` (:data:`TRIGGER_TYPES`), ``actor`` (the identity the AI acts for),
      ``from_turn`` (:class:`FromTurn`), ``host_notice`` (:class:`HostNotice`).

    The contract's "must" rules are enforced: ``owner_approved`` and ``host_notice`` require ``source``; a host
    notice sets no ``user_id``, ``nickname``, ``session_type`` or ``trigger_type``; an ``idle`` trigger has no
    ``user_id`` (nobody spoke: the idle auto-trigger starts a topic on its own); one that carries
    ``from_turn`` is on that turn's platform, and one that continues no call carries
    ``actor=self_initiated_actor(platform)`` (no subject: never a real user's identity, never none); a
    message with ``from_turn`` sets no ``actor``; there are no more descriptions than attachments.
    """

    content: str
    session_id: str
    platform: str
    user_id: str | None = attrs.field(default=None, kw_only=True)
    nickname: str | None = attrs.field(default=None, kw_only=True)
    message_id: str | None = attrs.field(default=None, kw_only=True)
    attachments: tuple[MessageAttachment, ...] | None = attrs.field(
        default=None, kw_only=True, converter=_opt_tuple
    )
    attachment_descriptions: tuple[str | None, ...] | None = attrs.field(
        default=None, kw_only=True, converter=_opt_tuple
    )
    session_type: str | None = attrs.field(default=None, kw_only=True)
    self_id: str | None = attrs.field(default=None, kw_only=True)
    source: str | None = attrs.field(default=None, kw_only=True)
    arrival: int | None = attrs.field(default=None, kw_only=True, validator=_non_negative_int)
    owner_approved: bool | None = attrs.field(default=None, kw_only=True)
    group_name: str | None = attrs.field(default=None, kw_only=True)
    group_id: str | None = attrs.field(default=None, kw_only=True)
    sender_role: GroupRole | None = attrs.field(default=None, kw_only=True, validator=_one_of(GROUP_ROLES))
    sender_title: str | None = attrs.field(default=None, kw_only=True)
    self_role: GroupRole | None = attrs.field(default=None, kw_only=True, validator=_one_of(GROUP_ROLES))
    self_title: str | None = attrs.field(default=None, kw_only=True)
    reply_to: ReplyTo | None = attrs.field(default=None, kw_only=True)
    forwards: tuple[ForwardedChat, ...] | None = attrs.field(default=None, kw_only=True, converter=_opt_tuple)
    notice_type: str | None = attrs.field(default=None, kw_only=True)
    notice_target_is_self: bool | None = attrs.field(default=None, kw_only=True)
    text: Any = attrs.field(default=None, kw_only=True, hash=False)
    trigger_type: TriggerType | None = attrs.field(
        default=None, kw_only=True, validator=_one_of(TRIGGER_TYPES)
    )
    actor: Actor | None = attrs.field(default=None, kw_only=True)
    from_turn: FromTurn | None = attrs.field(default=None, kw_only=True)
    host_notice: HostNotice | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        def fail(field: str, why: str) -> None:
            raise PlatformMessageError(f"IncomingMessage.{field}: {why}")

        if self.owner_approved and self.source is None:
            fail("owner_approved", "an owner-approved injection must also set source")
        if self.host_notice is not None:
            if self.source is None:
                fail("host_notice", "a host notice must also set source")
            for name in ("user_id", "nickname", "session_type", "trigger_type"):
                if getattr(self, name) is not None:
                    fail("host_notice", f"a host notice does not set {name}; got {getattr(self, name)!r}")
            if self.from_turn is not None and self.from_turn.platform != self.platform:
                fail(
                    "from_turn",
                    f"a host notice continuing a call is on that turn's platform: from_turn.platform is "
                    f"{self.from_turn.platform!r}, platform is {self.platform!r}",
                )
            if self.from_turn is None and self.actor != Actor(self.platform, ""):
                # the actor is the authorization identity: a notice nobody's call started acts for
                # no one (selfInitiatedActor), never for a real user, and never without an identity
                got = "none" if self.actor is None else repr(self.actor)
                fail(
                    "actor",
                    "a host notice that continues no call (no from_turn) carries "
                    f"actor=self_initiated_actor({self.platform!r}); got {got}",
                )
        if self.trigger_type == "idle" and self.user_id is not None:
            fail("user_id", f"an idle trigger has no user id (nobody spoke); got {self.user_id!r}")
        if self.from_turn is not None and self.actor is not None:
            fail("actor", "a message carrying from_turn does not set actor (its identity is the turn's)")
        n_desc = len(self.attachment_descriptions or ())
        n_att = len(self.attachments or ())
        if n_desc > n_att:
            fail(
                "attachment_descriptions",
                f"{n_desc} descriptions for {n_att} attachments (they are aligned by index)",
            )


@attrs.frozen
class OutgoingMessage:
    """A message sent to a platform on ``outbound:message`` (platform message contract, "OutgoingMessage").

    Required: ``content`` and ``session_id``; the rest is keyword-only and ``None`` when not set:
    ``text`` (the i18n text object when ``content`` is to be translated), ``platform``, ``host_notice``
    (final-notice correlation: only ``kind`` and ``id``; only the final notice carries it, so a message a tool
    call sends mid-turn, with ``call_id``, does not), ``reply_to`` (the quoted platform message id),
    ``markup`` (the content holds platform markup to parse; None/False sends it as plain text),
    ``source`` (:data:`OUTGOING_SOURCES`), ``call_id`` (the tool call that sent it), ``turn_id`` (the agent
    turn that sent it), ``model_info`` (:class:`ModelInfo`), ``attachments`` (:class:`MessageAttachment`,
    sent whatever ``markup`` says; one with ``skip_archive`` set is not archived, see
    :func:`promptkit.chat.outbound_records`). The in-process ``delivery`` promise is not a value and is
    not a field: its receipts are :class:`promptkit.chat.DeliveryOk` / :class:`promptkit.chat.DeliveryFailed`,
    awaited with :func:`promptkit.chat.await_delivery`.
    """

    content: str
    session_id: str
    text: Any = attrs.field(default=None, kw_only=True, hash=False)
    platform: str | None = attrs.field(default=None, kw_only=True)
    host_notice: HostNotice | None = attrs.field(default=None, kw_only=True)
    reply_to: str | None = attrs.field(default=None, kw_only=True)
    markup: bool | None = attrs.field(default=None, kw_only=True)
    source: OutgoingSource | None = attrs.field(
        default=None, kw_only=True, validator=_one_of(OUTGOING_SOURCES)
    )
    call_id: str | None = attrs.field(default=None, kw_only=True)
    turn_id: str | None = attrs.field(default=None, kw_only=True)
    model_info: ModelInfo | None = attrs.field(default=None, kw_only=True)
    attachments: tuple[MessageAttachment, ...] | None = attrs.field(
        default=None, kw_only=True, converter=_opt_tuple
    )

    @host_notice.validator
    def _kind_and_id_only(self, attribute: attrs.Attribute[Any], value: HostNotice | None) -> None:
        if value is not None and value != value.for_outbound():
            raise PlatformMessageError(
                "OutgoingMessage.host_notice: carries only kind and id (use HostNotice.for_outbound())"
            )

    def __attrs_post_init__(self) -> None:
        if self.host_notice is not None and self.call_id is not None:
            raise PlatformMessageError(
                "OutgoingMessage.host_notice: only the final notice carries it; a message sent mid-tool "
                f"(call_id={self.call_id!r}) does not"
            )


# --- forwards -------------------------------------------------------------------------------------------


def forward_placeholder(id: str) -> str:
    """The placeholder an adapter writes into ``content`` where a forwarded chat sits.

    Raises :class:`PlatformMessageError` (a ``ValueError``) when ``id`` contains a double quote.

    >>> forward_placeholder("7231")
    '<forward id="7231">[合并转发消息]</forward>'
    """
    if '"' in id:
        raise PlatformMessageError(
            f"forward_placeholder: a forward id must not contain a double quote; got {id!r}"
        )
    return f'<forward id="{id}">{FORWARD_PLACEHOLDER_TEXT}</forward>'


def with_forwards(content: str, forwards: Sequence[ForwardedChat] | None) -> str:
    """``content`` with each forward placeholder replaced by its forward's ``content``.

    One pass, left to right: an expansion is never scanned again (an expansion that is itself a
    placeholder, as when the adapter turned expansion off, stays as written). A placeholder with no
    matching forward is left as it is; a forward whose placeholder is absent is not added (the adapter
    must write the placeholder). Two forwards with the same id must carry the same content.

    >>> f = ForwardedChat(id="9", content="[小明]: 在吗")
    >>> with_forwards("看 " + forward_placeholder("9") + forward_placeholder("8"), [f])
    '看 [小明]: 在吗<forward id="8">[合并转发消息]</forward>'
    """
    if not forwards:
        return content
    expansions: dict[str, str] = {}
    for i, fwd in enumerate(forwards):
        if expansions.setdefault(fwd.id, fwd.content) != fwd.content:
            raise PlatformMessageError(
                f"with_forwards: forwards[{i}] repeats id {fwd.id!r} with a different content"
            )
    # A literal alternation of the known ids (a `[^"]*` would go quadratic on unclosed openers): linear
    # in len(content) for a given set of forwards. Ids hold no '"', so the closing quote lets at most
    # one alternative match and their order does not matter.
    pattern = re.compile(
        re.escape('<forward id="')
        + "("
        + "|".join(re.escape(i) for i in expansions)
        + ")"
        + re.escape(f'">{FORWARD_PLACEHOLDER_TEXT}</forward>')
    )
    return pattern.sub(lambda m: expansions[m.group(1)], content)


# --- the archive text -------------------------------------------------------------------------------------


class Speaker(Protocol):
    """Who speaks, for the sender prefix: anything with ``nickname`` and ``user_id`` (an IncomingMessage fits)."""

    @property
    def nickname(self) -> str | None: ...

    @property
    def user_id(self) -> str | None: ...


#: The reply quote line :func:`build_incoming_content` appends: ``label`` is the quoted sender's label
#: (:func:`promptkit.get_sender_label`), ``?`` when there is none; ``content`` is the quoted text as written.
REPLY_QUOTE: Final[str] = "[引用 {label} 的消息: {content}]"


def reply_quote_line(reply: ReplyTo) -> str | None:
    """The quote line for a reply, or None when the quoted message has no text (no line is written).

    >>> reply_quote_line(ReplyTo("55", content="周五聚餐?", user_id="2", nickname="B"))
    '[引用 B(2) 的消息: 周五聚餐?]'
    >>> reply_quote_line(ReplyTo("55", content="原文")), reply_quote_line(ReplyTo("55", user_id="2"))
    ('[引用 ? 的消息: 原文]', None)
    """
    if not reply.content:
        return None
    label = get_sender_label(reply.nickname, reply.user_id) or "?"
    return REPLY_QUOTE.format(label=label, content=reply.content)


def build_incoming_content(incoming: IncomingMessage, speaker: Speaker | None = None) -> str:
    """The archive text of ``incoming``: what the archive stores and the trigger reads.

    Built the way the reference implementation builds it (byte for byte, so the archive and the trigger
    never drift apart):

    1. ``content`` with every forward placeholder replaced by its expansion (:func:`with_forwards`);
    2. only when ``speaker`` is given: the sender prefix ``[label]: `` in front of it
       (:func:`promptkit.prefix_sender` with the speaker's ``nickname`` and ``user_id``; who counts as
       the speaker is the caller's call, the platform is not looked at);
    3. when the quoted message (``reply_to``) has text: ``"\n"`` and the quote line
       ``[引用 {label} 的消息: {content}]`` (:func:`reply_quote_line`); a reply without text adds nothing;
    4. the attachment descriptions (``attachment_descriptions``, written by the media plugin as finished
       placeholders) **as written**: the non-blank ones, one per line, never wrapped again; joined to
       the text so far by ``"\n"``, or alone when the text so far is empty.

    >>> m = IncomingMessage("同意", "s", "onebot", user_id="1", nickname="A",
    ...                     reply_to=ReplyTo("55", content="周五聚餐?", user_id="2", nickname="B"))
    >>> print(build_incoming_content(m, speaker=m))
    [A(1)]: 同意
    [引用 B(2) 的消息: 周五聚餐?]
    >>> pic = IncomingMessage("", "s", "onebot", attachments=[MessageAttachment("image", url="u")],
    ...                       attachment_descriptions=["[图片: 一只猫 | ref:u]"])
    >>> build_incoming_content(pic)
    '[图片: 一只猫 | ref:u]'
    """
    text = with_forwards(incoming.content, incoming.forwards)
    if speaker is not None:
        text = prefix_sender(text, speaker.nickname, speaker.user_id)
    if incoming.reply_to is not None:
        quote = reply_quote_line(incoming.reply_to)
        if quote is not None:
            text += "\n" + quote
    descriptions = [d for d in incoming.attachment_descriptions or () if d is not None and d.strip()]
    if descriptions:
        attached = "\n".join(descriptions)
        text = f"{text}\n{attached}" if text else attached
    return text


# --- outbound archiving ------------------------------------------------------------------------------------


def outbound_media_message(
    kind: str, ref: str, *, desc: str | None = None, source: str | None = None
) -> Message:
    """How an outbound image, audio, video or file is archived into the conversation history.

    ``kind`` (image / audio / video / file) becomes ``Message.kind`` ``outbound-<kind>``; ``content`` is the
    attachment ref placeholder (:func:`promptkit.format_attachment_ref`; for a file, ``desc`` holds the file
    name). ``source='agent'`` means she sent it: role ``assistant``; any other source (a plugin sent it) gives
    role ``notice``, a system notice for the model, not her speech. The caller adds timestamp and metadata.
    A bad ``kind`` or ``source`` raises :class:`PlatformMessageError` naming it.

    >>> m = outbound_media_message("audio", "data:/audio/a.mp3", desc="描述", source="agent")
    >>> (m.role, m.kind, m.content)
    ('assistant', 'outbound-audio', '[音频: 描述 | ref:data:/audio/a.mp3]')
    """
    if kind not in _OUTBOUND_KINDS:
        raise PlatformMessageError(
            f"outbound_media_message: kind must be one of {', '.join(ATTACHMENT_KINDS)}; got {kind!r}"
        )
    if source is not None and source not in OUTGOING_SOURCES:
        raise PlatformMessageError(
            f"outbound_media_message: source must be one of {', '.join(OUTGOING_SOURCES)} or None; got {source!r}"
        )
    content = format_attachment_ref(AttachmentRef(kind=ATTACHMENT_REF_KINDS[kind], ref=ref, desc=desc))
    return Message(
        role="assistant" if source == "agent" else "notice",
        content=content,
        kind=_OUTBOUND_KINDS[kind],
    )


def outbound_marker_message(msg: OutgoingMessage) -> Message | None:
    """How outbound text that is not her reply is archived: an event marker, or None.

    None for her reply (``source='agent'``) and for an empty ``content``. Otherwise a ``system`` message of
    kind ``event-marker`` (kept out of the model's context) whose content is ``msg.content``, with
    metadata ``{"text": msg.text}`` only when ``text`` is set. The caller adds timestamp, Source, TurnId
    and CallId.

    >>> outbound_marker_message(OutgoingMessage("已重启", "s1", source="command")).kind
    'event-marker'
    >>> outbound_marker_message(OutgoingMessage("hi", "s1", source="agent")) is None
    True
    """
    if msg.source == "agent" or not msg.content:
        return None
    metadata = None if msg.text is None else {WellKnownMetadataKeys.TEXT.value: msg.text}
    return Message(
        role="system", content=msg.content, kind=WellKnownKinds.EVENT_MARKER.value, metadata=metadata
    )


# --- small judgements ---------------------------------------------------------------------------------------


class _Located(Protocol):
    @property
    def platform(self) -> str: ...

    @property
    def user_id(self) -> str | None: ...


class _Addressable(Protocol):
    @property
    def source(self) -> str | None: ...

    @property
    def trigger_type(self) -> str | None: ...


class _Arrived(Protocol):
    @property
    def arrival(self) -> int | None: ...


def one_speaker(inputs: Sequence[_Located]) -> bool:
    """Whether all of a turn's inputs come from one physical speaker (same platform and same account).

    A physical speaker is an account: an input without ``user_id`` (or with an empty one, the "no subject"
    identity) has none, so any such input makes the answer False, and so does an empty sequence (no input,
    no speaker). Only when this is True does the turn have a session speaker (the tool-call context's
    user id, the persona's speaker facts).

    >>> a = IncomingMessage("x", "s", "onebot", user_id="1")
    >>> one_speaker([a, a]), one_speaker([a, IncomingMessage("y", "s", "onebot", user_id="2")]), one_speaker([])
    (True, False, False)
    """
    if not inputs:
        return False
    first = inputs[0]
    if not first.user_id:
        return False
    return all(m.platform == first.platform and m.user_id == first.user_id for m in inputs)


def was_addressed(message: _Addressable) -> bool:
    """Whether an input addressed her.

    A person's input (no ``source``) with trigger type ``direct`` or ``immediate``, or with none (it did not
    go through the trigger: counts as direct), addressed her; ``interval``, ``idle``, ``proactive`` did not.
    Any input with a ``source`` (timers, orchestration, notices) did not, whatever its trigger type.

    >>> was_addressed(IncomingMessage("hi", "s", "onebot")), was_addressed(IncomingMessage("t", "s", "x", source="cron"))
    (True, False)
    """
    if message.source is not None:
        return False
    return message.trigger_type in (None, "direct", "immediate")


def arrival_tag(message: _Arrived) -> str:
    """The arrival number for a log line: ``' #<n>'`` (leading space), or ``''`` when it has none.

    >>> arrival_tag(IncomingMessage("x", "s", "cli", arrival=7)), arrival_tag(IncomingMessage("x", "s", "cli"))
    (' #7', '')
    """
    return "" if message.arrival is None else f" #{message.arrival}"


# --- identities, host notices for the model, session types ---------------------------------------------------


def self_initiated_actor(platform: str) -> Actor:
    """The authorization identity of a turn she starts herself: no subject (an empty ``user_id``).

    A group ``interval`` turn and a host notice that continues no call carry it as ``actor``: authority
    judges it at the default level and never as owner. The empty string (not None) keeps anything derived
    from the turn anonymous instead of falling back to the physical speaker.

    >>> self_initiated_actor("onebot")
    Actor(platform='onebot', user_id='')
    """
    if not isinstance(platform, str) or not platform:
        raise PlatformMessageError(
            f"self_initiated_actor: platform must be a non-empty string; got {platform!r}"
        )
    return Actor(platform, "")


#: The ``Message.metadata["injector"]`` of the host-notice block: the turn's directive block.
HOST_NOTICE_INJECTOR: Final[str] = WellKnownKinds.HOST_NOTICE.value
#: The line a host notice starts with when the model sees it.
HOST_NOTICE_PREFIX: Final[str] = "[宿主通知]"


def host_notice_message(incoming: IncomingMessage) -> Message:
    """The system message the agent shows the model for a host notice, in this turn only.

    Its content is composed in the documents' order: :data:`HOST_NOTICE_PREFIX` and ``content`` on the
    first line(s), then, when there is one, the injector's already wrapped ``untrusted`` segment on its own
    line, last. ``kind`` is ``host-notice`` and ``metadata["injector"]`` is ``host-notice``: this turn's
    directive block (kept ``system`` by DeepSeek, never trimmed). ``facts``, ``reply_to`` and ``from_turn``
    never reach the model. The archived form (no untrusted segment) is
    :func:`promptkit.chat.archive_record`. Raises :class:`PlatformMessageError` for a message without
    ``host_notice``.

    >>> notice = IncomingMessage("后台任务 t1 已完成。", "s", "webui", source="bg:t1",
    ...                          actor=self_initiated_actor("webui"),  # a notice that continues no call
    ...                          host_notice=HostNotice("background-task", id="t1", untrusted="<untrusted>ok</untrusted>"))
    >>> print(host_notice_message(notice).content)
    [宿主通知] 后台任务 t1 已完成。
    <untrusted>ok</untrusted>
    """
    notice = incoming.host_notice
    if notice is None:
        raise PlatformMessageError("host_notice_message: the incoming message has no host_notice")
    content = f"{HOST_NOTICE_PREFIX} {incoming.content}" if incoming.content else HOST_NOTICE_PREFIX
    if notice.untrusted:
        content = f"{content}\n{notice.untrusted}"
    return Message(
        role="system",
        content=content,
        kind=WellKnownKinds.HOST_NOTICE.value,
        metadata={"injector": HOST_NOTICE_INJECTOR},
    )


@attrs.frozen
class SessionTypeDecl:
    """A session type an adapter declares (``PlatformAdapter.sessionTypes``): its name and whether a chat
    of that type has several parties (a group, a channel) or is one to one."""

    name: str
    multi_party: bool


#: The session type of a message whose adapter declares none: ``private``, one to one.
PRIVATE_SESSION: Final[SessionTypeDecl] = SessionTypeDecl("private", multi_party=False)


def session_type_of(
    incoming: IncomingMessage, declared: Sequence[SessionTypeDecl] | None = None
) -> SessionTypeDecl:
    """The session type session management records for ``incoming``.

    With ``session_type`` set: that declared type (an undeclared name raises
    :class:`PlatformMessageError`; with no declarations at all it is taken as one to one). Without it, the
    default rule: the first multi-party type when the adapter declared one, else its first (one-to-one)
    type, else :data:`PRIVATE_SESSION`.

    >>> group, dm = SessionTypeDecl("group", True), SessionTypeDecl("private", False)
    >>> m = IncomingMessage("hi", "s", "onebot")
    >>> session_type_of(m, [dm, group]).name, session_type_of(m, [dm]).name, session_type_of(m).name
    ('group', 'private', 'private')
    """
    types = tuple(declared or ())
    if incoming.session_type is not None:
        if not types:
            return SessionTypeDecl(incoming.session_type, multi_party=False)
        for decl in types:
            if decl.name == incoming.session_type:
                return decl
        names = ", ".join(d.name for d in types)
        raise PlatformMessageError(
            f"IncomingMessage.session_type: {incoming.session_type!r} is not one of the declared types ({names})"
        )
    multi = [d for d in types if d.multi_party]
    if multi:
        return multi[0]
    return types[0] if types else PRIVATE_SESSION
