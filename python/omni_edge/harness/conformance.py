"""Contract conformance: run JSON fixtures against the Python reference and the native controller.

A fixture in the CONTRACT.md format (`contract_fixture_version` 2, `protocol_version`, `required_features`, `stream_limits`,
`request`, `events`, `reject_event_overrides`) runs as CONTRACT.md describes. omni-edge adds
optional sections, each a list of cases with expected outcomes:

- `scenarios`: stream steps (submit, submit_blocking, receive, ack, cancel, close, counters);
- `controller_scenarios`: stage-controller steps (begin, emit, finish, cancel, receive, ack,
  request_release, confirm_release, is_live);
- `decode_cases`: a JSON value decoded as a contract type, accepted or refused with a code;
- `negotiation_cases`: protocol negotiation outcomes;
- `manifest_cases`: artifact directories built from a spec, mutated, then verified.

Every check prints one line; any failed check makes the run fail.
"""

from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omni_edge.contracts import (
    BackendIdentity,
    ContractError,
    StageEvent,
    StageRequest,
    StateHandle,
    StreamLimits,
    SubmitResult,
)
from omni_edge.contracts.fields import FieldReader
from omni_edge.contracts.manifest import MANIFEST_NAME, load_json_text, sha256_file
from omni_edge.files import inside
from omni_edge.runtime import implementations

CORE_KEYS = {"protocol_version", "required_features", "stream_limits", "request", "events", "reject_event_overrides"}
SECTION_KEYS = {"scenarios", "controller_scenarios", "decode_cases", "negotiation_cases", "manifest_cases"}
INFO_KEYS = {"description", "$comment"}
VERSION_KEY = "contract_fixture_version"
SUPPORTED_FIXTURE_VERSIONS = (2,)  # CONTRACT.md's fixture format, protocol v2
OK_OUTCOMES = {"ok", "accepted", "backpressure", "retired", "qualified", "not_qualified"}


@dataclass(frozen=True)
class Check:
    impl: str
    fixture: str
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'} [{self.impl}] {self.fixture} :: {self.name}: {self.detail}"


class FixtureError(Exception):
    """The fixture itself is malformed (not an implementation's fault, still a failure)."""


def _outcome(fn: Callable[..., Any], *args: Any) -> tuple[str, Any]:
    """('ok', fn(*args)) or (refusal code, None)."""
    try:
        return "ok", fn(*args)
    except ContractError as exc:
        return exc.code, None


def _matches(expected: str, actual: str) -> bool:
    return expected == actual or (expected == "refused" and actual not in OK_OUTCOMES)


def deep_merge(base: Any, override: Any) -> Any:
    """Merge `override` into a copy of `base`; a null in an override deletes the key."""
    if not isinstance(base, dict) or not isinstance(override, dict):
        return copy.deepcopy(override)
    out = copy.deepcopy(base)
    for key, value in override.items():
        if value is None and key in out and isinstance(out[key], dict):
            del out[key]
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _limits(data: Any, where: str) -> StreamLimits:
    r = FieldReader(data, where)
    limits = StreamLimits(r.integer("max_events"), r.integer("max_bytes"))
    r.done()
    return limits


