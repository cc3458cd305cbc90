"""The Android app's host-side tooling: artifacts pushed where the app reads them, the APK
installed through `pm install` over the ADB protocol, and the APK build's message on a machine
without the Android SDK. (The app's Java layer and JNI bridge are tested by JUnit:
android_app/host-test.sh, from scripts/test.sh.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from adb_server import FakeAdbServer
from llm_reference import cli
from paths import ROOT

PHONE = {"ro.product.cpu.abi": "arm64-v8a", "ro.soc.model": "SM8750"}


def test_push_app_lays_out_the_plan_where_the_app_reads_it(tiny_artifact: Path, tmp_path: Path) -> None:
    files = tmp_path / "sdcard-Android-data-dev.omniedge.app-files"  # the phone's directory, on this host
    with FakeAdbServer({"s25": PHONE}) as server:
        common = ["--device", "s25", "--adb-port", str(server.port), "--workdir", str(files), "--app"]
        done = cli("push", *common, "--artifact", str(tiny_artifact), "--plan-name", "plan.onnx.json", "--name", "tiny")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["plan"] == f"{files}/tiny/plan.json" and report["verified"] and report["files_sent"] > 0
        plan = json.loads((files / "tiny" / "plan.json").read_text())
        assert [s["artifact"] for s in plan["stages"]] == ["artifacts/thinker-onnx"]
        manifest = json.loads((tiny_artifact / "thinker-onnx" / "manifest.json").read_text())
        pushed = files / "tiny/artifacts/thinker-onnx"
        assert sorted(p.relative_to(pushed).as_posix() for p in pushed.rglob("*") if p.is_file()) == sorted(
            {*manifest["files"], "manifest.json"})
        assert not (files / "tiny" / "bin").exists()  # the APK carries the runtime
        again = json.loads(cli("push", *common, "--artifact", str(tiny_artifact), "--plan-name", "plan.onnx.json",
                               "--name", "tiny").stdout)
        assert again["files_sent"] == 0 and again["files_skipped"] == report["files_sent"]
        # What the phone holds is re-hashed there: a file that differs after the push is named.
        shutil.rmtree(files / "tiny" / "artifacts" / "thinker-onnx")
        (files / "tiny" / "artifacts" / "thinker-onnx").symlink_to(tmp_path, target_is_directory=True)
        broken = cli("push", *common, "--artifact", str(tiny_artifact), "--plan-name", "plan.onnx.json", "--name", "tiny")
        assert broken.returncode == 1 and "on the device after the push" in broken.stderr
    refused = cli("push", "--device", "host", "--app", "--artifact", str(tiny_artifact))
    assert refused.returncode == 1 and "needs a phone" in refused.stderr
    usage = cli("push", "--device", "host", "--app")
    assert usage.returncode == 2 and "--install APK" in usage.stderr


@pytest.fixture(scope="module")
def apk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The app's real manifest and resources as aapt2 links them, with stand-ins for the dex and the
    arm64 library (d8 and the NDK, which make those, are not on this machine)."""
    out = tmp_path_factory.mktemp("apk")
    done = subprocess.run([str(ROOT / "android_app" / "link-resources.sh"), str(out / "aapt2")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    path = out / "app-debug.apk"
    shutil.copy(out / "aapt2" / "app.ap_", path)
    with zipfile.ZipFile(path, "a") as z:
        z.writestr("classes.dex", b"dex\n035\x00")
        z.writestr("lib/arm64-v8a/libomniedge_jni.so", b"\x7fELF")
    return path


def test_install_goes_through_pm_install(apk: Path, tmp_path: Path) -> None:
    with FakeAdbServer({"s25": PHONE}) as server:
        common = ["--device", "s25", "--adb-port", str(server.port), "--app"]
        done = cli("push", *common, "--install", str(apk))
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["installed"] == str(apk)
        installed = server.installed("s25")
        assert list(installed) == ["dev.omniedge.app"] and installed["dev.omniedge.app"].read_bytes() == apk.read_bytes()
        assert not list(Path("/data/local/tmp").glob("omni-edge-*.apk"))  # removed after the install
        # What pm cannot parse is its failure, named; what is not the app is refused before sending.
        not_apk = tmp_path / "x.apk"
        with zipfile.ZipFile(not_apk, "w") as z:
            for name in ("AndroidManifest.xml", "classes.dex", "lib/arm64-v8a/libomniedge_jni.so"):
                z.writestr(name, b"garbage")
        failed = cli("push", *common, "--install", str(not_apk))
        assert failed.returncode == 1 and "INSTALL_PARSE_FAILED_NOT_APK" in failed.stderr
        no_lib = tmp_path / "nolib.apk"
        with zipfile.ZipFile(apk) as src, zipfile.ZipFile(no_lib, "w") as dst:
            for item in src.infolist():
                if not item.filename.startswith("lib/"):
                    dst.writestr(item, src.read(item))
        refused = cli("push", *common, "--install", str(no_lib))
        assert refused.returncode == 1 and "lib/arm64-v8a/libomniedge_jni.so" in refused.stderr
        assert list(server.installed("s25")) == ["dev.omniedge.app"]


def test_build_apk_without_the_sdk_says_what_is_missing_in_one_line() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("ANDROID_HOME", "ANDROID_NDK", "ANDROID_SDK_ROOT")}
    done = subprocess.run([str(ROOT / "scripts" / "build_apk.sh")], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "ANDROID_HOME" in done.stderr
    sdk = {**env, "ANDROID_HOME": "/"}  # an SDK without platforms/ is no SDK
    assert "ANDROID_HOME" in subprocess.run([str(ROOT / "scripts" / "build_apk.sh")], capture_output=True, text=True,
                                            env=sdk, timeout=60).stderr
