"""Value types of the Omni stage contract, protocol v2 (CONTRACT.md, "Value types").

Every type validates itself on construction and round-trips through JSON
(`to_dict` / `from_dict`) to an equal value. Mirrors controller_cpp/contract/types.h.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from omni_edge.contracts.errors import ContractError
from omni_edge.contracts.fields import FieldReader, check_int

DTYPE_SIZES: dict[str, int] = {
    "bool": 1, "uint8": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
    "int64": 8, "uint64": 8, "float16": 2, "float32": 4, "float64": 8,
}
MAX_DIMS = 32
MAX_BUFFER_BYTES = 2 * 1024**3
OPERATIONS = ("run", "cancel", "release")
DEVICE_KINDS = ("cpu", "gpu", "npu")


def _require_non_empty(value: str, path: str) -> None:
    if not isinstance(value, str) or not value:
        raise ContractError("invalid_field", f"{path}: must be a non-empty string")


def _require_min(value: int, path: str, minimum: int) -> None:
    check_int(value, path, minimum)


@dataclass(frozen=True)
class BufferRef:
    """A tensor copied to host memory."""

    object_id: str
    owner: str
    generation: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    memory_domain: str = "host-copy"
    layout: str = "C"
    ready: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(self.shape))
        for name in ("object_id", "owner", "generation"):
            _require_non_empty(getattr(self, name), f"buffer.{name}")
        if self.dtype not in DTYPE_SIZES:
            raise ContractError("invalid_field", f"buffer.dtype: unknown dtype {self.dtype!r}")
        if len(self.shape) > MAX_DIMS:
            raise ContractError("invalid_field", f"buffer.shape: at most {MAX_DIMS} dims, got {len(self.shape)}")
        for i, dim in enumerate(self.shape):
            check_int(dim, f"buffer.shape[{i}]", 0)
        _require_min(self.nbytes, "buffer.nbytes", 0)
        expected = math.prod(self.shape) * DTYPE_SIZES[self.dtype]
        if self.nbytes != expected:
            raise ContractError("invalid_buffer", f"buffer.nbytes: {self.nbytes} != product(shape) x item size = {expected}")
        if self.nbytes > MAX_BUFFER_BYTES:
            raise ContractError("invalid_buffer", f"buffer.nbytes: {self.nbytes} exceeds 2 GiB")
        if self.memory_domain != "host-copy":
            raise ContractError("invalid_buffer", f"buffer.memory_domain: must be 'host-copy', got {self.memory_domain!r}")
        if self.layout != "C":
            raise ContractError("invalid_buffer", f"buffer.layout: must be 'C', got {self.layout!r}")
        if self.ready is not True:
            raise ContractError("invalid_buffer", "buffer.ready: must be true")

    def to_dict(self) -> dict[str, Any]:
        return {
            "object_id": self.object_id, "owner": self.owner, "generation": self.generation,
            "dtype": self.dtype, "shape": list(self.shape), "nbytes": self.nbytes,
            "memory_domain": self.memory_domain, "layout": self.layout, "ready": self.ready,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "buffer") -> BufferRef:
        r = FieldReader(data, where)
        object_id, owner, generation = r.string("object_id"), r.string("owner"), r.string("generation")
        dtype = r.string("dtype")
        shape = tuple(check_int(d, f"{where}.shape[{i}]", 0) for i, d in enumerate(r.array("shape")))
        nbytes = r.integer("nbytes", minimum=0)
        memory_domain = r.string("memory_domain", required=False, default="host-copy")
        layout = r.string("layout", required=False, default="C")
        ready = r.boolean("ready", required=False, default=True)
        value = cls(object_id, owner, generation, dtype, shape, nbytes, memory_domain, layout, ready)
        r.done()
        return value


@dataclass(frozen=True)
class StateHandle:
    """An opaque reference to state the backend owns (KV cache, ring, recurrent state)."""

    session_id: str
    backend: str
    artifact_id: str
    layout_version: int
    epoch: int
    replayable: bool = False
    migratable: bool = False
    backend_instance_id: str = ""
    worker_generation: str = ""
    state_id: str = ""

    def __post_init__(self) -> None:
        for name in ("session_id", "backend", "artifact_id"):
            _require_non_empty(getattr(self, name), f"state.{name}")
        _require_min(self.layout_version, "state.layout_version", 1)
        _require_min(self.epoch, "state.epoch", 0)
        for name in ("replayable", "migratable"):
            if not isinstance(getattr(self, name), bool):
                raise ContractError("invalid_field", f"state.{name}: expected a boolean")
        for name in ("backend_instance_id", "worker_generation", "state_id"):
            if not isinstance(getattr(self, name), str):
                raise ContractError("invalid_field", f"state.{name}: expected a string")

    def is_bound(self, worker_generation: str, epoch: int) -> bool:
        """Bound to (worker_generation, epoch): identified by the backend and issued for that epoch."""
        return (
            bool(self.state_id) and bool(self.backend_instance_id) and bool(self.worker_generation)
            and self.worker_generation == worker_generation and self.epoch == epoch
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id, "backend": self.backend, "artifact_id": self.artifact_id,
            "layout_version": self.layout_version, "epoch": self.epoch, "replayable": self.replayable,
            "migratable": self.migratable, "backend_instance_id": self.backend_instance_id,
            "worker_generation": self.worker_generation, "state_id": self.state_id,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "state") -> StateHandle:
        r = FieldReader(data, where)
        value = cls(
            session_id=r.string("session_id"), backend=r.string("backend"), artifact_id=r.string("artifact_id"),
            layout_version=r.integer("layout_version", minimum=1), epoch=r.integer("epoch", minimum=0),
            replayable=r.boolean("replayable", required=False), migratable=r.boolean("migratable", required=False),
            backend_instance_id=r.string("backend_instance_id", required=False, non_empty=False),
            worker_generation=r.string("worker_generation", required=False, non_empty=False),
            state_id=r.string("state_id", required=False, non_empty=False),
        )
        r.done()
        return value


def _optional_state(r: FieldReader, where: str) -> StateHandle | None:
    data = r.obj("state", required=False)
    return None if data is None else StateHandle.from_dict(data, f"{where}.state")


def _buffers(r: FieldReader, name: str, where: str) -> tuple[BufferRef, ...]:
    return tuple(BufferRef.from_dict(b, f"{where}.{name}[{i}]") for i, b in enumerate(r.array(name, required=False)))


@dataclass(frozen=True)
class StageRequest:
    """One request to one stage worker."""

    request_id: str
    stage_id: int
    epoch: int
    worker_generation: str
    operation: str = "run"
    inputs: tuple[BufferRef, ...] = ()
    state: StateHandle | None = None
    artifact_id: str = ""
    state_layout_version: int = 0
    session_id: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        _require_non_empty(self.request_id, "request.request_id")
        _require_min(self.stage_id, "request.stage_id", 0)
        _require_min(self.epoch, "request.epoch", 0)
        _require_non_empty(self.worker_generation, "request.worker_generation")
        if self.operation not in OPERATIONS:
            raise ContractError("invalid_field", f"request.operation: must be one of {', '.join(OPERATIONS)}, got {self.operation!r}")
        _require_min(self.state_layout_version, "request.state_layout_version", 0)
        if self.state is not None:
            if not self.state.is_bound(self.worker_generation, self.epoch):
                raise ContractError("invalid_request", "request.state: not bound to the request's worker generation and epoch")
            if not self.session_id or self.state.session_id != self.session_id:
                raise ContractError("invalid_request", "request.state: session_id differs from the request's session_id")
            if self.state.artifact_id != self.artifact_id:
                raise ContractError("invalid_request", "request.state: artifact_id differs from the request's artifact_id")
            if self.state.layout_version != self.state_layout_version:
                raise ContractError("invalid_request", "request.state: layout_version differs from the request's state_layout_version")
        if self.operation == "release" and (self.state is None or self.inputs):
            raise ContractError("invalid_request", "request.operation: release requires a state and no inputs")

    def key(self) -> tuple[str, int, int, str]:
        return (self.request_id, self.stage_id, self.epoch, self.worker_generation)

    def to_dict(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id, "stage_id": self.stage_id, "epoch": self.epoch,
            "worker_generation": self.worker_generation, "operation": self.operation,
            "inputs": [b.to_dict() for b in self.inputs],
            "state": None if self.state is None else self.state.to_dict(),
            "artifact_id": self.artifact_id, "state_layout_version": self.state_layout_version,
            "session_id": self.session_id,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "request") -> StageRequest:
        r = FieldReader(data, where)
        value = cls(
            request_id=r.string("request_id"), stage_id=r.integer("stage_id", minimum=0),
            epoch=r.integer("epoch", minimum=0), worker_generation=r.string("worker_generation"),
            operation=r.string("operation"), inputs=_buffers(r, "inputs", where), state=_optional_state(r, where),
            artifact_id=r.string("artifact_id", required=False, non_empty=False),
            state_layout_version=r.integer("state_layout_version", required=False, minimum=0),
            session_id=r.string("session_id", required=False, non_empty=False),
        )
        r.done()
        return value


@dataclass(frozen=True)
class StageEvent:
    """One event a stage emits for a request."""

    request_id: str
    stage_id: int
    epoch: int
    seq: int
    kind: str
    worker_generation: str
    buffers: tuple[BufferRef, ...] = ()
    terminal: bool = False
    error: str | None = None
    state: StateHandle | None = None
    started_monotonic_ns: int = 0
    emitted_monotonic_ns: int = 0
    input_watermark: int = 0
    payload_nbytes: int = 0
    release_token: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "buffers", tuple(self.buffers))
        _require_non_empty(self.request_id, "event.request_id")
        _require_min(self.stage_id, "event.stage_id", 0)
        _require_min(self.epoch, "event.epoch", 0)
        _require_min(self.seq, "event.seq", 0)
        _require_non_empty(self.kind, "event.kind")
        _require_non_empty(self.worker_generation, "event.worker_generation")
        if not isinstance(self.terminal, bool):
            raise ContractError("invalid_field", "event.terminal: expected a boolean")
        if self.error is not None and not isinstance(self.error, str):
            raise ContractError("invalid_field", "event.error: expected a string or null")
        _require_min(self.started_monotonic_ns, "event.started_monotonic_ns", 0)
        _require_min(self.emitted_monotonic_ns, "event.emitted_monotonic_ns", 0)
        if (self.started_monotonic_ns == 0) != (self.emitted_monotonic_ns == 0):
            raise ContractError("invalid_event", "event.emitted_monotonic_ns: started and emitted timestamps must be both zero or both set")
        if self.emitted_monotonic_ns < self.started_monotonic_ns:
            raise ContractError("invalid_event", "event.emitted_monotonic_ns: emitted before started")
        _require_min(self.input_watermark, "event.input_watermark", 0)
        _require_min(self.payload_nbytes, "event.payload_nbytes", 0)
        buffer_bytes = sum(b.nbytes for b in self.buffers)
        if self.payload_nbytes and self.payload_nbytes < buffer_bytes:
            raise ContractError("invalid_event",
                                f"event.payload_nbytes: {self.payload_nbytes} is less than the buffers' {buffer_bytes} bytes")
        if not isinstance(self.release_token, str):
            raise ContractError("invalid_field", "event.release_token: expected a string")
        if self.state is not None and not self.state.is_bound(self.worker_generation, self.epoch):
            raise ContractError("invalid_event", "event.state: not bound to the event's worker generation and epoch")

    @property
    def charge(self) -> int:
        """Bytes this event holds against the stream's credit: its declared payload, else its buffers."""
        return self.payload_nbytes or sum(b.nbytes for b in self.buffers)

    def to_dict(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id, "stage_id": self.stage_id, "epoch": self.epoch, "seq": self.seq,
            "kind": self.kind, "worker_generation": self.worker_generation,
            "buffers": [b.to_dict() for b in self.buffers], "terminal": self.terminal, "error": self.error,
            "state": None if self.state is None else self.state.to_dict(),
            "started_monotonic_ns": self.started_monotonic_ns, "emitted_monotonic_ns": self.emitted_monotonic_ns,
            "input_watermark": self.input_watermark, "payload_nbytes": self.payload_nbytes,
            "release_token": self.release_token,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "event") -> StageEvent:
        r = FieldReader(data, where)
        value = cls(
            request_id=r.string("request_id"), stage_id=r.integer("stage_id", minimum=0),
            epoch=r.integer("epoch", minimum=0), seq=r.integer("seq", minimum=0), kind=r.string("kind"),
            worker_generation=r.string("worker_generation"), buffers=_buffers(r, "buffers", where),
            terminal=r.boolean("terminal", required=False), error=r.optional_string("error"),
            state=_optional_state(r, where),
            started_monotonic_ns=r.integer("started_monotonic_ns", required=False, minimum=0),
            emitted_monotonic_ns=r.integer("emitted_monotonic_ns", required=False, minimum=0),
            input_watermark=r.integer("input_watermark", required=False, minimum=0),
            payload_nbytes=r.integer("payload_nbytes", required=False, minimum=0),
            release_token=r.string("release_token", required=False, non_empty=False),
        )
        r.done()
        return value


