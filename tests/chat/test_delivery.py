"""Tests for promptkit/chat/delivery.py: delivery receipts and the wait for them."""

from __future__ import annotations

import asyncio
import doctest

import pytest

import promptkit.chat.delivery as delivery_module
from promptkit.chat.delivery import (
    DELIVERY_WAIT_MS,
    DeliveryFailed,
    DeliveryOk,
    DeliveryReceipt,
    await_delivery,
    delivery_failure_metadata,
)
from promptkit.chat.platform import PlatformMessageError


def test_docstring_examples() -> None:
    result = doctest.testmod(delivery_module)
    assert result.attempted > 0 and result.failed == 0


def test_wait_is_ninety_seconds() -> None:
    assert DELIVERY_WAIT_MS == 90 * 1000


def test_ok_receipt_keeps_ids_in_send_order() -> None:
    r = DeliveryOk(message_ids=["3", "1", "2"])
    assert r.ok is True and r.message_ids == ("3", "1", "2")
    assert DeliveryOk().message_ids is None  # no ids given, or only attachments sent


@pytest.mark.parametrize("bad", ["m1", [""], [1]])
def test_ok_receipt_rejects_bad_ids(bad: object) -> None:
    with pytest.raises(PlatformMessageError, match=r"DeliveryOk\.message_ids"):
        DeliveryOk(message_ids=bad)  # type: ignore[arg-type]


def test_failed_receipt_fields_and_resend_rule() -> None:
    certain = DeliveryFailed("群已解散")
    assert certain.ok is False and certain.may_resend
    maybe = DeliveryFailed("发送超时", unconfirmed=True)
    assert not maybe.may_resend  # a part may have arrived: never resend automatically
    halfway = DeliveryFailed("断线", sent_pieces=2)
    assert halfway.sent_pieces == 2 and halfway.may_resend
    text_object = {"key": "delivery.timeout"}
    assert DeliveryFailed(text_object).error is text_object  # a TextRef is kept as given


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"error": ""}, "error"),
        ({"error": None}, "error"),
        ({"error": "x", "unconfirmed": False}, "unconfirmed"),
        ({"error": "x", "sent_pieces": 0}, "sent_pieces"),
        ({"error": "x", "sent_pieces": True}, "sent_pieces"),
    ],
)
def test_failed_receipt_rejects_bad_fields_naming_them(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(PlatformMessageError, match=rf"DeliveryFailed\.{field}"):
        DeliveryFailed(**kwargs)  # type: ignore[arg-type]


def test_await_delivery_returns_the_receipt() -> None:
    async def adapter() -> DeliveryReceipt:
        return DeliveryFailed("x", unconfirmed=True)

    assert asyncio.run(await_delivery(adapter())) == DeliveryFailed("x", unconfirmed=True)


def test_no_receipt_is_unconfirmed() -> None:
    assert asyncio.run(await_delivery(None)) is None


def test_a_receipt_that_does_not_come_is_unconfirmed_and_the_send_is_not_cancelled() -> None:
    async def scenario() -> tuple[DeliveryReceipt | None, bool]:
        pending: asyncio.Future[DeliveryReceipt] = asyncio.get_running_loop().create_future()
        result = await await_delivery(pending, timeout_ms=0)
        return result, pending.cancelled()

    result, cancelled = asyncio.run(scenario())
    assert result is None and not cancelled


def test_an_aborted_turn_stops_the_wait_with_none_and_the_send_goes_on() -> None:
    """「发起方用 awaitDelivery(delivery, signal) 等回执:回合中止或等满 DELIVERY_WAIT_MS(90 秒)时返回
    undefined,只表示未确认,不表示没发出(适配器的发送不随之取消)」: the turn's abort ends the wait with None
    (no CancelledError), and the adapter's send is not cancelled."""

    async def scenario() -> tuple[DeliveryReceipt | None, bool, DeliveryReceipt]:
        loop = asyncio.get_running_loop()
        abort = asyncio.Event()
        pending: asyncio.Future[DeliveryReceipt] = loop.create_future()
        loop.call_soon(abort.set)  # the turn is aborted first ...
        loop.call_later(0.05, pending.set_result, DeliveryOk(message_ids=["late"]))  # ... the receipt later
        result = await await_delivery(pending, abort)
        cancelled = pending.cancelled()
        return result, cancelled, await pending

    result, cancelled, receipt = asyncio.run(scenario())
    assert result is None and not cancelled
    assert receipt == DeliveryOk(message_ids=["late"])  # the send went on and was accepted


def test_an_abort_signal_already_set_and_one_never_set() -> None:
    async def scenario() -> tuple[DeliveryReceipt | None, DeliveryReceipt | None]:
        done = asyncio.Event()
        done.set()

        async def adapter() -> DeliveryReceipt:
            return DeliveryOk()

        before = await await_delivery(adapter(), done)
        quiet = asyncio.Event()  # a turn that is not aborted: the receipt comes back as usual
        return before, await await_delivery(adapter(), quiet)

    assert asyncio.run(scenario()) == (None, DeliveryOk())


def test_cancelling_the_waiting_task_does_not_cancel_the_send() -> None:
    async def scenario() -> tuple[bool, bool]:
        pending: asyncio.Future[DeliveryReceipt] = asyncio.get_running_loop().create_future()
        waiter = asyncio.ensure_future(await_delivery(pending, asyncio.Event()))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        return waiter.cancelled(), pending.cancelled()

    assert asyncio.run(scenario()) == (True, False)


def test_await_delivery_rejects_a_signal_that_is_no_event() -> None:
    async def adapter() -> DeliveryReceipt:
        return DeliveryOk()

    coro = adapter()
    with pytest.raises(ValueError, match="signal"):
        asyncio.run(await_delivery(coro, True))  # type: ignore[arg-type]
    coro.close()


def test_await_delivery_rejects_a_bad_timeout() -> None:
    async def adapter() -> DeliveryReceipt:
        return DeliveryOk()

    coro = adapter()
    with pytest.raises(ValueError, match="timeout_ms"):
        asyncio.run(await_delivery(coro, timeout_ms=-1))
    coro.close()


def test_failure_metadata_uses_the_registered_keys() -> None:
    meta = delivery_failure_metadata(
        DeliveryFailed("超时", unconfirmed=True, sent_pieces=1),
        call_id="c1",
        unconfirmed_items=["文件 a.html"],
    )
    assert meta == {"callId": "c1", "error": "超时", "sentPieces": 1, "unconfirmed": ["文件 a.html"]}
    assert delivery_failure_metadata(DeliveryFailed("x")) == {"error": "x"}
