"""Qualcomm AI Hub as a validation facility (never a runtime dependency).

`omni-edge aihub compile|profile --artifact COMPONENT --device "Samsung Galaxy S25"`:

- profile: every QNN context binary of the component (compiled on this host for the
  component's SoC) runs on the hosted device; the profiles land in the component's evidence
  folder. The device's SoC must be the one the binaries were compiled for.
- compile: the component's quantized source graphs (export with --keep-qdq) are compiled by
  AI Hub for the device; the resulting context binaries are downloaded beside the profiles, to
  compare with the ones compiled here.

Requests are built by plain functions (unit-tested offline); only `submit` talks to AI Hub,
through the qai-hub client and the user's API token.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from omni_edge.contracts import ContractError
from omni_edge.files import write_text_atomic

# AI Hub device names -> the SoC key of omni_edge.socs.SOCS.
DEVICES: dict[str, str] = {
    "Samsung Galaxy S25": "sm8750",
    "Samsung Galaxy S25 (Family)": "sm8750",
    "Snapdragon 8 Elite QRD": "sm8750",
    "Samsung Galaxy S24": "sm8650",
    "Samsung Galaxy S24 (Family)": "sm8650",
    "Snapdragon 8 Gen 3 QRD": "sm8650",
    "Snapdragon X Elite CRD": "x-elite",
    "SA8775P ADP": "sa8775p",
    "RB3 Gen 2 (Proxy)": "qcs6490",
    "QCS6490 (Proxy)": "qcs6490",
}
NO_TOKEN = ("no Qualcomm AI Hub API token is configured: get one at https://aihub.qualcomm.com (Settings), "
            "then run `qai-hub configure --api_token TOKEN` (or point QAIHUB_CLIENT_INI at a client.ini)")


class AihubError(Exception):
    """A request that cannot be made, with the reason."""


@dataclass(frozen=True)
class Request:
    kind: str              # compile | profile
    graph: str             # the plan graph, e.g. "decode:512"
    model: str             # what is uploaded: a .bin (profile) or an ONNX model directory (compile)
    device: str
    name: str
    options: str
    evidence: str          # where the results are written
    files: tuple[str, ...] = field(default=())  # the artifact files behind `model`


def _manifest(component: Path) -> dict[str, Any]:
    from omni_edge.runtime import native

    try:
        native.read_manifest(component)  # hashes first: never submit a changed artifact
    except ContractError as exc:
        raise AihubError(f"{component}: {exc.code}: {exc.message}") from None
    manifest: dict[str, Any] = json.loads((component / "manifest.json").read_text())
    if "qnn" not in manifest.get("metadata", {}):
        raise AihubError(f"{component} is not a QNN HTP component (export with --target qnn-htp)")
    return manifest


def device_soc(device: str) -> str:
    if device not in DEVICES:
        raise AihubError(f"unknown AI Hub device {device!r}; known: {', '.join(sorted(DEVICES))}")
    return DEVICES[device]


def build_requests(kind: str, component: Path, device: str, iterations: int = 20, stamp: str = "") -> list[Request]:
    """The jobs `submit` would send, one per graph of the component."""
    from omni_edge.socs import SOCS

    if kind not in ("compile", "profile"):
        raise AihubError(f"unknown AI Hub job kind {kind!r} (compile, profile)")
    manifest = _manifest(component)
    qnn = manifest["metadata"]["qnn"]
    soc = device_soc(device)
    built_for = next((k for k, s in SOCS.items() if s.name == qnn["soc"]), "?")
    if kind == "profile" and soc != built_for:
        raise AihubError(f"{component.name} holds context binaries for {built_for} ({qnn['soc']}, {qnn['htp_arch']}); "
                         f"{device} is {soc} ({SOCS[soc].name}): export for --soc {soc}")
    stamp = stamp or time.strftime("%Y%m%d-%H%M%S")
    evidence = component / "evidence" / "aihub" / f"{stamp}-{kind}-{device.replace(' ', '_')}"
    requests: list[Request] = []
    for graph, facts in sorted(qnn["graphs"].items()):
        name = f"{manifest['component']}:{graph}"
        if kind == "profile":
            binary = facts["context_binary"]
            requests.append(Request("profile", graph, str(component / binary), device, name,
                                    f"--max_profiler_iterations {iterations}", str(evidence / graph.replace(":", "_")),
                                    (binary,)))
        else:
            source = component / "qdq" / (facts["model"].removesuffix("_ctx.onnx") + ".onnx")
            if not source.is_file():
                raise AihubError(f"{component.name} has no quantized source graphs (qdq/): re-export with --keep-qdq")
            files = tuple(sorted(p.relative_to(component).as_posix() for p in source.parent.glob(source.name + "*")))
            requests.append(Request("compile", graph, str(source), device, name,
                                    "--target_runtime qnn_context_binary --compute_unit npu --qnn_options "
                                    "default_graph_htp_optimization_value=3",
                                    str(evidence / graph.replace(":", "_")), files))
    return requests


def _onnx_directory(source: Path, staging: Path) -> Path:
    """AI Hub takes an ONNX model with external weights as a directory NAME.onnx holding the
    model and its weight files."""
    target = staging / source.name
    target.mkdir(parents=True, exist_ok=True)
    for p in source.parent.glob(source.name + "*"):
        shutil.copy2(p, target / p.name)
    return target


def client(load: Callable[[], Any] | None = None) -> Any:
    """The qai-hub module with a configured API token, or an AihubError saying how to get one."""
    try:
        import qai_hub
        from qai_hub import api_utils
    except ImportError:  # pragma: no cover - qai-hub is a declared dependency
        raise AihubError("the qai-hub client is not installed (pip install qai-hub)") from None
    try:
        (load or api_utils.load_default_api_config)()
    except Exception:
        raise AihubError(NO_TOKEN) from None
    return qai_hub


def submit(requests: Sequence[Request], hub: Any, progress: Callable[[str], None] = print) -> Path:
    """Submit every request, wait for it, and write results and a summary into the evidence folder."""
    if not requests:
        raise AihubError("nothing to submit")
    evidence_root = Path(requests[0].evidence).parent
    evidence_root.mkdir(parents=True, exist_ok=True)
    summary: list[dict[str, Any]] = []
    device = hub.Device(requests[0].device)
    for request in requests:
        out = Path(request.evidence)
        out.mkdir(parents=True, exist_ok=True)
        if request.kind == "profile":
            job = hub.submit_profile_job(model=request.model, device=device, name=request.name, options=request.options)
        else:
            model = _onnx_directory(Path(request.model), out / "upload")
            job = hub.submit_compile_job(model=str(model), device=device, name=request.name, options=request.options)
        progress(f"{request.kind} {request.graph}: job {job.job_id} ({job.url})")
        status = job.wait()
        record = {**asdict(request), "job_id": job.job_id, "url": job.url, "status": str(status)}
        if getattr(status, "success", False):
            if request.kind == "profile":
                (out / "profile.json").write_text(json.dumps(job.download_profile(), indent=1))
            else:
                job.download_results(str(out))
        summary.append(record)
    write_text_atomic(evidence_root / "jobs.json", json.dumps(summary, indent=1) + "\n")
    return evidence_root
