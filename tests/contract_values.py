"""Builders of valid contract values shared by the tests."""

from __future__ import annotations

from typing import Any

from omni_edge.contracts import StageEvent, StageRequest, StateHandle


def request(request_id: str = "req-1", epoch: int = 0, **kw: Any) -> StageRequest:
    fields: dict[str, Any] = dict(request_id=request_id, stage_id=0, epoch=epoch, worker_generation="wg-1",
                                  artifact_id="art-1", state_layout_version=1, session_id="sess-1")
    fields.update(kw)
    return StageRequest(**fields)


def state(state_id: str = "kv-1", epoch: int = 0, **kw: Any) -> StateHandle:
    fields: dict[str, Any] = dict(session_id="sess-1", backend="ort-cpu", artifact_id="art-1", layout_version=1,
                                  epoch=epoch, backend_instance_id="inst-1", worker_generation="wg-1", state_id=state_id)
    fields.update(kw)
    return StateHandle(**fields)


def event(req: StageRequest, seq: int, payload: int = 10, terminal: bool = False, **kw: Any) -> StageEvent:
    fields: dict[str, Any] = dict(request_id=req.request_id, stage_id=req.stage_id, epoch=req.epoch, seq=seq,
                                  kind="done" if terminal else "token", worker_generation=req.worker_generation,
                                  terminal=terminal, payload_nbytes=payload, input_watermark=seq,
                                  release_token=f"{req.request_id}-tok-{seq}")
    fields.update(kw)
    return StageEvent(**fields)
