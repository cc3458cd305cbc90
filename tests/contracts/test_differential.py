"""Random sequences of submit / receive / ack / cancel / close, valid and invalid, on both
implementations: every observable outcome must be identical."""

from __future__ import annotations

from typing import Any

from contract_values import request, state
from hypothesis import given, settings
from hypothesis import strategies as st
from omni_edge.contracts import ContractError, StageEvent, StreamLimits
from omni_edge.runtime import implementations

REQ = request("req-d", epoch=2, state_layout_version=1)


@st.composite
def _submit(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    return "submit", {
        "seq_delta": draw(st.sampled_from([0, 0, 0, 0, 1, -1])),
        "payload": draw(st.sampled_from([0, 1, 8, 30, 64, 65])),
        "token": draw(st.sampled_from(["fresh"] * 8 + ["t1", "t2", ""])),
        "watermark_delta": draw(st.sampled_from([0, 0, 1, 1, -1])),
        "terminal": draw(st.integers(0, 9)) == 0,
        "mismatch": draw(st.sampled_from([None] * 12 + ["epoch", "request_id", "stage_id", "worker_generation"])),
        "state": draw(st.sampled_from([None] * 6 + ["kv-a", "kv-b", "foreign-layout"])),
    }


_ack = st.tuples(st.just("ack"), st.fixed_dictionaries({"which": st.sampled_from(["last", "last", "first", "bogus"])}))
# Weighted so that streams live long enough to fill up, drain and refill.
_ops = st.sampled_from(["submit"] * 6 + ["receive"] * 3 + ["ack"] * 3 + ["cancel", "close"]).flatmap(
    lambda op: {"submit": _submit(), "receive": st.just(("receive", {})), "ack": _ack,
                "cancel": st.just(("cancel", {})), "close": st.just(("close", {}))}[op])


class _Driver:
    def __init__(self, impl: implementations.Implementation, limits: StreamLimits) -> None:
        self.stream = impl.stream(REQ, limits)
        self.accepted = 0
        self.watermark = 0
        self.delivered: list[str] = []
        self.fresh = 0

    def _event(self, spec: dict[str, Any]) -> StageEvent:
        fields: dict[str, Any] = dict(request_id=REQ.request_id, stage_id=REQ.stage_id, epoch=REQ.epoch,
                                      worker_generation=REQ.worker_generation)
        if spec["mismatch"] == "epoch":
            fields["epoch"] = REQ.epoch + 1
        elif spec["mismatch"] == "request_id":
            fields["request_id"] = "other"
        elif spec["mismatch"] == "stage_id":
            fields["stage_id"] = 5
        elif spec["mismatch"] == "worker_generation":
            fields["worker_generation"] = "wg-x"
        token = spec["token"]
        if token == "fresh":
            self.fresh += 1
            token = f"fresh-{self.fresh}"
        st_handle = None
        if spec["state"] is not None:
            st_handle = state(spec["state"] if spec["state"] != "foreign-layout" else "kv-a", epoch=fields["epoch"],
                              worker_generation=fields["worker_generation"],
                              layout_version=2 if spec["state"] == "foreign-layout" else 1)
        return StageEvent(seq=max(0, self.accepted + 1 + spec["seq_delta"]), kind="done" if spec["terminal"] else "token",
                          terminal=spec["terminal"], payload_nbytes=spec["payload"],
                          input_watermark=max(0, self.watermark + spec["watermark_delta"]),
                          release_token=token, state=st_handle, **fields)

    def step(self, op: str, arg: dict[str, Any]) -> Any:
        s = self.stream
        if op == "submit":
            try:
                outcome: Any = s.try_submit(self._event(arg)).value
            except ContractError as exc:
                outcome = exc.code
            if outcome == "accepted":
                self.accepted += 1
                self.watermark = max(0, self.watermark + arg["watermark_delta"])
        elif op == "receive":
            e = s.receive_nowait()
            outcome = None if e is None else (e.seq, e.release_token, e.terminal)
            if e is not None:
                self.delivered.append(e.release_token)
        elif op == "ack":
            which = arg["which"]
            token = {"last": self.delivered[-1] if self.delivered else "none",
                     "first": self.delivered[0] if self.delivered else "none",
                     "bogus": "bogus"}[which]
            outcome = s.acknowledge(token)
        elif op == "cancel":
            outcome = s.cancel()
        else:
            s.close()
            outcome = None
        counters = (s.outstanding_events, s.outstanding_bytes, s.high_water_bytes, s.stale_events_dropped, s.ended)
        return op, outcome, counters


@settings(max_examples=400, deadline=None)
@given(ops=st.lists(_ops, max_size=60), max_events=st.integers(1, 4), max_bytes=st.sampled_from([1, 16, 64, 100]))
def test_python_and_native_streams_agree(ops: list[tuple[str, dict[str, Any]]], max_events: int, max_bytes: int) -> None:
    limits = StreamLimits(max_events, max_bytes)
    python = _Driver(implementations.get("python"), limits)
    native = _Driver(implementations.get("native"), limits)
    for op, arg in ops:
        assert python.step(op, arg) == native.step(op, arg)
        assert python.stream.outstanding_bytes <= max_bytes
