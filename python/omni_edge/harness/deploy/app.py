"""The Android demo app (android_app/) on a phone: its artifacts pushed where it reads them, and
its APK installed, both over ADB.

The app lists the plans in its external files directory,
/sdcard/Android/data/<package>/files/<name>/plan.json: adb's shell user may write there on every
Android version the app supports (10+), the app reads it without a storage permission. Unlike
`omni-edge push`, no binary or runtime library is pushed (the APK carries them); the artifacts
are re-hashed on the phone with sha256sum against their manifests.
"""

from __future__ import annotations

import json
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

from omni_edge.contracts.manifest import sha256_file
from omni_edge.files import write_text_atomic
from omni_edge.harness.deploy.deploy import relocate_plan
from omni_edge.harness.devices.base import Device, DeviceError, PushReport

PACKAGE = "dev.omniedge.app"


def files_dir(package: str = PACKAGE) -> str:
    """The app's external files directory (Context.getExternalFilesDir(null))."""
    return f"/sdcard/Android/data/{package}/files"


def push_to_app(device: Device, plan_path: Path, *, name: str | None = None, package: str = PACKAGE,
                root: str | None = None) -> dict[str, Any]:
    """Push a plan and the artifacts it names to the app's directory (hash-skipped), then
    re-hash them there; raises DeviceError on any difference."""
    if not plan_path.is_file():
        raise DeviceError(f"{plan_path}: no plan here (export one with `omni-edge export llm`)")
    plan_text, components = relocate_plan(plan_path)
    target = str(PurePosixPath(root or files_dir(package)) / (name or plan_path.parent.name or "plan"))
    report = PushReport()
    for remote, component in components.items():
        report.merge(device.push(component, f"{target}/{remote}"))
    with tempfile.TemporaryDirectory(prefix="omni-edge-app-") as tmp:
        staged = Path(tmp) / "plan.json"
        write_text_atomic(staged, plan_text)
        report.merge(device.push(staged, f"{target}/plan.json"))
    for remote, component in components.items():
        _verify_remote(device, component, f"{target}/{remote}")
    return {"device": device.serial, "app": package, "plan": f"{target}/plan.json",
            "artifacts": [f"{target}/{r}" for r in components], **report.counts(), "verified": True}


def _verify_remote(device: Device, component: Path, remote: str) -> None:
    manifest = json.loads((component / "manifest.json").read_text())
    have = device.remote_hashes(remote)
    for rel, digest in manifest["files"].items():
        if have.get(rel) != digest:
            state = "missing" if rel not in have else "different"
            raise DeviceError(f"{device.serial}: {remote}/{rel} is {state} on the device after the push")


def check_apk(apk: Path) -> str:
    """Refuses what is not an arm64 build of the app before anything is sent; returns its SHA-256."""
    try:
        with zipfile.ZipFile(apk) as z:
            names = set(z.namelist())
    except (OSError, zipfile.BadZipFile) as exc:
        raise DeviceError(f"{apk}: not an APK ({exc})") from exc
    for needed in ("AndroidManifest.xml", "classes.dex", "lib/arm64-v8a/libomniedge_jni.so"):
        if needed not in names:
            raise DeviceError(f"{apk}: not an arm64 build of the omni-edge app (no {needed}); build it with "
                              "scripts/build_apk.sh")
    return sha256_file(apk)  # streamed: an APK is tens of MB


def install_apk(device: Device, apk: Path) -> dict[str, Any]:
    """`adb install -r -t` as the adb client does it: push to /data/local/tmp, `pm install`, remove."""
    digest = check_apk(apk)
    remote = f"/data/local/tmp/omni-edge-{digest[:12]}.apk"
    device.put_file(apk, remote)
    try:
        done = device.shell(["pm", "install", "-r", "-t", remote], timeout=300.0)
    finally:
        device.shell(["rm", "-f", remote], timeout=60.0)
    output = (done.stdout + done.stderr).strip()
    if "Success" not in output:
        raise DeviceError(f"{device.serial}: pm install failed: {output or 'exit ' + str(done.returncode)}")
    return {"device": device.serial, "installed": str(apk), "sha256": digest}
