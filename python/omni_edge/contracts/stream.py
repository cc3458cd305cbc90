"""The bounded, credited event stream of one active stage request (CONTRACT.md).

The state machine is synchronous (`try_submit`, `receive_nowait`, `acknowledge`, `close`,
`cancel`) so that it can be compared step by step with the native stream; `submit` and
`receive` are the asyncio forms that wait for credit or for an event.
Mirrors controller_cpp/contract/event_stream.h.
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from dataclasses import dataclass

from omni_edge.contracts.errors import ContractError
from omni_edge.contracts.fields import INT64_MAX
from omni_edge.contracts.types import StageEvent, StageRequest, StateHandle


class SubmitResult(enum.Enum):
    ACCEPTED = "accepted"
    BACKPRESSURE = "backpressure"


@dataclass(frozen=True)
class StreamLimits:
    max_events: int
    max_bytes: int

    def __post_init__(self) -> None:
        for name in ("max_events", "max_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ContractError("invalid_field", f"stream_limits.{name}: must be an integer > 0, got {value!r}")


class EventStream:
    """One producer, one consumer; credit is returned only by acknowledgement."""

    def __init__(self, request: StageRequest, limits: StreamLimits) -> None:
        self.request = request
        self.limits = limits
        self._next_seq = 1
        self._watermark = 0
        self._used_tokens: set[str] = set()
        self._queue: deque[StageEvent] = deque()
        self._unacked: dict[str, int] = {}  # delivered token -> charged bytes
        self._bound_state: StateHandle | None = request.state
        self._outstanding_bytes = 0
        self._high_water_bytes = 0
        self._stale = 0
        self._closed = False
        self._cancelled = False
        self._terminal_accepted = False
        self._terminal_delivered = False
        self._waiting_producers = 0
        self._waiters: list[asyncio.Future[None]] = []

    # ---- observable counters -------------------------------------------------
    @property
    def outstanding_events(self) -> int:
        return len(self._queue) + len(self._unacked)

    @property
    def outstanding_bytes(self) -> int:
        return self._outstanding_bytes

    @property
    def high_water_bytes(self) -> int:
        return self._high_water_bytes

    @property
    def stale_events_dropped(self) -> int:
        return self._stale

    @property
    def waiting_producers(self) -> int:
        return self._waiting_producers

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def terminal_accepted(self) -> bool:
        return self._terminal_accepted

    @property
    def ended(self) -> bool:
        """True once receive() can return nothing more."""
        return self._terminal_delivered or ((self._closed or self._cancelled) and not self._queue)

    # ---- producer ------------------------------------------------------------
    def _check(self, event: StageEvent) -> None:
        req = self.request
        if self._cancelled or self._closed:
            raise ContractError("stream_closed", "stream closed")
        if self._terminal_accepted:
            raise ContractError("terminal_sent", "a terminal event was already accepted")
        if event.request_id != req.request_id:
            raise ContractError("request_id_mismatch", f"request_id mismatch: {event.request_id!r} != {req.request_id!r}")
        if event.stage_id != req.stage_id:
            raise ContractError("stage_id_mismatch", f"stage_id mismatch: {event.stage_id} != {req.stage_id}")
        if event.epoch != req.epoch:
            raise ContractError("epoch_mismatch", f"epoch mismatch: {event.epoch} != {req.epoch}")
        if event.worker_generation != req.worker_generation:
            raise ContractError("worker_generation_mismatch",
                                f"worker_generation mismatch: {event.worker_generation!r} != {req.worker_generation!r}")
        if event.seq != self._next_seq:
            raise ContractError("seq_out_of_order", f"seq out of order: expected {self._next_seq}, got {event.seq}")
        if event.input_watermark < self._watermark:
            raise ContractError("watermark_regressed", f"input_watermark regressed: {event.input_watermark} < {self._watermark}")
        if not event.release_token:
            raise ContractError("release_token_empty", "release_token must be non-empty")
        if event.release_token in self._used_tokens:
            raise ContractError("release_token_reused", f"release_token {event.release_token!r} was already used")
        if event.charge > self.limits.max_bytes:
            raise ContractError("payload_too_large", f"payload of {event.charge} bytes exceeds max_bytes {self.limits.max_bytes}")
        if event.state is not None:
            if self._bound_state is not None:
                if event.state != self._bound_state:
                    raise ContractError("state_mismatch", "event.state differs from the state the stream is bound to")
            else:
                if not req.session_id:
                    raise ContractError("state_unbound_request", "event.state on a request without a session binding")
                if (event.state.session_id != req.session_id or event.state.artifact_id != req.artifact_id
                        or event.state.layout_version != req.state_layout_version):
                    raise ContractError("state_mismatch", "event.state session, artifact or layout differs from the request's")

    def try_submit(self, event: StageEvent) -> SubmitResult:
        """Accept the event, or report backpressure without changing anything; refusals raise."""
        self._check(event)
        charge = event.charge
        if (self.outstanding_events + 1 > self.limits.max_events
                or self._outstanding_bytes + charge > self.limits.max_bytes):
            return SubmitResult.BACKPRESSURE
        self._next_seq += 1
        self._watermark = event.input_watermark
        self._used_tokens.add(event.release_token)
        if event.state is not None:
            self._bound_state = event.state
        if event.terminal:
            self._terminal_accepted = True
        self._queue.append(event)
        self._outstanding_bytes += charge
        self._high_water_bytes = max(self._high_water_bytes, self._outstanding_bytes)
        self._notify()
        return SubmitResult.ACCEPTED

    async def submit(self, event: StageEvent) -> None:
        """Submit, waiting for credit; a cancel wakes the waiter with a `stream_closed` error."""
        while self.try_submit(event) is SubmitResult.BACKPRESSURE:
            self._waiting_producers += 1
            try:
                await self._changed()
            finally:
                self._waiting_producers -= 1

    def close(self) -> None:
        """The producer ends without more events."""
        self._closed = True
        self._notify()

    # ---- consumer ------------------------------------------------------------
    def receive_nowait(self) -> StageEvent | None:
        if self._terminal_delivered or not self._queue:
            return None
        event = self._queue.popleft()
        self._unacked[event.release_token] = event.charge
        if event.terminal:
            self._terminal_delivered = True
        return event

    async def receive(self) -> StageEvent | None:
        """The next event in seq order; None once the stream has ended."""
        while not self._queue and not self.ended:
            await self._changed()
        return self.receive_nowait()

    def acknowledge(self, token: str) -> bool:
        charge = self._unacked.pop(token, None) if isinstance(token, str) else None
        if charge is None:
            return False
        self._outstanding_bytes -= charge
        self._notify()
        return True

    def cancel(self) -> int:
        """Fence the epoch: drop queued events as stale, wake a waiting producer. Idempotent."""
        if not self._cancelled:
            self._cancelled = True
            self._stale += len(self._queue)
            for event in self._queue:
                self._outstanding_bytes -= event.charge
            self._queue.clear()
            self._notify()
        return min(self.request.epoch + 1, INT64_MAX)

    # ---- waiting -------------------------------------------------------------
    def _changed(self) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        return future

    def _notify(self) -> None:
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)
