"""The native controller (C++, through nanobind) behind the same API as the Python reference.

Values cross the boundary as the contract's JSON, so a test written against
`omni_edge.contracts` runs unchanged against these classes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from omni_edge import _native
from omni_edge.contracts.controller import BackendIdentity, EmitResult
from omni_edge.contracts.manifest import ArtifactManifest, ValidationReport, VerifiedManifest
from omni_edge.contracts.stream import StreamLimits, SubmitResult
from omni_edge.contracts.types import StageEvent, StageRequest, StateHandle

PROTOCOL_VERSION: int = _native.PROTOCOL_VERSION


def _dumps(value: Any) -> str:
    return json.dumps(value, allow_nan=True)


def _event(text: str | None) -> StageEvent | None:
    return None if text is None else StageEvent.from_dict(json.loads(text))


class NativeEventStream:
    """A native bounded, credited stream. `submit` blocks the calling thread (GIL released)."""

    def __init__(self, request: StageRequest, limits: StreamLimits, *, _handle: Any = None) -> None:
        self.request = request
        self.limits = limits
        self._s = _handle if _handle is not None else _native.EventStream(
            _dumps(request.to_dict()), limits.max_events, limits.max_bytes)

    def try_submit(self, event: StageEvent) -> SubmitResult:
        return SubmitResult(self._s.try_submit(_dumps(event.to_dict())))

    def submit(self, event: StageEvent, timeout: float | None = None) -> None:
        self._s.submit(_dumps(event.to_dict()), timeout)

    def close(self) -> None:
        self._s.close()

    def receive_nowait(self) -> StageEvent | None:
        return _event(self._s.try_receive())

    def receive(self, timeout: float | None = None) -> StageEvent | None:
        return _event(self._s.receive(timeout))

    def acknowledge(self, token: str) -> bool:
        return bool(self._s.acknowledge(token)) if isinstance(token, str) else False

    def cancel(self) -> int:
        return int(self._s.cancel())

    def counters(self) -> dict[str, Any]:
        return dict(self._s.counters())

    @property
    def outstanding_events(self) -> int:
        return int(self.counters()["outstanding_events"])

    @property
    def outstanding_bytes(self) -> int:
        return int(self.counters()["outstanding_bytes"])

    @property
    def high_water_bytes(self) -> int:
        return int(self.counters()["high_water_bytes"])

    @property
    def stale_events_dropped(self) -> int:
        return int(self.counters()["stale_events_dropped"])

    @property
    def waiting_producers(self) -> int:
        return int(self.counters()["waiting_producers"])

    @property
    def cancelled(self) -> bool:
        return bool(self.counters()["cancelled"])

    @property
    def closed(self) -> bool:
        return bool(self.counters()["closed"])

    @property
    def ended(self) -> bool:
        return bool(self.counters()["ended"])


class NativeStageController:
    def __init__(self, identities: Mapping[int, BackendIdentity]) -> None:
        self._c = _native.StageController(_dumps({str(k): v.to_dict() for k, v in identities.items()}))

    def begin(self, request: StageRequest, limits: StreamLimits) -> NativeEventStream:
        handle = self._c.begin(_dumps(request.to_dict()), limits.max_events, limits.max_bytes)
        return NativeEventStream(request, limits, _handle=handle)

    def emit(self, request: StageRequest, event: StageEvent) -> EmitResult:
        return EmitResult(self._c.emit(_dumps(request.to_dict()), _dumps(event.to_dict())))

    def finish(self, request: StageRequest) -> None:
        self._c.finish(_dumps(request.to_dict()))

    def cancel(self, request: StageRequest) -> int:
        return int(self._c.cancel(_dumps(request.to_dict())))

    def request_release(self, stage_id: int, state: StateHandle) -> str:
        return str(self._c.request_release(stage_id, _dumps(state.to_dict())))

    def confirm_release(self, stage_id: int, state: StateHandle, op_id: str) -> None:
        self._c.confirm_release(stage_id, _dumps(state.to_dict()), op_id)

    def is_live(self, stage_id: int, state: StateHandle) -> bool:
        return bool(self._c.is_live(stage_id, _dumps(state.to_dict())))


def negotiate(version: Any, required: Iterable[Any]) -> list[str]:
    req = required if isinstance(required, (str, bytes)) else list(required)
    return list(_native.negotiate(_dumps({"protocol_version": version, "required_features": req})))


def canonical(type_name: str, data: Any) -> dict[str, Any]:
    """Decode `data` natively as the named contract type and return its canonical JSON form."""
    result: dict[str, Any] = json.loads(_native.canonical_json(type_name, _dumps(data)))
    return result


def read_manifest(directory: str | Path) -> VerifiedManifest:
    out = json.loads(_native.read_manifest(str(directory)))
    return VerifiedManifest(
        Path(directory),
        ArtifactManifest.from_dict(out["manifest"]),
        ValidationReport.from_dict(out["numerical"]),
        ValidationReport.from_dict(out["task"]),
        tuple(out["extra_files"]),
    )


def stream_from_data(request_data: Any, limits: StreamLimits) -> NativeEventStream:
    """A native stream whose request the native codec decodes from the raw JSON value."""
    handle = _native.EventStream(_dumps(request_data), limits.max_events, limits.max_bytes)
    request = StageRequest.from_dict(json.loads(_native.canonical_json("request", _dumps(request_data))))
    return NativeEventStream(request, limits, _handle=handle)


def submit_data(stream: NativeEventStream, event_data: Any) -> SubmitResult:
    """try_submit with the native codec decoding the raw JSON event."""
    return SubmitResult(stream._s.try_submit(_dumps(event_data)))
