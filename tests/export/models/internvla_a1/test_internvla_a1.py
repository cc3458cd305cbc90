"""InternVLA-A1 end to end: a checkpoint of sizes no preset has (two cameras with odd-sized
frames, a two-frame history, a 7-dim state), exported, and `omni-edge act` natively against
vLLM-Omni's own InternVLAA1Policy.sample_actions for the same noise (run in its own environment);
the session's frame history (kept, padded at an episode's start, reset, refused when stale);
stale observations and cancels; refusals by name."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from internvla_unseen import ACTION_SPEC, CAMERAS, TASK, UNSEEN, frames, write_observation
from omni_edge.contracts import ContractError
from omni_edge.runtime import PolicySession
from omni_edge.runtime.request import CameraImage, Observation
from paths import RUN

A = UNSEEN.action_dim


def observation(scene: dict[str, Any], which: tuple[int, ...], *, age_ms: float = 0.0, **changes: Any) -> Observation:
    images = tuple(CameraImage(c, str(scene["dir"] / f"{c}_{f}.png")) for c in CAMERAS for f in which)
    fields: dict[str, Any] = dict(timestamp_ms=time.time() * 1000.0 - age_ms, images=images,
                                  state=tuple(scene["state"]),
                                  noise=tuple(tuple(float(v) for v in r) for r in scene["noise"]))
    fields.update(changes)
    return Observation(**fields)


def act(session: PolicySession, obs: Observation) -> np.ndarray:
    result = session.act(obs, TASK)
    assert result["kind"] == "action", result
    return np.asarray(result["actions"], np.float32)


@pytest.mark.parametrize(("plan", "limit"), [("plan", 1e-4), ("pte_plan", 1e-3)])
def test_act_equals_vllm_omnis_sample_actions(internvla: dict[str, Any], tmp_path: Path, plan: str, limit: float) -> None:
    """`omni-edge-run act` on an observation file with each camera's two frames: the chunk's
    action dimensions after the whole flow, against vLLM-Omni's policy on the same frames."""
    scene = internvla["scene"]
    for c in CAMERAS:
        for f in (0, 1):
            (tmp_path / f"{c}_{f}.png").write_bytes((scene["dir"] / f"{c}_{f}.png").read_bytes())
    obs = write_observation(scene, tmp_path / "obs.json")
    done = subprocess.run([str(RUN), "act", "--plan", str(internvla[plan]), "--observation", str(obs), "--noise",
                           str(scene["dir"] / "noise.npy"), "--threads", "1", "--json"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    event = json.loads(done.stdout.splitlines()[-1])
    got = np.array(event["actions"], np.float32)
    ref = internvla["upstream"][:, :A]
    assert got.shape == (UNSEEN.chunk, A) and event["action_names"] == ACTION_SPEC["names"]
    assert event["action_mode"] == "delta" and event["dt_ms"] == ACTION_SPEC["dt_ms"]
    assert np.abs(ref).max() > 0.5  # the reference moves: the comparison is not of zeros
    assert np.abs(got - ref).max() <= limit, np.abs(got - ref).max(axis=1)


def test_the_reference_is_vllm_omnis_and_every_input_moves_it(internvla: dict[str, Any]) -> None:
    """The project's torch arithmetic (what exports are validated against) equals vLLM-Omni's
    chunk, and the frames, the history, the state and the task each change the chunk."""
    from omni_edge.export.models.internvla_a1 import reference as R
    from omni_edge.export.models.internvla_a1.model import load

    model = load(internvla["checkpoint"])
    scene = internvla["scene"]
    ids = R.task_ids(internvla["checkpoint"] / "processor", TASK)

    def chunk(which: tuple[int, int] = (0, 1), state: Any = None, task: list[int] = ids) -> np.ndarray:
        views: list[np.ndarray | None] = [frames(scene, c, which) for c in CAMERAS] + [None]
        obs = R.Observation(views, np.asarray(scene["state"] if state is None else state, np.float32), TASK,
                            scene["noise"])
        return R.sample_actions(model, obs, task)[0]

    base = chunk()
    assert np.abs(base - internvla["upstream"]).max() <= 1e-5
    for other in (chunk((1, 1)), chunk((0, 0)), chunk(state=np.zeros(UNSEEN.state_dim)), chunk(task=ids[:2])):
        assert np.abs(other - base).max() > 1e-3


def test_the_session_keeps_each_cameras_history(internvla: dict[str, Any]) -> None:
    """Frame 0 then frame 1 in one session acts as the explicit history [0, 1]; a first frame
    stands in for its own past ([0, 0]); reset_history starts again ([1, 1])."""
    scene = internvla["scene"]
    with PolicySession.open(internvla["plan"]) as explicit:
        whole = {w: act(explicit, observation(scene, w)) for w in ((0, 1), (0, 0), (1, 1))}
    with PolicySession.open(internvla["plan"]) as session:
        first = act(session, observation(scene, (0,), age_ms=50))
        second = act(session, observation(scene, (1,)))
        again = act(session, observation(scene, (1,), reset_history=True))
    np.testing.assert_array_equal(first, whole[(0, 0)])
    np.testing.assert_array_equal(second, whole[(0, 1)])
    np.testing.assert_array_equal(again, whole[(1, 1)])
    assert np.abs(whole[(0, 1)] - internvla["upstream"][:, :A]).max() <= 1e-4


def test_a_stale_history_or_observation_is_refused_and_changes_nothing(internvla: dict[str, Any]) -> None:
    scene = internvla["scene"]
    with PolicySession.open(internvla["plan"]) as session:
        act(session, observation(scene, (0,), age_ms=3000))
        with pytest.raises(ContractError) as err:  # 2.6 s after the previous frame: more than the plan's 2 s
            session.act(observation(scene, (1,), age_ms=400), TASK)
        assert err.value.code == "stale_observation" and "reset_history" in err.value.message
        with pytest.raises(ContractError) as err:  # captured before the previous frame
            session.act(observation(scene, (1,), age_ms=3500), TASK)
        assert err.value.code == "stale_observation"
        with pytest.raises(ContractError) as err:
            session.act(observation(scene, (0, 1), age_ms=6000), TASK)
        assert err.value.code == "stale_observation" and "5000" in err.value.message
        # Nothing was lost: the whole history given, or a reset, acts as before.
        np.testing.assert_allclose(act(session, observation(scene, (0, 1))), internvla["upstream"][:, :A], atol=1e-4)
        act(session, observation(scene, (1,), reset_history=True))


@pytest.mark.parametrize(("change", "code", "needle"), [
    ({"images": ()}, "invalid_observation", "no image from camera 'front'"),
    ({"state": tuple([0.0] * 8)}, "invalid_observation", "robot has 7"),
    ({"noise": ((0.0,) * 7,) * UNSEEN.chunk}, "invalid_observation", "(12, 16)"),
])
def test_bad_observations_are_refused_by_name(internvla: dict[str, Any], change: dict[str, Any], code: str,
                                              needle: str) -> None:
    scene = internvla["scene"]
    with PolicySession.open(internvla["plan"]) as session:
        with pytest.raises(ContractError) as err:
            session.act(observation(scene, (0, 1), **change), TASK)
        assert err.value.code == code and needle in err.value.message, err.value.message
        three = tuple(CameraImage("front", str(scene["dir"] / "front_0.png")) for _ in range(3))
        with pytest.raises(ContractError) as err:
            session.act(observation(scene, (0, 1), images=three), TASK)
        assert "more than 2 images" in err.value.message
        with pytest.raises(ContractError) as err:
            session.act(observation(scene, (0, 1)), "<|image_pad|> " + TASK)
        assert err.value.code == "invalid_prompt"
        act(session, observation(scene, (0, 1)))  # the session still acts


def test_cancel_mid_denoise_leaves_no_action(internvla: dict[str, Any], tmp_path: Path) -> None:
    scene = internvla["scene"]
    plan = json.loads(internvla["plan"].read_text())
    plan["stages"][0]["internvla"]["num_steps"] = 5000
    plan["stages"][0]["artifact"] = str(internvla["plan"].parent / plan["stages"][0]["artifact"])
    long_plan = tmp_path / "plan.json"
    long_plan.write_text(json.dumps(plan))
    with PolicySession.open(long_plan) as session:
        events: list[dict[str, Any]] = []
        timer = threading.Timer(1.0, session.cancel)
        timer.start()
        result = session.act(observation(scene, (0, 1)), TASK, on_event=events.append)
        timer.join()
        assert result["kind"] == "cancelled" and [e["kind"] for e in events] == ["cancelled"]
        last = session.info()["stages"][0]["last_request"]
        assert 0 < last["steps"] < 5000 and last["action_emitted"] is False


def test_loader_refuses_what_it_cannot_run(internvla: dict[str, Any], tmp_path: Path) -> None:
    from omni_edge.export.models.internvla_a1.model import load, read_config

    config = json.loads((internvla["checkpoint"] / "config.json").read_text())
    for change, needle in (({"action_expert_variant": "qwen3_2l"}, "differ in layers"),
                           ({"image_resolution": [150, 160]}, "multiple of 32"),
                           ({"qwen3_vl_variant": "qwen3_vl"}, "qwen3_vl_<layers>l")):
        bad = tmp_path / "bad"
        bad.mkdir(exist_ok=True)
        (bad / "config.json").write_text(json.dumps({**config, **change}))
        with pytest.raises(ValueError, match=needle):
            read_config(bad)
    (bad / "config.json").write_text(json.dumps({**config, "omni_edge_sizes": {
        **config["omni_edge_sizes"], "expert": {**config["omni_edge_sizes"]["expert"], "hidden": 64}}}))
    for f in ("model.safetensors", "Cosmos-Tokenizer-CI8x8"):
        (bad / f).symlink_to(internvla["checkpoint"] / f)
    with pytest.raises(ValueError, match="the config's sizes say"):
        load(bad)


def test_the_openpi_websocket_serves_it_with_its_history(internvla: dict[str, Any]) -> None:
    """openpi-client as a robot uses it: one frame per camera per infer (HWC arrays); the
    connection's session keeps the history, so the second infer is vLLM-Omni's chunk on frames
    [0, 1]; vLLM-Omni's reset starts the history again."""
    from openpi_client.websocket_client_policy import WebsocketClientPolicy
    from PIL import Image
    from serving import serving

    scene = internvla["scene"]

    def obs(f: int) -> dict[str, Any]:
        images = {c: np.asarray(Image.open(scene["dir"] / f"{c}_{f}.png").convert("RGB")) for c in CAMERAS}
        return {"images": images, "state": np.array(scene["state"], np.float32), "prompt": TASK,
                "timestamp_ms": time.time() * 1000.0, "noise": scene["noise"]}

    with serving(internvla["plan"]) as running:
        host, port = running["url"].removeprefix("http://").removesuffix("/v1").split(":")
        policy = WebsocketClientPolicy(host=host, port=int(port), api_key=running["key"])
        meta = policy.get_server_metadata()
        assert meta["action_horizon"] == UNSEEN.chunk and meta["policy"]["cameras"] == list(CAMERAS)
        assert meta["policy"]["history"] == 2 and meta["policy"]["action_mode"] == "delta"
        policy.infer(obs(0))
        got = policy.infer(obs(1))["actions"]
        assert np.abs(got - internvla["upstream"][:, :A]).max() <= 1e-4
        policy.reset()
        again = policy.infer(obs(1))["actions"]  # a new episode: [1, 1], not [0, 1]
        assert np.abs(again - got).max() > 1e-3
        policy._ws.close()


@pytest.mark.parametrize("precision", ["fp16", "w8a16"])
def test_htp_graphs_pass_their_reports_on_the_qnn_ep(internvla: dict[str, Any], tmp_path: Path, precision: str) -> None:
    """`export policy --target qnn-htp`: every graph compiled with CPU fallback disabled, run on
    the HTP emulator, within its reports; the plan places every graph on the NPU (w8a16: the
    decoders' graphs quantized, vision and Cosmos at fp16)."""
    from llm_reference import cli

    done = cli("export", "policy", "--checkpoint", str(internvla["checkpoint"]), "--out", str(tmp_path / "qnn"),
               "--cameras", ",".join(CAMERAS), "--target", "qnn-htp", "--soc", "sm8750", "--precision", precision)
    assert done.returncode == 0, done.stderr[-3000:]
    plan = json.loads((tmp_path / "qnn" / f"plan.qnn-sm8750-{precision}.json").read_text())
    assert {g["device"] for g in plan["stages"][0]["graphs"].values()} == {"npu"}
    component = tmp_path / "qnn" / f"policy-qnn-sm8750-{precision}"
    manifest = json.loads((component / "manifest.json").read_text())
    reports = {k: json.loads((component / "reports" / f"{k}.json").read_text()) for k in ("numerical", "task")}
    graph_precisions = manifest["metadata"]["policy"]["graph_precisions"]
    assert graph_precisions == ({"vision": "fp16", "frame": "fp16", "context": "w8a16", "expert": "w8a16"}
                                if precision == "w8a16" else dict.fromkeys(graph_precisions, "fp16"))
    checks = [c for r in reports.values() for c in r["checks"]]
    assert {c["name"] for c in checks} >= {"image_sqnr_db", "frame_sqnr_db", "context_sqnr_db", "step_sqnr_db",
                                           "action_agreement_sqnr_db"}
    assert all(c["observed"] >= c["limit"] for c in checks), checks
    assert manifest["component"]


def test_the_python_front_end_acts_on_a_history_file(internvla: dict[str, Any], tmp_path: Path) -> None:
    """`omni-edge act` (the Python CLI) on OBS.json with each camera's two frames: the same chunk
    as vLLM-Omni's, and its summary names the frames and the context."""
    from llm_reference import cli

    scene = internvla["scene"]
    for c in CAMERAS:
        for f in (0, 1):
            (tmp_path / f"{c}_{f}.png").write_bytes((scene["dir"] / f"{c}_{f}.png").read_bytes())
    obs = write_observation(scene, tmp_path / "obs.json")
    done = cli("act", "--plan", str(internvla["plan"]), "--observation", str(obs), "--noise",
               str(scene["dir"] / "noise.npy"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "frames" in done.stderr and "context" in done.stderr and "(delta actions)" in done.stderr
    first = [float(v) for v in done.stdout.splitlines()[1].split(":")[1].split()[:A]]
    assert np.abs(np.array(first) - internvla["upstream"][0, :A]).max() <= 1e-4
