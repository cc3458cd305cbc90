"""The bounded, credited stream: one test body, both implementations."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from contract_values import event, request, state
from omni_edge.contracts import ContractError, EventStream, StreamLimits, SubmitResult
from omni_edge.runtime import implementations


def _code(fn: object) -> str:
    try:
        result = fn()  # type: ignore[operator]
        return result.value if isinstance(result, SubmitResult) else "ok"
    except ContractError as exc:
        return exc.code


def test_delivery_order_and_credit(impl: implementations.Implementation) -> None:
    req = request()
    s = impl.stream(req, StreamLimits(2, 50))
    assert s.try_submit(event(req, 1, 20)) is SubmitResult.ACCEPTED
    assert s.try_submit(event(req, 2, 40)) is SubmitResult.BACKPRESSURE, "bytes: 20 + 40 > 50"
    assert s.try_submit(event(req, 2, 30)) is SubmitResult.ACCEPTED
    assert s.try_submit(event(req, 3, 0)) is SubmitResult.BACKPRESSURE, "events: 2 outstanding"
    first = s.receive_nowait()
    assert first is not None and first.seq == 1
    assert s.try_submit(event(req, 3, 0)) is SubmitResult.BACKPRESSURE, "receiving returns no credit"
    assert s.acknowledge(first.release_token)
    assert not s.acknowledge(first.release_token)
    assert s.try_submit(event(req, 3, 0, terminal=True)) is SubmitResult.ACCEPTED
    assert [e.seq for e in iter(s.receive_nowait, None)] == [2, 3]
    assert s.high_water_bytes == 50
    assert s.outstanding_events == 2


def test_refusals_change_nothing(impl: implementations.Implementation) -> None:
    req = request(epoch=2)
    s = impl.stream(req, StreamLimits(4, 100))
    assert _code(lambda: s.try_submit(event(req, 1, epoch=1))) == "epoch_mismatch"
    assert _code(lambda: s.try_submit(event(req, 2))) == "seq_out_of_order"
    assert _code(lambda: s.try_submit(event(req, 1, 101))) == "payload_too_large"
    assert _code(lambda: s.try_submit(event(req, 1, release_token=""))) == "release_token_empty"
    assert s.outstanding_events == 0
    assert _code(lambda: s.try_submit(event(req, 1))) == "accepted"
    assert _code(lambda: s.try_submit(event(req, 2, release_token=event(req, 1).release_token))) == "release_token_reused"
    assert _code(lambda: s.try_submit(event(req, 2, input_watermark=0))) == "watermark_regressed"
    assert _code(lambda: s.try_submit(event(req, 2, state=state(epoch=2, session_id="other")))) == "state_mismatch"


def test_cancel_fences_the_epoch(impl: implementations.Implementation) -> None:
    req = request(epoch=7)
    s = impl.stream(req, StreamLimits(4, 100))
    for seq in (1, 2, 3):
        s.try_submit(event(req, seq, 10))
    delivered = s.receive_nowait()
    assert s.cancel() == 8
    assert s.cancel() == 8
    assert s.stale_events_dropped == 2
    assert (s.outstanding_events, s.outstanding_bytes) == (1, 10), "delivered bytes stay charged"
    assert s.receive_nowait() is None
    assert _code(lambda: s.try_submit(event(req, 4))) == "stream_closed"
    assert delivered is not None and s.acknowledge(delivered.release_token)
    assert s.outstanding_bytes == 0


def test_reference_stream_waits_in_asyncio() -> None:
    req = request()
    s = EventStream(req, StreamLimits(1, 100))

    async def scenario() -> list[int]:
        received: list[int] = []

        async def producer() -> None:
            for seq in (1, 2, 3):
                await s.submit(event(req, seq, terminal=seq == 3))

        async def consumer() -> None:
            while (e := await s.receive()) is not None:
                received.append(e.seq)
                await asyncio.sleep(0)
                assert s.acknowledge(e.release_token)

        await asyncio.gather(producer(), consumer())
        return received

    assert asyncio.run(scenario()) == [1, 2, 3]


def test_reference_cancel_wakes_an_awaiting_producer() -> None:
    req = request()
    s = EventStream(req, StreamLimits(1, 100))

    async def scenario() -> str:
        await s.submit(event(req, 1))
        task = asyncio.create_task(s.submit(event(req, 2)))
        await asyncio.sleep(0)
        assert s.waiting_producers == 1
        s.cancel()
        try:
            await task
        except ContractError as exc:
            return exc.code
        return "accepted"

    assert asyncio.run(scenario()) == "stream_closed"


def test_native_stream_blocks_a_thread_and_cancel_wakes_it() -> None:
    native = implementations.get("native")
    req = request()
    s = native.stream(req, StreamLimits(1, 100))
    s.submit(event(req, 1))
    outcome: list[str] = []

    def producer() -> None:
        try:
            s.submit(event(req, 2), timeout=10.0)
            outcome.append("accepted")
        except ContractError as exc:
            outcome.append(exc.code)

    thread = threading.Thread(target=producer)
    thread.start()
    deadline = time.monotonic() + 5
    while s.waiting_producers == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert s.waiting_producers == 1, "the GIL is released while the producer waits"
    s.cancel()
    thread.join(5)
    assert outcome == ["stream_closed"]


def test_native_stream_producer_and_consumer_threads() -> None:
    native = implementations.get("native")
    req = request()
    s = native.stream(req, StreamLimits(3, 64))
    n = 200

    def producer() -> None:
        for seq in range(1, n + 1):
            s.submit(event(req, seq, payload=16, terminal=seq == n), timeout=10.0)

    thread = threading.Thread(target=producer)
    thread.start()
    seqs = []
    while (e := s.receive(timeout=10.0)) is not None:
        seqs.append(e.seq)
        assert s.acknowledge(e.release_token)
    thread.join(5)
    assert seqs == list(range(1, n + 1))
    assert s.high_water_bytes <= 64


def test_limits_must_be_positive() -> None:
    with pytest.raises(ContractError):
        StreamLimits(0, 10)
    with pytest.raises(ContractError):
        StreamLimits(1, True)  # type: ignore[arg-type]
