"""Value types: JSON round trip, strict decoding, identical decisions in both implementations."""

from __future__ import annotations

import json
from typing import Any

import pytest
from contract_values import event, request, state
from hypothesis import given, settings
from hypothesis import strategies as st
from omni_edge.contracts import BufferRef, ContractError, DeviceDescriptor, StageEvent, StageRequest, StateHandle
from omni_edge.runtime import implementations

BUFFER = {"object_id": "o", "owner": "w", "generation": "g", "dtype": "float32", "shape": [2, 3], "nbytes": 24}


def test_every_type_round_trips_to_an_equal_value(impl: implementations.Implementation) -> None:
    buf = BufferRef.from_dict(BUFFER)
    req = request(inputs=(buf,), state=state())
    ev = event(req, 1, payload=24, buffers=(buf,), state=state(), error="boom",
               started_monotonic_ns=5, emitted_monotonic_ns=9)
    dev = DeviceDescriptor("npu0", "npu", "Hexagon v79", "device-ram", 12 << 30, ("qnn-htp",), {"htp_arch": "79"})
    for type_name, value in [("buffer", buf), ("state", state()), ("request", req), ("event", ev), ("device", dev)]:
        data = json.loads(json.dumps(value.to_dict()))
        assert impl.decode(type_name, data) == value.to_dict()
        assert type(value).from_dict(impl.decode(type_name, data)) == value


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: d.update(seq="1"), "event.seq: expected an integer, got string"),
    (lambda d: d.update(stage_id=True), "event.stage_id: expected an integer, got boolean"),
    (lambda d: d.update(epoch=1.0), "event.epoch: expected an integer, got number"),
    (lambda d: d.update(terminal=0), "event.terminal: expected a boolean, got integer"),
    (lambda d: d.update(extra=1), "event.extra: unknown field"),
    (lambda d: d.pop("kind"), "event.kind: required field is missing"),
])
def test_wrong_json_types_are_refused_naming_the_field(impl: implementations.Implementation, mutate: Any, message: str) -> None:
    data = event(request(), 1).to_dict()
    mutate(data)
    with pytest.raises(ContractError) as info:
        impl.decode("event", data)
    assert info.value.code == "invalid_field"
    assert info.value.message == message


def test_nested_field_paths_are_named(impl: implementations.Implementation) -> None:
    data = request().to_dict()
    data["inputs"] = [dict(BUFFER, nbytes="24")]
    with pytest.raises(ContractError) as info:
        impl.decode("request", data)
    assert info.value.message == "request.inputs[0].nbytes: expected an integer, got string"


def test_types_validate_on_construction() -> None:
    with pytest.raises(ContractError, match="nbytes"):
        BufferRef("o", "w", "g", "int8", (3,), 4)
    with pytest.raises(ContractError, match="release requires a state"):
        request(operation="release")
    with pytest.raises(ContractError, match="not bound"):
        StageEvent("r", 0, 0, 1, "token", "wg", state=state(epoch=2))
    with pytest.raises(ContractError, match="layout_version"):
        StateHandle("s", "b", "a", 0, 0)
    assert StageRequest.from_dict(request().to_dict()).key() == ("req-1", 0, 0, "wg-1")


# ---- both implementations make the same decision on arbitrary, mostly-valid input ----
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.integers(2**62, 2**64),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=3), st.just("wg-1"))
_templates = {
    "buffer": BUFFER,
    "state": state().to_dict(),
    "request": request(state=state()).to_dict(),
    "event": event(request(), 1, state=state()).to_dict(),
    "device": {"device_id": "d", "kind": "gpu", "name": "n", "memory_pool": "vram", "memory_bytes": 1,
               "backends": ["x"], "properties": {"a": "b"}},
}


@st.composite
def _mutated(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    type_name = draw(st.sampled_from(sorted(_templates)))
    data = json.loads(json.dumps(_templates[type_name]))
    for _ in range(draw(st.integers(0, 3))):
        action = draw(st.sampled_from(["set", "delete", "add"]))
        key = draw(st.sampled_from(sorted(data))) if data else "x"
        if action == "set":
            data[key] = draw(_scalars)
        elif action == "delete":
            data.pop(key, None)
        else:
            data[draw(st.sampled_from(["zz", "request_id", "seq", "state", "shape"]))] = draw(_scalars)
    return type_name, data


def _decision(impl: implementations.Implementation, type_name: str, data: Any) -> str:
    try:
        return json.dumps(impl.decode(type_name, data), sort_keys=True)
    except ContractError as exc:
        return exc.code


@settings(max_examples=400, deadline=None)
@given(_mutated())
def test_decode_decisions_are_identical(case: tuple[str, dict[str, Any]]) -> None:
    type_name, data = case
    python, native = implementations.get("python"), implementations.get("native")
    assert _decision(python, type_name, data) == _decision(native, type_name, data)
