"""Delivery receipts of outbound messages (platform message contract, ``OutgoingMessage.delivery``).

An adapter that takes an :class:`~promptkit.chat.OutgoingMessage` answers, in process, with a receipt
that always resolves: :class:`DeliveryOk` (the platform accepted it, with the message ids it gave) or
:class:`DeliveryFailed` (a reason for people; ``unconfirmed`` when part of it may have arrived;
``sent_pieces`` when a piecewise send stopped halfway). No receipt means "not confirmed", never "sent".
The sender waits with :func:`await_delivery`, at most :data:`DELIVERY_WAIT_MS` and never past the turn's
abort.

>>> receipt = DeliveryFailed("timeout", unconfirmed=True, sent_pieces=2)
>>> receipt.ok, receipt.may_resend
(False, False)
>>> DeliveryOk(message_ids=["m1", "m2"]).message_ids
('m1', 'm2')
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Any, Final, Literal

import attrs

from promptkit.chat.message import WellKnownMetadataKeys as K
from promptkit.chat.platform import PlatformMessageError
from promptkit.errors import UsageError

__all__ = [
    "DELIVERY_WAIT_MS",
    "DeliveryFailed",
    "DeliveryOk",
    "DeliveryReceipt",
    "await_delivery",
    "delivery_failure_metadata",
]

#: How long a sender waits for a receipt (90 seconds). Past it the result is "not confirmed": the adapter's
#: send is not cancelled, and the model is told not to resend.
DELIVERY_WAIT_MS: Final[int] = 90_000


def _ids(value: Sequence[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise PlatformMessageError("DeliveryOk.message_ids: a sequence of ids, not one string")
    ids = tuple(value)
    for i, mid in enumerate(ids):
        if not isinstance(mid, str) or not mid:
            raise PlatformMessageError(
                f"DeliveryOk.message_ids[{i}]: must be a non-empty string; got {mid!r}"
            )
    return ids


@attrs.frozen
class DeliveryOk:
    """The platform accepted the message (``{ ok: true, messageIds? }``); not that anyone read it.

    ``message_ids`` are the ids the platform gave for the text, one per piece in send order, written like
    an incoming ``reply_to.message_id``; None when the platform gives none or only attachments were sent.
    """

    message_ids: tuple[str, ...] | None = attrs.field(default=None, converter=_ids)

    @property
    def ok(self) -> Literal[True]:
        """Always True."""
        return True


def _check_sent_pieces(instance: DeliveryFailed, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise PlatformMessageError(
            f"DeliveryFailed.sent_pieces: a positive int (left out when nothing was sent); got {value!r}"
        )


def _check_unconfirmed(instance: DeliveryFailed, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and value is not True:
        raise PlatformMessageError(f"DeliveryFailed.unconfirmed: True or None; got {value!r}")


def _check_error(instance: DeliveryFailed, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None or (isinstance(value, str) and not value):
        raise PlatformMessageError("DeliveryFailed.error: a reason is required (a string or a text object)")


@attrs.frozen
class DeliveryFailed:
    """The message was not (or not surely) delivered (``{ ok: false, error, unconfirmed?, sentPieces? }``).

    ``error`` is the reason for people: a string or an i18n text object (opaque here). ``unconfirmed`` is
    True when a request went out but no confirmation came back (that part may have arrived): never resend
    automatically, never ask the model to. Without it the failure is certain. ``sent_pieces`` is set when a
    piecewise send stopped halfway: the first ``sent_pieces`` pieces were accepted, a resend covers only
    the rest; it is left out when nothing was sent.
    """

    error: Any = attrs.field(validator=_check_error, hash=False)
    unconfirmed: Literal[True] | None = attrs.field(default=None, validator=_check_unconfirmed)
    sent_pieces: int | None = attrs.field(default=None, validator=_check_sent_pieces)

    @property
    def ok(self) -> Literal[False]:
        """Always False."""
        return False

    @property
    def may_resend(self) -> bool:
        """True only for a certain failure (not ``unconfirmed``): then a resend cannot duplicate anything."""
        return self.unconfirmed is None


#: What an ``OutgoingMessage.delivery`` resolves to.
DeliveryReceipt = DeliveryOk | DeliveryFailed


async def await_delivery(
    delivery: Awaitable[DeliveryReceipt] | None,
    signal: asyncio.Event | None = None,
    *,
    timeout_ms: int = DELIVERY_WAIT_MS,
) -> DeliveryReceipt | None:
    """The receipt, or None when there is none, the turn is aborted, or it does not come within
    ``timeout_ms``.

    ``signal`` is the turn's abort signal (the reference's ``awaitDelivery(delivery, signal)``): once it
    is set the wait ends with None instead of raising. None means "not confirmed", not "not sent": tell
    the model the result is unconfirmed and not to resend. The adapter's send is never cancelled by
    giving up the wait (timeout or abort) or by cancelling the waiting task: it runs on as a task of its
    own.

    >>> async def sent() -> DeliveryReceipt:
    ...     return DeliveryOk(message_ids=["42"])
    >>> asyncio.run(await_delivery(sent())), asyncio.run(await_delivery(None))
    (DeliveryOk(message_ids=('42',)), None)
    >>> async def aborted_turn() -> DeliveryReceipt | None:
    ...     abort = asyncio.Event()
    ...     never: asyncio.Future[DeliveryReceipt] = asyncio.get_running_loop().create_future()
    ...     asyncio.get_running_loop().call_later(0.01, abort.set)  # the user stops the turn
    ...     return await await_delivery(never, abort)
    >>> print(asyncio.run(aborted_turn()))
    None
    """
    if delivery is None:
        return None
    if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool) or timeout_ms < 0:
        raise UsageError(f"await_delivery: timeout_ms must be a non-negative int; got {timeout_ms!r}")
    if signal is not None and not isinstance(signal, asyncio.Event):
        raise UsageError(f"await_delivery: signal must be an asyncio.Event; got {type(signal).__name__}")
    receipt = asyncio.ensure_future(delivery)
    if signal is not None and signal.is_set():
        return None
    waiting: set[asyncio.Future[Any]] = {receipt}
    aborted = None if signal is None else asyncio.ensure_future(signal.wait())
    if aborted is not None:
        waiting.add(aborted)
    try:
        # asyncio.wait cancels none of them, on timeout or when this task is cancelled
        await asyncio.wait(waiting, timeout=timeout_ms / 1000, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if aborted is not None:
            aborted.cancel()
    if (signal is not None and signal.is_set()) or not receipt.done() or receipt.cancelled():
        return None  # aborted (even if the receipt came in the same moment), timed out, or withdrawn
    return receipt.result()


def delivery_failure_metadata(
    receipt: DeliveryFailed,
    *,
    turn_id: str | None = None,
    call_id: str | None = None,
    unconfirmed_items: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The metadata of the record an adapter archives for a failed delivery (kind
    ``outbound-delivery-failed``): ``turnId`` / ``callId`` when given, ``error`` (the receipt's reason),
    ``sentPieces`` when the send stopped halfway, ``unconfirmed`` (the items sent but not confirmed, such as
    ``消息(第 2 条)``) when given.

    >>> delivery_failure_metadata(DeliveryFailed("超时", sent_pieces=1), turn_id="t9")
    {'turnId': 't9', 'error': '超时', 'sentPieces': 1}
    """
    meta: dict[str, Any] = {}
    if turn_id is not None:
        meta[K.TURN_ID.value] = turn_id
    if call_id is not None:
        meta[K.CALL_ID.value] = call_id
    meta[K.DELIVERY_ERROR.value] = receipt.error
    if receipt.sent_pieces is not None:
        meta[K.SENT_PIECES.value] = receipt.sent_pieces
    if unconfirmed_items:
        meta[K.UNCONFIRMED.value] = list(unconfirmed_items)
    return meta
