"""π0 policies end to end: a checkpoint of the architecture the project never saw (its own
sizes, two cameras with their own names), exported, and `omni-edge act` natively against
transformers' sample_actions for the same noise; the time rules (stale observations refused,
deadlines reported, a cancel mid-denoise leaves no action, a newer observation supersedes a
waiting one); refusals that leave the session usable."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llm_reference import CLI, cli
from omni_edge.contracts import ContractError
from omni_edge.export.models.pi0.reference import camera_pixels, load_policy, reference_actions
from omni_edge.runtime import PolicySession
from omni_edge.runtime.observation import read_observation
from omni_edge.runtime.request import CameraImage, Observation
from pi0_unseen import ACTION_SPEC, CAMERAS, TASK, UNSEEN
from PIL import Image

RUN = CLI.parent / "omni-edge-run"


def observation(scene: dict[str, Any], *, age_ms: float = 0.0, fixed_noise: bool = True, **changes: Any) -> Observation:
    images = tuple(CameraImage(c, str(scene["dir"] / f"{c}.png")) for c in CAMERAS)
    fields: dict[str, Any] = dict(timestamp_ms=time.time() * 1000.0 - age_ms, images=images,
                                  state=tuple(scene["state"]),
                                  noise=tuple(tuple(float(v) for v in r) for r in scene["noise"]) if fixed_noise else ())
    fields.update(changes)
    return Observation(**fields)


def write_observation(scene: dict[str, Any], path: Path, **fields: Any) -> Path:
    data = {"timestamp_ms": time.time() * 1000.0, "images": {c: f"{c}.png" for c in CAMERAS}, "state": scene["state"],
            "prompt": TASK, **fields}
    path.write_text(json.dumps(data))
    return path


def test_act_matches_sample_actions_on_an_unseen_checkpoint(policy_plan: Path, scene: dict[str, Any]) -> None:
    obs = write_observation(scene, scene["dir"] / "obs.json")
    done = cli("act", "--plan", str(policy_plan), "--observation", str(obs), "--noise", str(scene["dir"] / "noise.npy"),
               "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    action = json.loads(done.stdout.strip().splitlines()[-1])
    assert action["kind"] == "action"
    policy = load_policy(policy_plan.parent.parent / "ckpt")
    pixels = [camera_pixels(Image.open(scene["dir"] / f"{c}.png"), UNSEEN.image_size) for c in CAMERAS]
    ref = reference_actions(policy, pixels, TASK, np.array(scene["state"], np.float32), scene["noise"])
    got = np.array(action["actions"], np.float32)
    assert got.shape == (UNSEEN.chunk, UNSEEN.action_dim)
    assert np.abs(got - ref).max() <= 1e-4
    # The check can fail: the flow moved the noise, and another task moves the actions.
    assert np.abs(ref - scene["noise"]).max() > 0.1
    other = reference_actions(policy, pixels, "open the drawer", np.array(scene["state"], np.float32), scene["noise"])
    assert np.abs(other - ref).max() > 1e-3
    # The metadata: versioned, names and units per dimension, target times every dt from the capture.
    assert action["schema_version"] == 1 and action["action_names"] == ACTION_SPEC["names"]
    assert action["action_units"] == ACTION_SPEC["units"] and action["dt_ms"] == 33.3
    stamps = action["target_times_ms"]
    assert stamps[0] == action["observation_timestamp_ms"] and len(stamps) == UNSEEN.chunk
    assert np.allclose(np.diff(stamps), action["dt_ms"])
    assert action["model"]["checkpoint_id"] == "ckpt" and action["model"]["artifact"] == "policy-onnx"
    age = action["observation_age_ms"]
    assert 0 <= age["at_start"] <= age["at_emission"]
    assert len(action["timings"]["step_ms"]) == 10 and action["deadline_missed"] is False


def test_the_executorch_program_acts_within_its_bound(policy_plan: Path, scene: dict[str, Any]) -> None:
    """--format both: the same three graphs as one ExecuTorch program (XNNPACK); its reports hold
    the chunk to 1e-3 of sample_actions (XNNPACK's kernels approximate: measured 1.5e-4 on the
    tiny preset), and the session runs it natively."""
    component = policy_plan.parent / "policy-pte"
    task = json.loads((component / "reports" / "task.json").read_text())["checks"]
    assert {c["name"]: c["observed"] for c in task}["action_max_abs"] <= 1e-3
    assert json.loads((component / "manifest.json").read_text())["metadata"]["artifact"]["task_validation"]["passed"]
    with PolicySession.open(policy_plan.parent / "plan.pte.json") as session:
        assert {p["backend"] for p in session.placements()} == {"executorch"}
        et = np.array(session.act(observation(scene), TASK)["actions"], np.float32)
    with PolicySession.open(policy_plan) as session:
        ort = np.array(session.act(observation(scene), TASK)["actions"], np.float32)
    assert 0 < np.abs(et - ort).max() <= 1e-3


def test_omni_edge_run_acts_as_the_python_front_end(policy_plan: Path, scene: dict[str, Any]) -> None:
    """The C ABI's command line: the same chunk for the same observation file and noise, and
    observation files that name paths outside their directory refused."""
    obs = write_observation(scene, scene["dir"] / "obs_run.json")
    args = ["act", "--plan", str(policy_plan), "--observation", str(obs), "--noise", str(scene["dir"] / "noise.npy"), "--json"]
    native = subprocess.run([str(RUN), *args], capture_output=True, text=True, timeout=300)
    python = cli(*args)
    assert native.returncode == 0 and python.returncode == 0, native.stderr + python.stderr
    a, b = (json.loads(p.stdout.strip().splitlines()[-1]) for p in (native, python))
    assert a["kind"] == b["kind"] == "action" and a["actions"] == b["actions"]
    bad = write_observation(scene, scene["dir"] / "escape.json", images={"front": "../front.png", "wrist": "wrist.png"})
    refused = subprocess.run([str(RUN), "act", "--plan", str(policy_plan), "--observation", str(bad)], capture_output=True,
                             text=True, timeout=300)
    assert refused.returncode == 2 and "leaves the observation's directory" in refused.stderr


def test_stale_observation_is_refused_and_changes_nothing(policy_plan: Path, scene: dict[str, Any]) -> None:
    with PolicySession.open(policy_plan) as session:
        events: list[dict[str, Any]] = []
        with pytest.raises(ContractError) as err:
            session.act(observation(scene, age_ms=6000), TASK, on_event=events.append)
        assert err.value.code == "stale_observation" and "5000" in err.value.message
        assert not [e for e in events if e["kind"] == "action"]
        fresh = session.act(observation(scene), TASK)
        assert fresh["kind"] == "action"


def test_deadlines_are_reported_with_their_lateness(policy_plan: Path, scene: dict[str, Any]) -> None:
    with PolicySession.open(policy_plan) as session:
        late = session.act(observation(scene, age_ms=50), TASK, deadline_ms=10)
        assert late["deadline_missed"] is True and late["lateness_ms"] >= 40
        met = session.act(observation(scene), TASK, deadline_ms=60000)
        assert met["deadline_missed"] is False and met["lateness_ms"] < 0
        assert np.array_equal(np.array(late["actions"]), np.array(met["actions"]))  # same noise, same chunk


def test_noise_comes_from_the_seed_when_not_given(policy_plan: Path, scene: dict[str, Any]) -> None:
    with PolicySession.open(policy_plan) as session:
        a = session.act(observation(scene, fixed_noise=False, noise_seed=5), TASK)["actions"]
        b = session.act(observation(scene, fixed_noise=False, noise_seed=5), TASK)["actions"]
        c = session.act(observation(scene, fixed_noise=False, noise_seed=6), TASK)["actions"]
    assert a == b and a != c


@pytest.mark.parametrize(("change", "reason"), [
    ({"images": (CameraImage("front", "x.png"),)}, "invalid_observation"),
    ({"images": (CameraImage("side", "x.png"),)}, "invalid_observation"),
    ({"state": tuple([0.0] * 7)}, "invalid_observation"),
    ({"noise": ((0.0,) * 7,) * 3}, "invalid_observation"),
    ({"timestamp_ms": -1.0}, "invalid_observation"),
])
def test_bad_observations_are_refused_by_name(policy_plan: Path, scene: dict[str, Any], change: dict[str, Any],
                                              reason: str) -> None:
    with PolicySession.open(policy_plan) as session:
        with pytest.raises(ContractError) as err:
            session.act(observation(scene, **change), TASK)
        assert err.value.code == reason
        assert session.act(observation(scene), TASK)["kind"] == "action"


def _long_plan(policy_plan: Path, steps: int) -> Path:
    plan = json.loads(policy_plan.read_text())
    plan["stages"][0]["policy"]["num_steps"] = steps
    path = policy_plan.parent / f"plan.{steps}steps.json"
    path.write_text(json.dumps(plan))
    return path


def test_a_sigint_as_the_python_act_exits_does_not_kill_it(policy_plan: Path, scene: dict[str, Any]) -> None:
    """`act` keeps the cancel contract through the interpreter's exit, as `run` does
    (test_signals): a SIGINT landing after the action line (the request is over, the process is
    ending) must not kill it. The moments are aimed at that window, measured on a warm run."""
    plan = policy_plan.parent / "plan.no-age-limit.json"  # the moments must not depend on start-up time
    data = json.loads(policy_plan.read_text())
    data["stages"][0]["policy"]["max_observation_age_ms"] = 0
    plan.write_text(json.dumps(data))
    obs = write_observation(scene, scene["dir"] / "obs-signals.json")
    command = [str(CLI), "act", "--plan", str(plan), "--observation", str(obs), "--json"]

    def until_action(proc: subprocess.Popen[str]) -> bool:
        assert proc.stdout is not None
        return any('"kind": "action"' in line for line in proc.stdout)  # stops at the action line

    def exit_window() -> float:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert until_action(proc)
        after = time.monotonic()
        assert proc.wait(timeout=300) == 0
        return time.monotonic() - after

    exit_window()  # cold
    window = exit_window()
    codes, late = [], 0
    for k in range(16):
        # Each signal is aimed from the moment the action line is read, not from the start: the
        # start-up time varies on a loaded machine far more than the exit window is long.
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        acted = until_action(proc)
        time.sleep(window * k / 16)
        delivered = proc.poll() is None
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=300)
        codes.append(proc.returncode)
        late += acted and delivered and proc.returncode == 0
    assert late >= 3, f"only {late} of 16 signals landed after the action: the exit window was not exercised ({codes})"


def test_cancel_mid_denoise_leaves_no_action(policy_plan: Path, scene: dict[str, Any]) -> None:
    with PolicySession.open(policy_plan) as session:
        t = session.act(observation(scene), TASK)["timings"]
    step_ms = max(1e-3, float(np.mean(t["step_ms"])))
    steps = int(min(10000, max(400, 2000 / step_ms)))  # about two seconds of denoising (a plan holds at most 10000)
    with PolicySession.open(_long_plan(policy_plan, steps)) as session:
        events: list[dict[str, Any]] = []
        timer = threading.Timer((t["preprocess_ms"] + t["vision_ms"] + t["prefix_ms"]) / 1000 * 3 + 0.3, session.cancel)
        timer.start()
        result = session.act(observation(scene), TASK, on_event=events.append)
        timer.join()
        assert result["kind"] == "cancelled"
        assert [e["kind"] for e in events] == ["cancelled"]
        last = session.info()["stages"][0]["last_request"]
        assert 0 < last["steps"] < steps and last["action_emitted"] is False


def test_a_newer_observation_supersedes_a_waiting_one(policy_plan: Path, scene: dict[str, Any]) -> None:
    with PolicySession.open(_long_plan(policy_plan, 600)) as session:
        results: dict[int, dict[str, Any]] = {}
        ended = threading.Semaphore(0)

        def done(k: int) -> Any:
            return lambda result: (results.__setitem__(k, result), ended.release())

        session.post(observation(scene), TASK, on_done=done(0))
        deadline = time.monotonic() + 60
        while session.queue_counters()["run"] < 1 and time.monotonic() < deadline:  # the first is running
            time.sleep(0.001)
        for k in (1, 2):  # while it runs: the second waits and is superseded by the third
            session.post(observation(scene), TASK, on_done=done(k))
        for _ in range(3):
            assert ended.acquire(timeout=120)
        assert results[0]["kind"] == "action" and results[2]["kind"] == "action"
        assert results[1]["kind"] == "error" and results[1]["reason"] == "superseded"
        assert session.queue_counters() == {"posted": 3, "superseded": 1, "run": 2}


def test_observation_files_stay_in_their_directory(scene: dict[str, Any]) -> None:
    root = scene["dir"]
    obs, prompt = read_observation(write_observation(scene, root / "ok.json"), root / "noise.npy")
    assert [c.camera for c in obs.images] == list(CAMERAS) and prompt == TASK and len(obs.noise) == UNSEEN.chunk
    for images, why in (({"front": "../front.png"}, "leaves"), ({"front": "/etc/passwd"}, "relative"),
                        ({"front": 3}, "file name")):
        with pytest.raises(ValueError, match=why):
            read_observation(write_observation(scene, root / "bad.json", images=images))
    with pytest.raises(ValueError, match="unknown fields"):
        read_observation(write_observation(scene, root / "bad.json", extra=1))
    np.save(root / "f64.npy", np.zeros((2, 2)))
    with pytest.raises(ValueError, match="float32"):
        read_observation(root / "ok.json", root / "f64.npy")


def test_action_specs_are_read_strictly(tmp_path: Path) -> None:
    from omni_edge.export.policy import action_spec

    assert action_spec(None, 3)["names"] == ["a0", "a1", "a2"]
    for bad, why in (({"names": ["x"]}, "needs 3 entries"), ({"units": "m"}, "needs 3 entries"),
                     ({"frame": "base"}, "unknown fields"), ({"names": ["x", "x", "y"]}, "its own name"),
                     ({"dt_ms": 0}, "dt_ms")):
        (tmp_path / "spec.json").write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=why):
            action_spec(tmp_path / "spec.json", 3)


def test_loader_refuses_other_shapes_with_the_reason(policy_plan: Path, tmp_path: Path) -> None:
    checkpoint = policy_plan.parent.parent / "ckpt"
    with pytest.raises(ValueError, match="model_type"):
        bad = tmp_path / "other"
        bad.mkdir()
        (bad / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
        load_policy(bad)
    config = json.loads((checkpoint / "config.json").read_text())
    config["dit_config"]["num_hidden_layers"] = 2
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "config.json").write_text(json.dumps(config))
    (odd / "tokenizer.json").write_text((checkpoint / "tokenizer.json").read_text())
    with pytest.raises(ValueError, match="expert has 2 layers"):
        load_policy(odd)


def test_policy_compiles_for_the_htp_and_acts_there(policy_plan: Path, scene: dict[str, Any], tmp_path: Path) -> None:
    """--target qnn-htp: the three graphs at fp16 for the SM8750 HTP (CPU fallback disabled),
    checked on the emulator per graph and as a whole chunk against sample_actions; the session
    reports every graph on the QNN EP."""
    out = tmp_path / "qnn"
    done = cli("export", "policy", "--checkpoint", str(policy_plan.parent.parent / "ckpt"), "--out", str(out),
               "--cameras", ",".join(CAMERAS), "--prompt-tokens", "24", "--target", "qnn-htp", "--soc", "sm8750")
    assert done.returncode == 0, done.stderr[-3000:]
    component = out / "policy-qnn-sm8750-fp16"
    assert cli("verify", str(component)).returncode == 0
    checks = {c["name"]: c["observed"] for name in ("numerical.json", "task.json")
              for c in json.loads((component / "reports" / name).read_text())["checks"]}
    assert min(checks["image_sqnr_db"], checks["prefix_sqnr_db"], checks["step_sqnr_db"]) >= 30  # measured 49-55 dB
    assert checks["action_agreement_sqnr_db"] >= 25
    obs = write_observation(scene, scene["dir"] / "obs_htp.json")
    acted = cli("act", "--plan", str(out / "plan.json"), "--observation", str(obs), "--noise",
                str(scene["dir"] / "noise.npy"), "--json", "--info")
    assert acted.returncode == 0, acted.stderr[-2000:]
    placements = json.JSONDecoder().raw_decode(acted.stderr[acted.stderr.index("{"):])[0]["placements"]
    assert {(p["device"], p["engine"]) for p in placements} == {("npu", "QNNExecutionProvider")}
    assert len(placements) == 3
    assert json.loads(acted.stdout.strip().splitlines()[-1])["kind"] == "action"


def test_profile_reports_the_policy_dimensions(policy_plan: Path, tmp_path: Path) -> None:
    """The profiling protocol on a policy plan: an observation restamped at each request, the
    controller's preprocessing / vision / prefix / per-step / total times, the observation's age
    at emission and the deadline misses (short workload: 50 ms)."""
    out = tmp_path / "profile"
    done = cli("profile", "--device", "host", "--workdir", str(tmp_path / "device"), "--plan", str(policy_plan),
               "--runs", "4", "--warmup", "1", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["kind"] == "policy" and report["workload"]["deadline_ms"] == 50.0
    metrics = report["groups"]["concurrency-1"]["metrics"]
    assert metrics["total_ms"]["n"] == 4 and metrics["step_ms"]["n"] == 40
    for key in ("preprocess_ms", "vision_ms", "prefix_ms", "denoise_ms", "age_at_emission_ms"):
        assert metrics[key]["p50"] > 0, key
    assert metrics["age_at_emission_ms"]["p50"] >= metrics["total_ms"]["p50"] * 0.5  # captured just before the request
    assert 0 <= metrics["deadline_missed"]["mean"] <= 1
    assert [p["device"] for p in report["placement"]] == ["cpu"] * 3
    assert report["ledger"]["predicted_mb"] and "deadline 50 ms missed in" in done.stderr