@dataclass(frozen=True)
class DeviceDescriptor:
    """A compute device a stage can be placed on, and the physical memory pool it draws from."""

    device_id: str
    kind: str
    name: str
    memory_pool: str
    memory_bytes: int
    backends: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "backends", tuple(self.backends))
        object.__setattr__(self, "properties", dict(self.properties))
        for name in ("device_id", "name", "memory_pool"):
            _require_non_empty(getattr(self, name), f"device.{name}")
        if self.kind not in DEVICE_KINDS:
            raise ContractError("invalid_field", f"device.kind: must be one of {', '.join(DEVICE_KINDS)}, got {self.kind!r}")
        _require_min(self.memory_bytes, "device.memory_bytes", 0)
        for i, backend in enumerate(self.backends):
            _require_non_empty(backend, f"device.backends[{i}]")
        for key, value in self.properties.items():
            _require_non_empty(key, "device.properties")
            if not isinstance(value, str):
                raise ContractError("invalid_field", f"device.properties.{key}: expected a string")

    def to_dict(self) -> dict[str, Any]:
        return {
            "device_id": self.device_id, "kind": self.kind, "name": self.name, "memory_pool": self.memory_pool,
            "memory_bytes": self.memory_bytes, "backends": list(self.backends), "properties": dict(self.properties),
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "device") -> DeviceDescriptor:
        r = FieldReader(data, where)
        device_id, kind, name = r.string("device_id"), r.string("kind"), r.string("name")
        memory_pool = r.string("memory_pool")
        memory_bytes = r.integer("memory_bytes", minimum=0)
        backends = r.array("backends", required=False)
        for i, b in enumerate(backends):
            if not isinstance(b, str):
                raise ContractError("invalid_field", f"{where}.backends[{i}]: expected a string")
        properties = r.obj("properties", required=False) or {}
        value = cls(device_id, kind, name, memory_pool, memory_bytes, tuple(backends), dict(properties))
        r.done()
        return value
