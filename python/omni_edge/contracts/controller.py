"""The stage controller: one active request per stage worker, live/retired state, release protocol
(CONTRACT.md, "The stage controller"). Mirrors controller_cpp/contract/stage_controller.h."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omni_edge.contracts.errors import ContractError
from omni_edge.contracts.fields import FieldReader
from omni_edge.contracts.stream import EventStream, StreamLimits, SubmitResult
from omni_edge.contracts.types import StageEvent, StageRequest, StateHandle


class EmitResult(enum.Enum):
    ACCEPTED = "accepted"
    BACKPRESSURE = "backpressure"
    RETIRED = "retired"


@dataclass(frozen=True)
class BackendIdentity:
    """Who runs a stage: the backend, its instance and the worker generation."""

    backend: str
    backend_instance_id: str
    worker_generation: str

    def __post_init__(self) -> None:
        for name in ("backend", "backend_instance_id", "worker_generation"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ContractError("invalid_field", f"identity.{name}: must be a non-empty string")

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "backend_instance_id": self.backend_instance_id,
                "worker_generation": self.worker_generation}

    @classmethod
    def from_dict(cls, data: Any, where: str = "identity") -> BackendIdentity:
        r = FieldReader(data, where)
        value = cls(r.string("backend"), r.string("backend_instance_id"), r.string("worker_generation"))
        r.done()
        return value


StateKey = tuple[int, str]


@dataclass
class _Active:
    request: StageRequest
    stream: EventStream
    state: StateHandle | None
    finished: bool = False


class StageController:
    """Enforces the begin / emit / finish / cancel / release rules for one stage worker."""

    def __init__(self, identities: Mapping[int, BackendIdentity]) -> None:
        self._identities = dict(identities)
        self._active: _Active | None = None
        self._used: set[tuple[str, int, int, str]] = set()
        # A handle names one state at one epoch: cancel retires that handle, and the backend
        # may later bind the same state to the next epoch with a new handle.
        self._live: dict[StateKey, StateHandle] = {}
        self._retired: set[tuple[int, StateHandle]] = set()
        self._pending: dict[tuple[int, StateHandle], str] = {}
        self._release_counter = 0

    @property
    def active_stream(self) -> EventStream | None:
        return None if self._active is None else self._active.stream

    def _busy(self) -> bool:
        a = self._active
        return a is not None and (not a.finished or a.stream.outstanding_events > 0)

    def is_live(self, stage_id: int, state: StateHandle) -> bool:
        return self._live.get((stage_id, state.state_id)) == state

    def _retire(self, stage_id: int, state: StateHandle | None) -> None:
        if state is None:
            return
        if self.is_live(stage_id, state):
            del self._live[(stage_id, state.state_id)]
        self._retired.add((stage_id, state))

    def begin(self, request: StageRequest, limits: StreamLimits) -> EventStream:
        if self._busy():
            raise ContractError("busy", "the previous request still has work or unacknowledged payloads")
        if self._pending:
            raise ContractError("release_pending", "a state release is unresolved")
        if request.operation != "run":
            raise ContractError("invalid_operation", f"begin takes run requests, got {request.operation!r}")
        for name in ("artifact_id", "session_id"):
            if not getattr(request, name):
                raise ContractError("missing_identity", f"request.{name}: required to begin")
        if request.state_layout_version <= 0:
            raise ContractError("missing_identity", "request.state_layout_version: must be > 0 to begin")
        identity = self._identities.get(request.stage_id)
        if identity is None:
            raise ContractError("unknown_stage", f"stage {request.stage_id} is not served by this worker")
        if request.worker_generation != identity.worker_generation:
            raise ContractError("worker_generation_mismatch", f"worker_generation {request.worker_generation!r} "
                                f"is not stage {request.stage_id}'s {identity.worker_generation!r}")
        if request.key() in self._used:
            raise ContractError("duplicate_request", f"request {request.key()} was used before")
        if request.state is not None and not self.is_live(request.stage_id, request.state):
            raise ContractError("state_not_live", "the continuation state is unknown, different or retired")
        stream = EventStream(request, limits)
        self._used.add(request.key())
        self._active = _Active(request, stream, request.state)
        return stream

    def _matching_active(self, request: StageRequest) -> _Active | None:
        a = self._active
        return a if a is not None and a.request.key() == request.key() else None

    def emit(self, request: StageRequest, event: StageEvent) -> EmitResult:
        a = self._matching_active(request)
        if a is None or a.stream.cancelled or a.stream.terminal_accepted or a.finished:
            return EmitResult.RETIRED
        state = event.state
        if state is not None:
            identity = self._identities[request.stage_id]
            if (state.backend != identity.backend or state.backend_instance_id != identity.backend_instance_id
                    or state.worker_generation != identity.worker_generation):
                raise ContractError("state_foreign", "event.state does not belong to this worker's backend")
            if (state.session_id != request.session_id or state.artifact_id != request.artifact_id
                    or state.layout_version != request.state_layout_version or state.epoch != request.epoch):
                raise ContractError("state_mismatch", "event.state session, artifact, layout or epoch differs from the request's")
            if (request.stage_id, state) in self._retired:
                raise ContractError("state_retired", f"state {state.state_id!r} at epoch {state.epoch} is retired")
        if a.stream.try_submit(event) is SubmitResult.BACKPRESSURE:
            return EmitResult.BACKPRESSURE
        if state is not None:
            self._live[(request.stage_id, state.state_id)] = state
            a.state = state
        return EmitResult.ACCEPTED

    def finish(self, request: StageRequest) -> None:
        """The backend states that it stopped; without a terminal event (and no cancel) that is an error."""
        a = self._matching_active(request)
        if a is None:
            raise ContractError("not_active", f"request {request.key()} is not the active request")
        if a.finished:
            return
        a.finished = True
        a.stream.close()
        if not a.stream.cancelled and not a.stream.terminal_accepted:
            self._retire(request.stage_id, a.state)
            raise ContractError("no_terminal", "stopped without a terminal event")

    def cancel(self, request: StageRequest) -> int:
        a = self._matching_active(request)
        if a is None:
            raise ContractError("not_active", f"request {request.key()} is not the active request")
        self._retire(request.stage_id, a.state)
        return a.stream.cancel()

    def request_release(self, stage_id: int, state: StateHandle) -> str:
        if stage_id not in self._identities:
            raise ContractError("unknown_stage", f"stage {stage_id} is not served by this worker")
        if not self.is_live(stage_id, state) and (stage_id, state) not in self._retired:
            raise ContractError("state_not_live", "release of an unknown or different state")
        if self._busy():
            raise ContractError("busy", "work or payload is still outstanding")
        pending = self._pending.get((stage_id, state))
        if pending is not None:
            return pending
        self._release_counter += 1
        op_id = f"release-{stage_id}-{self._release_counter}"
        self._pending[(stage_id, state)] = op_id
        return op_id

    def confirm_release(self, stage_id: int, state: StateHandle, op_id: str) -> None:
        if self._pending.get((stage_id, state)) != op_id:
            raise ContractError("release_mismatch", "no pending release with that id for that state")
        del self._pending[(stage_id, state)]
        if self.is_live(stage_id, state):
            del self._live[(stage_id, state.state_id)]
        self._retired.discard((stage_id, state))
