"""The conformance runner: shipped fixtures pass on both implementations, a fixture in the bare
CONTRACT.md format passes, and a fixture with wrong expectations fails the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from omni_edge.cli import main
from omni_edge.harness.conformance import FixtureRun, expand, run_fixtures
from paths import FIXTURES

CONTRACT_FIXTURES = sorted((FIXTURES / "contract").glob("*.json"))


@pytest.mark.parametrize("path", CONTRACT_FIXTURES, ids=lambda p: p.stem)
def test_shipped_fixture_passes(path: Path, impl: Any) -> None:
    checks = FixtureRun(impl, path.name, json.loads(path.read_text())).run()
    failed = [c.line() for c in checks if not c.ok]
    assert checks and not failed, "\n".join(failed)


def _bare_fixture() -> dict[str, Any]:
    """Only the CONTRACT.md fields, written independently of the shipped ones."""
    req = {"request_id": "u-1", "stage_id": 4, "epoch": 11, "worker_generation": "gen-b", "operation": "run",
           "inputs": [], "artifact_id": "talker", "state_layout_version": 3, "session_id": "sx"}
    events = [{"request_id": "u-1", "stage_id": 4, "epoch": 11, "seq": i, "kind": "codes", "worker_generation": "gen-b",
               "buffers": [{"object_id": f"c{i}", "owner": "talker", "generation": "1", "dtype": "int16", "shape": [16],
                            "nbytes": 32}],
               "payload_nbytes": 32, "input_watermark": i, "release_token": f"u-{i}", "terminal": i == 9} for i in range(1, 10)]
    return {"contract_fixture_version": 2, "protocol_version": 2, "required_features": ["credit-ack"],
            "stream_limits": {"max_events": 2, "max_bytes": 64},
            "request": req, "events": events,
            "reject_event_overrides": [{"epoch": 10}, {"seq": 9}, {"release_token": ""}, {"stage_id": 3},
                                       {"payload_nbytes": 65}, {"worker_generation": "gen-a"}]}


def test_bare_contract_fixture_passes_on_both(tmp_path: Path) -> None:
    path = tmp_path / "unseen.json"
    path.write_text(json.dumps(_bare_fixture()))
    assert main(["conformance", str(path)]) == 0


def test_named_overrides_and_a_stream_without_terminal(tmp_path: Path) -> None:
    fixture = _bare_fixture()
    fixture["events"] = [{**e, "terminal": False} for e in fixture["events"]]
    fixture["reject_event_overrides"] = {"stale epoch": {"epoch": 10}, "gap": {"seq": 2}}
    path = tmp_path / "named.json"
    path.write_text(json.dumps(fixture))
    assert main(["conformance", str(path)]) == 0


@pytest.mark.parametrize("mutation", [
    lambda f: f["reject_event_overrides"].append({"kind": "other"}),       # a valid override "must be refused"
    lambda f: f["events"].__setitem__(1, {**f["events"][1], "seq": 5}),     # a correct producer would not emit this
    lambda f: f.__setitem__("required_features", ["time-travel"]),          # negotiation must fail
    lambda f: f.__setitem__("protocol_version", 3),
    lambda f: f.update(scenarios=[{"steps": [{"submit": {"seq": 1, "kind": "t", "release_token": "a"}, "expect": "backpressure"}]}]),
    lambda f: f.update(decode_cases=[{"type": "buffer", "value": {}, "expect": "ok"}]),
    lambda f: f.update(mystery_section=[]),
])
def test_wrong_expectations_make_the_runner_fail(tmp_path: Path, mutation: Any) -> None:
    fixture = _bare_fixture()
    mutation(fixture)
    path = tmp_path / "wrong.json"
    path.write_text(json.dumps(fixture))
    assert main(["conformance", str(path), "--quiet"]) == 1


@pytest.mark.parametrize("version", [3, 1, "2", 2.0, True, None])
def test_a_fixture_of_another_version_is_refused_naming_the_supported_one(tmp_path: Path, impl: Any,
                                                                         version: Any) -> None:
    fixture = _bare_fixture()
    fixture["contract_fixture_version"] = version
    if version is None:
        del fixture["contract_fixture_version"]
    checks = FixtureRun(impl, "other.json", fixture).run()
    assert [(c.name, c.ok) for c in checks] == [("fixture", False)]  # nothing else is read by v2's rules
    found = "is missing" if version is None else f"is {json.dumps(version)}"
    assert checks[0].detail == f"contract_fixture_version {found}: this runner reads fixture version 2"


def test_unreadable_fixture_fails(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    assert main(["conformance", str(path)]) == 1


def test_expand_and_counts() -> None:
    paths = expand([FIXTURES / "contract"])
    assert paths == CONTRACT_FIXTURES
    checks = list(run_fixtures(paths, ["python"]))
    assert len(checks) > 400 and all(c.ok for c in checks)
