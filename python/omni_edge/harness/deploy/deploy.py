"""Lay out binary, libraries, artifacts and plan on a device, then re-verify on the target.

Remote layout (under the device's work directory):

    NAME/bin/omni-edge-run
    NAME/lib/...                 runtime libraries (ONNX Runtime, ExecuTorch, QNN when the plan uses the NPU)
    NAME/artifacts/COMPONENT/... every artifact directory the plan names, with its manifest
    NAME/plan.json               the plan, its artifact paths rewritten to artifacts/COMPONENT

Push skips files whose remote SHA-256 already matches, so a second deploy of an unchanged
artifact sends nothing. Before a run, `verify_on_target` has the target's own omni-edge-run
re-hash each artifact against its manifest: what runs is what was exported.
"""

from __future__ import annotations

import json
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from omni_edge.files import write_text_atomic
from omni_edge.harness.deploy.binaries import ABI_ALIASES, binary_abi
from omni_edge.harness.devices.base import Device, DeviceError, PushReport

# Android ABI names and the machine names of the same instruction sets.
_ABI_ALIASES = ABI_ALIASES
_SYSTEM_LIB_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64")


@dataclass
class RuntimeBundle:
    """The native runtime to deploy: omni-edge-run and the libraries it loads, for one ABI."""

    binary: Path
    libraries: dict[str, Path]  # remote file name -> local file
    abi: str
    env: dict[str, str] = field(default_factory=dict)  # relative to the remote root, e.g. lib/libonnxruntime.so.1


def installed_binary() -> Path:
    """This host's omni-edge-run (beside the Python that runs this)."""
    found = shutil.which("omni-edge-run") or str(Path(sys.executable).parent / "omni-edge-run")
    if not Path(found).exists():
        raise DeviceError("omni-edge-run is not installed: run scripts/setup.sh (or pass --runtime DIR)")
    return Path(found)


def _linked_libraries(binary: Path) -> dict[str, Path]:
    """Shared libraries the binary links that are not part of the OS (ExecuTorch, ...)."""
    try:
        out = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=30, check=False).stdout
    except OSError:
        return {}
    libs: dict[str, Path] = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+)\s+=>\s+(/\S+)", line)
        if m and not m.group(2).startswith(_SYSTEM_LIB_DIRS):
            libs[m.group(1)] = Path(m.group(2)).resolve()
    return libs


def host_runtime(needs_qnn: bool) -> RuntimeBundle:
    """This host's installed omni-edge-run with the wheels' runtime libraries."""
    binary = installed_binary()
    libs = _linked_libraries(binary)
    env: dict[str, str] = {}
    try:
        import onnxruntime

        ort = sorted((Path(onnxruntime.__file__).parent / "capi").glob("libonnxruntime.so.*"))
        if ort:
            libs["libonnxruntime.so.1"] = ort[0]
            env["OMNI_EDGE_ONNXRUNTIME_LIB"] = "lib/libonnxruntime.so.1"
    except ImportError:
        pass
    if needs_qnn:
        try:
            import onnxruntime_qnn
        except ImportError as exc:
            raise DeviceError("the plan runs on the NPU but onnxruntime-qnn is not installed") from exc
        qnn = Path(onnxruntime_qnn.__file__).parent
        for lib in [*qnn.glob("libQnn*.so"), *qnn.glob("libHtp*.so"), qnn / "libonnxruntime_providers_qnn.so"]:
            libs[lib.name] = lib
        env["OMNI_EDGE_QNN_EP_LIB"] = "lib/libonnxruntime_providers_qnn.so"
        env["OMNI_EDGE_QNN_BACKEND"] = "lib/libQnnHtp.so"
    return RuntimeBundle(binary, libs, platform.machine(), env)


def runtime_from_dir(root: Path, abi: str | None = None) -> RuntimeBundle:
    """A runtime built elsewhere: ROOT/bin/omni-edge-run and ROOT/lib/*, usually a bundle
    (`omni-edge bundle`), which is verified first (every file re-hashed). Its ABI is read from
    the binary itself; a stated `abi` that disagrees is an error."""
    if (root / "bundle.json").is_file():
        from omni_edge.harness.deploy.bundle import BundleError, verify_bundle

        try:
            verify_bundle(root)
        except BundleError as exc:
            raise DeviceError(str(exc)) from exc
    binary = root / "bin" / "omni-edge-run"
    if not binary.is_file():
        exe = root / "bin" / "omni-edge-run.exe"
        raise DeviceError(f"{root}: a Windows build ({binary_abi(exe)}) runs on Windows, not on an ADB or Linux device"
                          if exe.is_file() else f"{root}: no bin/omni-edge-run in this runtime directory")
    found = binary_abi(binary)
    if found not in ("aarch64", "x86_64"):
        raise DeviceError(f"{binary}: not an aarch64 or x86_64 ELF executable")
    if abi is not None and _ABI_ALIASES.get(abi, abi) != found:
        raise DeviceError(f"{binary} is built for {found}, not {abi}")
    libs = {p.name: p for p in sorted((root / "lib").glob("*.so*"))} if (root / "lib").is_dir() else {}
    env = {"OMNI_EDGE_ONNXRUNTIME_LIB": "lib/libonnxruntime.so.1"} if "libonnxruntime.so.1" in libs else {}
    if "libQnnHtp.so" in libs:  # the HTP stub finds its DSP-side skeleton libraries through this on Android
        env["ADSP_LIBRARY_PATH"] = "lib"
    return RuntimeBundle(binary, libs, found, env)


