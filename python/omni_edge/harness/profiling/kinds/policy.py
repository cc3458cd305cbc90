"""A policy plan (its final output an "action" chunk): profiled with an observation restamped at
each request (a camera `capture_age_ms` behind): preprocessing, vision, prefix, the denoising
steps and the whole request on the controller's clock, the observation's age at start and at
emission, and the deadline: how often it was missed and by how much.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, ClassVar

from omni_edge.harness.devices.base import Device
from omni_edge.harness.profiling.kinds.base import Event, Lines, PlanKind, Workload

POLICY_FIELDS = ("preprocess_ms", "vision_ms", "prefix_ms", "denoise_ms", "step_ms_mean", "total_ms",
                 "age_at_start_ms", "age_at_emission_ms", "deadline_missed", "lateness_ms")


def write_observation(directory: Path, plan_path: Path, prompt: str = "") -> Path:
    """The profile's observation for a policy plan: a noise image per camera of the plan (a 4:3
    frame, resized with padding on the way), the state and the task, in OBS.json beside them (its
    timestamp is replaced at every request: `act --capture-age-ms`)."""
    import numpy as np
    from PIL import Image

    from omni_edge.files import atomic_output, write_text_atomic

    stage = json.loads(plan_path.read_text())["stages"][0]
    section = stage.get("policy") or stage["internvla"]  # π0's section or InternVLA-A1's
    rng = np.random.default_rng(0)
    images = {}
    directory.mkdir(parents=True, exist_ok=True)
    for camera in section["cameras"]:
        with atomic_output(directory / f"{camera}.png") as part:
            Image.fromarray(rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)).save(part, format="PNG")
        images[camera] = f"{camera}.png"
    obs = directory / "observation.json"
    write_text_atomic(obs, json.dumps({"timestamp_ms": 0, "images": images,
                                       "state": [round(float(v), 4) for v in rng.standard_normal(section["state_dim"])],
                                       "prompt": prompt}) + "\n")
    return obs


def policy_row(lines: Lines, start: float) -> dict[str, Any] | None:
    """A policy request's row from its action line (timings and ages on the controller's clock)."""
    action: Event | None = next((e for _, e in lines if e.get("kind") == "action"), None)
    if action is None:
        return None
    t, age = action.get("timings", {}), action.get("observation_age_ms", {})
    steps = [float(v) for v in t.get("step_ms", [])]
    done_t = max(tt for tt, e in lines if e.get("kind") == "action")
    return {"wall_ms": (done_t - start) * 1000, **{k: t.get(k) for k in ("preprocess_ms", "vision_ms", "denoise_ms",
                                                                          "total_ms")},
            # InternVLA-A1's context (prefix and frame history) is π0's prefix; its Cosmos frames apart
            "prefix_ms": t.get("prefix_ms", t.get("context_ms")), **({"frame_ms": t["frame_ms"]} if "frame_ms" in t else {}),
            "step_ms_mean": sum(steps) / len(steps) if steps else None, "step_ms": steps,
            "age_at_start_ms": age.get("at_start"), "age_at_emission_ms": age.get("at_emission"),
            "deadline_missed": 1.0 if action.get("deadline_missed") else 0.0, "lateness_ms": action.get("lateness_ms")}


class Policy(PlanKind):
    name = "policy"
    streams = ("action",)
    # The task text's length varies; the deadline is a 20 Hz control loop's (50 ms) and looser.
    workloads: ClassVar[dict[str, Workload]] = {
        "short": Workload("short", "pick up the red block", 0, deadline_ms=50.0),
        "medium": Workload("medium", "pick up the red block and put it in the blue bowl on the left", 0,
                           deadline_ms=100.0),
        "long": Workload("long", "pick up the red block, put it in the blue bowl on the left, then close the "
                                 "drawer and return to the start", 0, deadline_ms=200.0, capture_age_ms=20.0)}
    series = (("step_ms", "step_ms"),)
    first_output_metric = "age_at_emission_ms"

    def prepare(self, workload: Workload, device: Device, root: str, scratch: Path) -> Workload:
        """An observation (camera images, state, the task) pushed beside the artifacts."""
        assert self.plan is not None
        obs = write_observation(scratch / "observation", self.plan, workload.prompt)
        for local in sorted(obs.parent.iterdir()):
            device.put_file(local, f"{root}/observation/{local.name}")
        return dataclasses.replace(workload, observation=f"{root}/observation/{obs.name}")

    def run_argv(self, binary: str, plan: str, workload: Workload, wav: str) -> list[str]:
        return [binary, "act", "--plan", plan, "--observation", workload.observation, "--capture-age-ms",
                f"{workload.capture_age_ms:g}", "--deadline-ms", f"{workload.deadline_ms:g}", "--json", "--profile"]

    def request_row(self, lines: Lines, start: float) -> dict[str, Any] | None:
        return policy_row(lines, start)

    def metric_names(self) -> list[str]:
        return ["wall_ms", *POLICY_FIELDS]

    def report_workload(self, workload: Workload) -> dict[str, Any]:
        return {"deadline_ms": workload.deadline_ms, "capture_age_ms": workload.capture_age_ms,
                **super().report_workload(workload)}

    def summary_line(self, report: dict[str, Any], out: Path) -> str:
        g = next(iter(report["groups"].values()))["metrics"]  # the first --concurrency's group
        return (f"{out}/report.json (policy): total p50 {g['total_ms']['p50']:.1f} ms, prefix p50 "
                f"{g['prefix_ms']['p50']:.1f} ms, step p50 {g['step_ms']['p50']:.2f} ms, observation age at emission "
                f"p95 {g['age_at_emission_ms']['p95']:.1f} ms, deadline {report['workload']['deadline_ms']:g} ms missed "
                f"in {100 * (g['deadline_missed']['mean'] or 0):.0f}% (n={g['total_ms']['n']}); report.md and "
                f"{', '.join(report['plots'])}")

    def exit_status(self, report: dict[str, Any]) -> int:
        return 0  # as it has been: a policy profile's end does not read the reliability scenarios
