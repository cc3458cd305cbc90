"""The two implementations of the stage contract behind one interface.

`python` is the reference (`omni_edge.contracts`, asyncio stream); `native` is the C++
controller (`omni_edge.runtime.native`). Conformance fixtures, the differential test and the unit
tests drive both through this interface.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from omni_edge import contracts
from omni_edge.contracts import (
    BackendIdentity,
    BufferRef,
    ContractError,
    DeviceDescriptor,
    EmitResult,
    StageEvent,
    StageRequest,
    StateHandle,
    StreamLimits,
    SubmitResult,
    VerifiedManifest,
)
from omni_edge.contracts.fields import check_text

TYPES: dict[str, Any] = {
    "buffer": BufferRef, "state": StateHandle, "request": StageRequest, "event": StageEvent, "device": DeviceDescriptor,
}


class Stream(Protocol):
    def try_submit(self, event: StageEvent) -> SubmitResult: ...
    def close(self) -> None: ...
    def receive_nowait(self) -> StageEvent | None: ...
    def acknowledge(self, token: str) -> bool: ...
    def cancel(self) -> int: ...
    @property
    def outstanding_events(self) -> int: ...
    @property
    def outstanding_bytes(self) -> int: ...
    @property
    def high_water_bytes(self) -> int: ...
    @property
    def stale_events_dropped(self) -> int: ...
    @property
    def waiting_producers(self) -> int: ...
    @property
    def ended(self) -> bool: ...


class Controller(Protocol):
    def begin(self, request: StageRequest, limits: StreamLimits) -> Any: ...
    def emit(self, request: StageRequest, event: StageEvent) -> EmitResult: ...
    def finish(self, request: StageRequest) -> None: ...
    def cancel(self, request: StageRequest) -> int: ...
    def request_release(self, stage_id: int, state: StateHandle) -> str: ...
    def confirm_release(self, stage_id: int, state: StateHandle, op_id: str) -> None: ...
    def is_live(self, stage_id: int, state: StateHandle) -> bool: ...


class BlockedSubmit(Protocol):
    """A producer submit started while the stream has no credit."""

    def blocked(self) -> bool: ...
    def outcome(self) -> str:
        """'accepted', 'blocked' (still waiting) or the refusal code."""
        ...


class Implementation(Protocol):
    name: str

    def negotiate(self, version: Any, required: Iterable[Any]) -> list[str]: ...
    def decode(self, type_name: str, data: Any) -> dict[str, Any]: ...
    def stream(self, request: StageRequest, limits: StreamLimits) -> Any: ...
    def controller(self, identities: Mapping[int, BackendIdentity]) -> Any: ...
    def read_manifest(self, directory: Path) -> VerifiedManifest: ...
    def start_blocked_submit(self, stream: Any, event: StageEvent) -> BlockedSubmit: ...
    # Raw JSON values, decoded by the implementation's own codec.
    def stream_from_data(self, request_data: Any, limits: StreamLimits) -> Any: ...
    def submit_data(self, stream: Any, event_data: Any) -> SubmitResult: ...


class _AsyncioBlockedSubmit:
    """Runs the reference's `await stream.submit(event)` on a private event loop, step by step."""

    def __init__(self, stream: contracts.EventStream, event: StageEvent) -> None:
        self._loop = asyncio.new_event_loop()
        self._task = self._loop.create_task(stream.submit(event))
        self._spin()

    def _spin(self) -> None:
        for _ in range(8):
            self._loop.run_until_complete(asyncio.sleep(0))

    def blocked(self) -> bool:
        self._spin()
        return not self._task.done()

    def outcome(self) -> str:
        self._spin()
        if not self._task.done():
            return "blocked"
        exc = self._task.exception()
        self._loop.close()
        if exc is None:
            return "accepted"
        return exc.code if isinstance(exc, ContractError) else f"exception:{exc!r}"


class _ThreadBlockedSubmit:
    """Runs the native blocking `submit` on a thread (the GIL is released while it waits)."""

    def __init__(self, stream: Any, event: StageEvent) -> None:
        self._stream = stream
        self._result: str | None = None
        self._thread = threading.Thread(target=self._run, args=(event,), daemon=True)
        self._thread.start()

    def _run(self, event: StageEvent) -> None:
        try:
            self._stream.submit(event, timeout=10.0)
            self._result = "accepted"
        except ContractError as exc:
            self._result = exc.code

    def blocked(self) -> bool:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            if self._stream.waiting_producers > 0:
                return True
            if self._result is not None:
                return False
            time.sleep(0.001)
        return False

    def outcome(self) -> str:
        self._thread.join(timeout=5.0)
        return self._result if self._result is not None else "blocked"


class PythonImplementation:
    name = "python"

    def negotiate(self, version: Any, required: Iterable[Any]) -> list[str]:
        return contracts.negotiate(version, required)

    def decode(self, type_name: str, data: Any) -> dict[str, Any]:
        if type_name not in TYPES:
            raise ContractError("invalid_argument", f"unknown contract type {type_name!r}")
        check_text(data, type_name)
        result: dict[str, Any] = TYPES[type_name].from_dict(data).to_dict()
        return result

    def stream(self, request: StageRequest, limits: StreamLimits) -> contracts.EventStream:
        return contracts.EventStream(request, limits)

    def controller(self, identities: Mapping[int, BackendIdentity]) -> contracts.StageController:
        return contracts.StageController(identities)

    def read_manifest(self, directory: Path) -> VerifiedManifest:
        return contracts.read_manifest(directory)

    def start_blocked_submit(self, stream: Any, event: StageEvent) -> BlockedSubmit:
        return _AsyncioBlockedSubmit(stream, event)

    def stream_from_data(self, request_data: Any, limits: StreamLimits) -> contracts.EventStream:
        check_text(request_data, "request")
        return contracts.EventStream(StageRequest.from_dict(request_data), limits)

    def submit_data(self, stream: Any, event_data: Any) -> SubmitResult:
        check_text(event_data, "event")
        result: SubmitResult = stream.try_submit(StageEvent.from_dict(event_data))
        return result


class NativeImplementation:
    name = "native"

    def __init__(self) -> None:
        from omni_edge.runtime import native  # imported lazily: the extension may be missing in a broken build

        self._native = native

    def negotiate(self, version: Any, required: Iterable[Any]) -> list[str]:
        return self._native.negotiate(version, required)

    def decode(self, type_name: str, data: Any) -> dict[str, Any]:
        return self._native.canonical(type_name, data)

    def stream(self, request: StageRequest, limits: StreamLimits) -> Any:
        return self._native.NativeEventStream(request, limits)

    def controller(self, identities: Mapping[int, BackendIdentity]) -> Any:
        return self._native.NativeStageController(identities)

    def read_manifest(self, directory: Path) -> VerifiedManifest:
        return self._native.read_manifest(directory)

    def start_blocked_submit(self, stream: Any, event: StageEvent) -> BlockedSubmit:
        return _ThreadBlockedSubmit(stream, event)

    def stream_from_data(self, request_data: Any, limits: StreamLimits) -> Any:
        return self._native.stream_from_data(request_data, limits)

    def submit_data(self, stream: Any, event_data: Any) -> SubmitResult:
        return self._native.submit_data(stream, event_data)


FACTORIES: dict[str, Callable[[], Implementation]] = {"python": PythonImplementation, "native": NativeImplementation}


def get(name: str) -> Implementation:
    try:
        return FACTORIES[name]()
    except KeyError:
        raise ValueError(f"unknown implementation {name!r}; choose from {', '.join(FACTORIES)}") from None