class FixtureRun:
    """Runs one fixture against one implementation and collects its checks."""

    def __init__(self, impl: implementations.Implementation, name: str, data: Any) -> None:
        self.impl = impl
        self.name = name
        self.data = data
        self.checks: list[Check] = []

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.checks.append(Check(self.impl.name, self.name, name, ok, detail))

    def expect(self, name: str, expected: Any, actual: Any, detail: str = "") -> bool:
        ok = _matches(expected, actual) if isinstance(expected, str) and isinstance(actual, str) else expected == actual
        suffix = f" ({detail})" if detail else ""
        self.check(name, ok, f"{actual}{suffix}" if ok else f"expected {expected}, got {actual}{suffix}")
        return ok

    # ---- the whole fixture ---------------------------------------------------
    def run(self) -> list[Check]:
        if not isinstance(self.data, dict):
            self.check("fixture", False, "a fixture is a JSON object")
            return self.checks
        version = self.data.get(VERSION_KEY)
        supported = ", ".join(map(str, SUPPORTED_FIXTURE_VERSIONS))
        if type(version) is not int or version not in SUPPORTED_FIXTURE_VERSIONS:
            found = "is missing" if version is None else f"is {json.dumps(version)}"
            self.check("fixture", False, f"{VERSION_KEY} {found}: this runner reads fixture version {supported}")
            return self.checks  # another format's sections cannot be read by this one's rules
        unknown = set(self.data) - CORE_KEYS - SECTION_KEYS - INFO_KEYS - {VERSION_KEY}
        if unknown:
            self.check("fixture", False, f"unknown sections: {', '.join(sorted(unknown))}")
        sections: list[tuple[str, Callable[..., None], Any]] = [("core", lambda _: self._core(), None)]
        for key, method in [("scenarios", self._scenario), ("controller_scenarios", self._controller_scenario),
                            ("decode_cases", self._decode_case), ("negotiation_cases", self._negotiation_case),
                            ("manifest_cases", self._manifest_case)]:
            sections += [(f"{key}[{i}]", method, case) for i, case in enumerate(self.data.get(key, []))]
        for label, section, case in sections:
            try:
                section(case)
            except (FixtureError, ContractError, KeyError, TypeError, ValueError, IndexError) as exc:
                self.check(label, False, f"could not run: {type(exc).__name__}: {exc}")
        return self.checks

    # ---- CONTRACT.md core: negotiate, stream every event, refuse every override --------
    def _core(self) -> None:
        d = self.data
        if not CORE_KEYS & set(d):
            return
        code, _ = _outcome(self.impl.negotiate, d.get("protocol_version"), d.get("required_features", []))
        if not self.expect("negotiate", "ok", code, f"protocol {d.get('protocol_version')!r}"):
            return
        if "events" not in d:
            return  # a fixture of omni-edge sections only
        missing = [k for k in ("stream_limits", "request") if k not in d]
        if missing:
            raise FixtureError(f"missing {', '.join(missing)}")
        limits = _limits(d["stream_limits"], "stream_limits")
        self._stream_all(d["request"], limits, d["events"])
        overrides = d.get("reject_event_overrides", [])
        # A list of overrides, or a mapping of names to overrides.
        named = list(overrides.items()) if isinstance(overrides, dict) else list(enumerate(overrides))
        for i, override in named:
            if not isinstance(override, dict):
                raise FixtureError(f"reject_event_overrides[{i!r}] must be an object")
            if not d["events"]:
                raise FixtureError("reject_event_overrides need at least one event")
            event = {**d["events"][0], **override}
            stream = self.impl.stream_from_data(d["request"], limits)
            code, result = _outcome(self.impl.submit_data, stream, event)
            shown = json.dumps(override, sort_keys=True)
            if code == "ok":
                self.check(f"reject override {i} {shown}", False, f"{result.value} but must be refused")
            else:
                self.check(f"reject override {i} {shown}", True, f"refused ({code})")

    def _stream_all(self, request_data: Any, limits: StreamLimits, events: list[Any]) -> None:
        stream = self.impl.stream_from_data(request_data, limits)
        delivered: list[int] = []
        expected_seqs = []

        def drain_one() -> bool:
            event = stream.receive_nowait()
            if event is None:
                return False
            delivered.append(event.seq)
            if not stream.acknowledge(event.release_token):
                self.check("acknowledge", False, f"seq {event.seq}: a delivered token was not accepted")
            return True

        for i, event_data in enumerate(events):
            while True:
                code, result = _outcome(self.impl.submit_data, stream, event_data)
                if code != "ok":
                    self.check(f"event {i}", False, f"refused ({code}) but a correct producer emits it")
                    return
                if result is SubmitResult.ACCEPTED:
                    expected_seqs.append(event_data.get("seq") if isinstance(event_data, dict) else None)
                    break
                if not drain_one():
                    self.check(f"event {i}", False, "backpressure with nothing left to consume")
                    return
        terminal = bool(events) and isinstance(events[-1], dict) and events[-1].get("terminal") is True
        if not terminal:
            stream.close()
        while drain_one():
            pass
        in_order = delivered == expected_seqs and delivered == list(range(1, len(delivered) + 1))
        self.check("events", in_order and len(delivered) == len(events),
                   f"{len(events)} accepted, {len(delivered)} delivered"
                   + (" in seq order" if in_order else f" OUT OF ORDER: {delivered}"))
        left = (stream.receive_nowait(), stream.outstanding_events, stream.outstanding_bytes)
        self.check("drained", left == (None, 0, 0),
                   "nothing left, all credit returned" if left == (None, 0, 0)
                   else f"left: event={left[0] is not None} events={left[1]} bytes={left[2]}")

    # ---- stream scenarios ----------------------------------------------------
    def _event_data(self, spec: Any, request: Mapping[str, Any], states: Mapping[str, Any] | None = None) -> Any:
        """An event from a spec: an index into `events`, {"event": i, "with": {...}}, or a (partial) object."""
        events = self.data.get("events", [])
        if isinstance(spec, int) and not isinstance(spec, bool):
            return copy.deepcopy(events[spec])
        if isinstance(spec, dict) and "event" in spec and isinstance(spec["event"], int):
            return {**events[spec["event"]], **spec.get("with", {})}
        if not isinstance(spec, dict):
            raise FixtureError(f"bad event spec {spec!r}")
        out = dict(spec)
        for key in ("request_id", "stage_id", "epoch", "worker_generation"):
            out.setdefault(key, request.get(key))
        if states is not None and isinstance(out.get("state"), str):
            out["state"] = states[out["state"]]
        return out

    def _scenario(self, sc: Any) -> None:
        name = sc.get("name", "scenario")
        request = sc.get("request", self.data.get("request"))
        limits = _limits(sc.get("stream_limits", self.data.get("stream_limits")), f"{name}.stream_limits")
        stream = self.impl.stream_from_data(request, limits)
        delivered: dict[int, StageEvent] = {}
        for i, step in enumerate(sc["steps"]):
            self._stream_step(f"{name} step {i}", stream, request, step, delivered)

    def _stream_step(self, label: str, stream: Any, request: Mapping[str, Any], step: Mapping[str, Any],
                     delivered: dict[int, StageEvent]) -> None:
        if "submit" in step:
            event = self._event_data(step["submit"], request)
            code, result = _outcome(self.impl.submit_data, stream, event)
            self.expect(f"{label} submit seq={event.get('seq')}", step.get("expect", "accepted"),
                        result.value if code == "ok" else code)
        elif "submit_blocking" in step:
            event = StageEvent.from_dict(self._event_data(step["submit_blocking"], request))
            blocked = self.impl.start_blocked_submit(stream, event)
            if not self.expect(f"{label} producer blocks", True, blocked.blocked()):
                return
            for j, inner in enumerate(step.get("then", [])):
                self._stream_step(f"{label}.{j}", stream, request, inner, delivered)
            self.expect(f"{label} blocked producer", step.get("expect", "accepted"), blocked.outcome())
        elif "receive" in step:
            event = stream.receive_nowait()
            got = None if event is None else event.seq
            if event is not None:
                delivered[event.seq] = event
            self.expect(f"{label} receive", step["receive"], got)
        elif "ack" in step:
            token = self._token(step["ack"], delivered)
            self.expect(f"{label} ack {token!r}", step.get("expect", True), stream.acknowledge(token))
        elif "cancel" in step:
            epoch = stream.cancel()
            if "expect_epoch" in step:
                self.expect(f"{label} cancel", step["expect_epoch"], epoch)
        elif "close" in step:
            stream.close()
        elif "counters" in step:
            self._counters(label, stream, step["counters"])
        else:
            raise FixtureError(f"{label}: unknown step {sorted(step)}")

    @staticmethod
    def _token(spec: Any, delivered: Mapping[int, StageEvent]) -> str:
        if isinstance(spec, dict) and "seq" in spec:
            return delivered[spec["seq"]].release_token
        if isinstance(spec, str):
            return spec
        raise FixtureError(f"bad ack spec {spec!r}")

    def _counters(self, label: str, stream: Any, expected: Mapping[str, Any]) -> None:
        for key, value in expected.items():
            self.expect(f"{label} {key}", value, getattr(stream, key))

    # ---- controller scenarios ------------------------------------------------
    def _controller_scenario(self, sc: Any) -> None:
        name = sc.get("name", "controller scenario")
        identities = {int(k): BackendIdentity.from_dict(v) for k, v in sc["identities"].items()}
        states: dict[str, Any] = dict(sc.get("states", {}))
        requests = {k: self._resolve_state(v, states) for k, v in sc.get("requests", {}).items()}
        controller = self.impl.controller(identities)
        streams: dict[str, Any] = {}
        saved: dict[str, str] = {}
        default_limits = sc.get("stream_limits", self.data.get("stream_limits", {"max_events": 8, "max_bytes": 1 << 20}))
        delivered: dict[int, StageEvent] = {}
        for i, step in enumerate(sc["steps"]):
            label = f"{name} step {i}"
            expect = step.get("expect", "ok")
            if "begin" in step:
                key = step["begin"]
                limits = _limits(step.get("stream_limits", default_limits), f"{label}.stream_limits")
                code, stream = _outcome(controller.begin, StageRequest.from_dict(requests[key]), limits)
                if stream is not None:
                    streams["active"] = stream
                    delivered.clear()
                self.expect(f"{label} begin {key}", expect, code)
            elif "emit" in step:
                key = step["emit"]
                event = self._event_data(step.get("event", {}), requests[key], states)
                code, result = _outcome(controller.emit, StageRequest.from_dict(requests[key]), StageEvent.from_dict(event))
                self.expect(f"{label} emit {key} seq={event.get('seq')}", step.get("expect", "accepted"),
                            result.value if code == "ok" else code)
            elif "finish" in step:
                code, _ = _outcome(controller.finish, StageRequest.from_dict(requests[step["finish"]]))
                self.expect(f"{label} finish {step['finish']}", expect, code)
            elif "cancel" in step:
                code, epoch = _outcome(controller.cancel, StageRequest.from_dict(requests[step["cancel"]]))
                self.expect(f"{label} cancel {step['cancel']}", expect, code)
                if code == "ok" and "expect_epoch" in step:
                    self.expect(f"{label} next epoch", step["expect_epoch"], epoch)
            elif "receive" in step or "ack" in step or "counters" in step:
                self._stream_step(label, streams["active"], {}, step, delivered)
            elif "request_release" in step:
                state = StateHandle.from_dict(states[step["request_release"]])
                code, op_id = _outcome(controller.request_release, step.get("stage_id", 0), state)
                self.expect(f"{label} request_release {step['request_release']}", expect, code)
                if code == "ok" and "expect_same_as" in step:
                    self.expect(f"{label} same release id", saved[step["expect_same_as"]], op_id)
                if code == "ok" and "save_as" in step:
                    saved[step["save_as"]] = op_id
            elif "confirm_release" in step:
                state = StateHandle.from_dict(states[step["confirm_release"]])
                op = step["op_id"]
                op_id = saved.get(op, op) if isinstance(op, str) else str(op)
                code, _ = _outcome(controller.confirm_release, step.get("stage_id", 0), state, op_id)
                self.expect(f"{label} confirm_release {step['confirm_release']}", expect, code)
            elif "is_live" in step:
                state = StateHandle.from_dict(states[step["is_live"]])
                self.expect(f"{label} is_live {step['is_live']}", step.get("expect", True),
                            controller.is_live(step.get("stage_id", 0), state))
            else:
                raise FixtureError(f"{label}: unknown step {sorted(step)}")

    @staticmethod
    def _resolve_state(request: Any, states: Mapping[str, Any]) -> Any:
        if isinstance(request, dict) and isinstance(request.get("state"), str):
            return {**request, "state": states[request["state"]]}
        return request

    # ---- values, negotiation, manifests ------------------------------------------
    def _decode_case(self, case: Any) -> None:
        code, _ = _outcome(self.impl.decode, case["type"], case["value"])
        self.expect(f"decode {case['type']} {case.get('name', '')}".rstrip(), case.get("expect", "ok"), code)

    def _negotiation_case(self, case: Any) -> None:
        code, features = _outcome(self.impl.negotiate, case["version"], case.get("required", []))
        label = f"negotiate {case['version']!r} {case.get('required', [])}"
        expected = case.get("expect", "ok")
        if isinstance(expected, list):
            self.expect(label, sorted(expected), features if code == "ok" else code)
        else:
            self.expect(label, expected, code)

    def _manifest_case(self, case: Any) -> None:
        with tempfile.TemporaryDirectory(prefix="omni-edge-manifest-") as tmp:
            directory = Path(tmp) / "artifact"
            build_artifact(directory, case)
            code, verified = _outcome(self.impl.read_manifest, directory)
            actual = code if code != "ok" else ("qualified" if verified.qualified else "not_qualified")
            self.expect(f"manifest {case.get('name', '')}".rstrip(), case.get("expect", "qualified"), actual)