@dataclass
class Deployment:
    device: Device
    root: str                       # remote directory of this deployment
    plan: str                       # remote plan.json
    artifacts: list[str]            # remote artifact directories
    report: PushReport
    env: dict[str, str]             # environment for every command run here

    @property
    def binary(self) -> str:
        return str(PurePosixPath(self.root) / "bin" / "omni-edge-run")

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device.serial, "root": self.root, "plan": self.plan, "artifacts": self.artifacts,
                "env": self.env, **self.report.counts()}


def _plan_file(artifact: Path, plan_name: str) -> Path:
    plan = artifact / plan_name if artifact.is_dir() else artifact
    if not plan.is_file():
        raise DeviceError(f"{plan}: no plan here (export one with `omni-edge export llm`)")
    return plan


def _uses_npu(plan: dict[str, Any]) -> bool:
    return any(g.get("device") in ("npu", "htp") for s in plan.get("stages", []) for g in s.get("graphs", {}).values())


def relocate_plan(plan_path: Path) -> tuple[str, dict[str, Path]]:
    """The plan with each stage's artifact rewritten to artifacts/NAME (JSON text), and
    artifacts/NAME -> the local artifact directory, for every artifact the plan names."""
    from omni_edge.harness.qualification.verify_targets import VerifyTargetError, plan_components

    try:
        components = plan_components(plan_path)
    except VerifyTargetError as exc:
        raise DeviceError(str(exc)) from exc
    plan = json.loads(plan_path.read_text())
    names = _remote_names(components)
    for part in [*plan["stages"], *([plan["voice_activity"]] if "voice_activity" in plan else [])]:
        part["artifact"] = f"artifacts/{names[(plan_path.parent / part['artifact']).resolve()]}"
    return json.dumps(plan, indent=2) + "\n", {f"artifacts/{names[c]}": c for c in components}


def check_abi(device: Device, bundle: RuntimeBundle) -> None:
    """Refuses a runtime built for another ABI than the device's, before anything is pushed."""
    facts_abi = device.facts().abi
    want = _ABI_ALIASES.get(facts_abi or "", facts_abi)
    if facts_abi is not None and want != _ABI_ALIASES.get(bundle.abi, bundle.abi):
        hint = "omni-edge bundle --target linux-aarch64 (android-arm64 for a phone)" if want == "aarch64" else "a build for it"
        raise DeviceError(f"{device.serial} is {facts_abi} but the runtime is {bundle.abi}: pass --runtime DIR with {hint}")


def deploy(device: Device, artifact: Path, *, plan_name: str = "plan.json", name: str | None = None,
           runtime: RuntimeBundle | None = None) -> Deployment:
    """Push runtime, artifacts and a relocated plan; returns where everything is on the device."""
    plan_path = _plan_file(artifact, plan_name)
    plan_text, components = relocate_plan(plan_path)
    bundle = runtime or host_runtime(_uses_npu(json.loads(plan_text)))
    check_abi(device, bundle)

    root = str(PurePosixPath(device.workdir) / (name or plan_path.parent.name or "deploy"))
    report = PushReport()
    report.merge(device.push(bundle.binary, f"{root}/bin/omni-edge-run"))
    with tempfile.TemporaryDirectory(prefix="omni-edge-deploy-") as tmp:
        staged = Path(tmp)
        (staged / "lib").mkdir()
        for remote_name, local in bundle.libraries.items():  # absolute: a relative --runtime would dangle here
            (staged / "lib" / remote_name).symlink_to(local.resolve())
        if bundle.libraries:
            report.merge(device.push(staged / "lib", f"{root}/lib"))
        for remote, component in components.items():
            report.merge(device.push(component, f"{root}/{remote}"))
        write_text_atomic(staged / "plan.json", plan_text)
        report.merge(device.push(staged / "plan.json", f"{root}/plan.json"))
    env = {k: f"{root}/{v}" for k, v in bundle.env.items()}
    env["LD_LIBRARY_PATH"] = f"{root}/lib"
    return Deployment(device, root, f"{root}/plan.json", [f"{root}/{r}" for r in components], report, env)


def _remote_names(components: list[Path]) -> dict[Path, str]:
    """One remote directory per distinct component; two different components with the same
    directory name (from different exports) get numbered names instead of overwriting each other."""
    names: dict[Path, str] = {}
    for c in components:
        if c in names:
            continue
        name, n = c.name, 2
        while name in names.values():
            name, n = f"{c.name}-{n}", n + 1
        names[c] = name
    return names


def verify_on_target(deployment: Deployment, timeout: float = 600.0) -> list[dict[str, Any]]:
    """The target's omni-edge-run re-hashes every artifact; raises unless all verify and qualify."""
    results = []
    for remote in deployment.artifacts:
        run = deployment.device.shell([deployment.binary, "verify", remote], timeout=timeout, env=deployment.env)
        if run.returncode != 0:
            raise DeviceError(f"{deployment.device.serial}: {remote} failed verification on the target: "
                              f"{run.stderr.strip() or run.stdout.strip() or 'exit ' + str(run.returncode)}")
        try:
            results.append(json.loads(run.stdout.strip().splitlines()[-1]))
        except (ValueError, IndexError) as exc:
            raise DeviceError(f"{remote}: the target's verify printed no manifest ({exc})") from exc
    return results