# ---- artifact directories for manifest cases -------------------------------------
DEFAULT_IDENTITY = {
    "checkpoint_id": "tiny-qwen3", "checkpoint_revision": "r1", "precision": "fp32",
    "shape_bucket": "ctx512", "target_abi": "x86_64-linux",
}
DEFAULT_ARTIFACT = {
    **DEFAULT_IDENTITY, "runtime": "onnxruntime", "runtime_version": "1.23.2", "adapter_version": "1",
    "exporter_version": "0.1.0", "compiler_version": "none", "state_layout_version": 1,
    "numerical_validation": {"file": "numerical.json", "passed": True},
    "task_validation": {"file": "task.json", "passed": True},
}


def default_report(kind: str) -> dict[str, Any]:
    check = {"name": "logit_sqnr_db", "observed": 60.0, "limit": 30.0, "comparison": ">="} if kind == "numerical" \
        else {"name": "greedy_agreement", "observed": 1.0, "limit": 0.9, "comparison": ">="}
    return {"schema_version": 1, "kind": kind, **DEFAULT_IDENTITY, "checks": [check]}


def case_path(directory: Path, name: Any, follow: bool = True) -> Path:
    """A file a fixture names, inside its case directory (omni_edge.files.inside: a fixture is untrusted input)."""
    try:
        return inside(directory, name, follow)
    except ValueError as exc:
        raise FixtureError(f"a fixture names files inside its case directory: {exc}") from None


def build_artifact(directory: Path, case: Mapping[str, Any]) -> None:
    """Write files and reports, hash them into a manifest, apply overrides, then mutate the directory."""
    directory.mkdir(parents=True)
    files = {"graphs/decode.onnx": "graph bytes", **case.get("files", {})}
    for name, text in files.items():
        path = case_path(directory, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    reports = {"numerical.json": default_report("numerical"), "task.json": default_report("task")}
    for name, override in case.get("reports", {}).items():
        reports[name] = deep_merge(reports.get(name, {}), override)
    for name, report in reports.items():
        case_path(directory, name).write_text(json.dumps(report) if not isinstance(report, str) else report)
    manifest = {
        "schema_version": 2, "component": "llm.decode",
        "files": {p.relative_to(directory).as_posix(): sha256_file(p) for p in sorted(directory.rglob("*")) if p.is_file()},
        "metadata": {"artifact": copy.deepcopy(DEFAULT_ARTIFACT)},
    }
    manifest = deep_merge(manifest, case.get("manifest_with", {}))
    (directory / MANIFEST_NAME).write_text(json.dumps(manifest))
    for op in case.get("after", []):
        if "flip_byte" in op:
            path = case_path(directory, op["flip_byte"])
            data = bytearray(path.read_bytes())
            data[len(data) // 2] ^= 0x01
            path.write_bytes(bytes(data))
        elif "delete" in op:
            case_path(directory, op["delete"], follow=False).unlink()
        elif "write" in op:
            for name, text in op["write"].items():
                case_path(directory, name).write_text(text)
        elif "symlink" in op:  # a link out of the artifact, made by the runner (its target is fixed)
            target = directory.parent / "outside.bin"
            target.write_text("outside")
            case_path(directory, op["symlink"], follow=False).symlink_to(target)
        else:
            raise FixtureError(f"unknown manifest mutation {sorted(op)}")


# ---- running ----------------------------------------------------------------------
def load_fixture(path: Path) -> Any:
    """A fixture's JSON, read by the rules of the native parser (nesting, UTF-8)."""
    try:
        return load_json_text(path.read_bytes(), str(path))
    except OSError as exc:
        raise FixtureError(f"{path}: {exc}") from None
    except ContractError as exc:
        raise FixtureError(exc.message) from None


def run_fixtures(paths: list[Path], impl_names: list[str]) -> Iterator[Check]:
    impls = [implementations.get(n) for n in impl_names]
    for path in paths:
        try:
            data = load_fixture(path)
        except FixtureError as exc:
            for impl in impls:
                yield Check(impl.name, path.name, "load", False, str(exc))
            continue
        for impl in impls:
            yield from FixtureRun(impl, path.name, data).run()


def expand(paths: list[Path]) -> list[Path]:
    """Directories stand for the *.json fixtures inside them."""
    out: list[Path] = []
    for p in paths:
        out.extend(sorted(p.glob("*.json")) if p.is_dir() else [p])
    return out
