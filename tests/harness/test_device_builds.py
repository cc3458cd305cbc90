"""Device bundles (issue 17): the controller cross-built for linux-aarch64, windows-arm64 and
windows-x64 from this host, run where this host can run them.

- linux-aarch64 runs under qemu-user: its C++ unit tests, and real plans (ONNX Runtime and
  ExecuTorch) through `omni-edge run --device qemu-aarch64` and an aarch64 phone behind the ADB
  test server; its greedy ids must be the host's (a split is allowed only at a reference near tie).
- windows-x64 runs under wine64 with the official win_amd64 ONNX Runtime DLL: the Windows
  platform layer (wide-char paths, file mapping, LoadLibraryExW) for real, on a non-ASCII path,
  and its server (Asio on Winsock) answering the `openai` client.
- windows-arm64 cannot run here: its headers are checked (PE32+, ARM64, the DLLs beside it, the
  server's Winsock imports).
- android-arm64 needs an NDK, which this machine has none of: it must say so and stop.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import warnings
import wave
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from adb_server import FakeAdbServer
from llm_reference import CLI, cli, greedy_reference, run_greedy_ids
from numeric import NearTie, assert_greedy, assert_sqnr
from omni_edge.export.comparison import FP32_TIE_GAP
from omni_edge.harness.deploy.binaries import read_pe
from omni_edge.harness.deploy.bundle import BundleError, build_bundle, source_root, verify_bundle

pytestmark = pytest.mark.device_builds
WINE = shutil.which("wine64") or ("/usr/lib/wine/wine64" if Path("/usr/lib/wine/wine64").exists() else None)


@pytest.fixture(scope="session")
def bundles(tiny_artifact: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each target built once per session (incremental: scripts/test.sh's earlier builds are reused);
    the windows-x64 bundle carries the tiny plan and its artifacts."""
    root = tmp_path_factory.mktemp("bundles")
    built = {}
    for target in ("linux-aarch64", "windows-x64", "windows-arm64"):
        plan = tiny_artifact / "plan.onnx.json" if target == "windows-x64" else None
        build_bundle(target, root / target, tests=target == "linux-aarch64", plan=plan)
        built[target] = root / target
    return built


@pytest.fixture(scope="session")
def never_seen(random_artifact: tuple[Path, Path]) -> tuple[Path, Path, list[int]]:
    """A Qwen3 checkpoint the project never made, exported for ONNX Runtime and ExecuTorch (the
    session's, which the host's 400-token test also reads)."""
    from tokenizers import Tokenizer

    checkpoint, artifact = random_artifact
    tok = Tokenizer.from_file(str(checkpoint / "tokenizer.json"))
    prompt = tok.encode(" ".join(f"line {i}: the value of x is {i * i}" for i in range(12))).ids[:60]
    return checkpoint, artifact, prompt


def assert_same_greedy(host: list[int], other: list[int], model: Path, prompt: list[int], what: str) -> None:
    """Two builds' greedy ids are equal; a split is accepted only where the reference's top-2 gap is a
    near tie (other kernels may round such a tie the other way), and it is reported."""
    assert len(other) == len(host), f"{what}: {len(other)} ids, the host made {len(host)}"
    split = next((i for i, (a, b) in enumerate(zip(host, other, strict=True)) if a != b), None)
    if split is None:
        return
    gap = greedy_reference(model, prompt, split + 1).gaps[split]
    assert gap < FP32_TIE_GAP, f"{what}: parted from the host at position {split} where the reference's top-2 gap is {gap:.3g}"
    warnings.warn(f"{what}: parted from the host at position {split} (reference top-2 gap {gap:.3g})", NearTie, stacklevel=2)


def test_aarch64_unit_tests_pass_under_qemu(bundles: dict[str, Path]) -> None:
    build = source_root() / "build/targets/linux-aarch64/omni-edge"
    done = subprocess.run(["ctest", "--test-dir", str(build), "-j2", "--output-on-failure"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:]
    summary = next(line for line in done.stdout.splitlines() if "tests passed" in line)
    assert summary.startswith("100% tests passed") and int(summary.split()[-1]) >= 98


@pytest.mark.parametrize("plan", ["plan.onnx.json", "plan.pte.json"])
def test_aarch64_greedy_ids_under_qemu_match_the_host(bundles: dict[str, Path], never_seen: tuple[Path, Path, list[int]],
                                                       plan: str) -> None:
    checkpoint, artifact, prompt = never_seen
    host, _ = run_greedy_ids(artifact / plan, prompt, 96)
    arm, done = run_greedy_ids(artifact / plan, prompt, 96, "--device", "qemu-aarch64",
                               "--runtime", str(bundles["linux-aarch64"]))
    assert done["kind"] == "done" and done["n_generated_tokens"] == 96
    assert_greedy(arm, checkpoint, prompt, f"aarch64 {plan}")
    assert_same_greedy(host, arm, checkpoint, prompt, f"aarch64 {plan}")


def test_deployment_refuses_a_runtime_for_another_abi(bundles: dict[str, Path], tiny_artifact: Path, tmp_path: Path) -> None:
    plan = str(tiny_artifact / "plan.onnx.json")
    base = ["run", "--plan", plan, "--prompt", "hi", "--max-new-tokens", "2"]
    wrong = cli(*base, "--device", "host", "--workdir", str(tmp_path / "host"), "--runtime", str(bundles["linux-aarch64"]))
    assert wrong.returncode == 1 and "host is x86_64 but the runtime is aarch64" in wrong.stderr
    assert not (tmp_path / "host").exists()  # refused before anything was pushed
    missing = cli(*base, "--device", "qemu-aarch64", "--workdir", str(tmp_path / "qemu"))
    assert missing.returncode == 1 and "omni-edge bundle --target linux-aarch64" in missing.stderr
    windows = cli(*base, "--device", "qemu-aarch64", "--workdir", str(tmp_path / "qemu"), "--runtime", str(bundles["windows-arm64"]))
    assert windows.returncode == 1 and "runs on Windows" in windows.stderr


def test_an_aarch64_phone_behind_adb_pushes_runs_and_profiles_the_bundle(bundles: dict[str, Path], tiny_artifact: Path,
                                                                           tmp_path: Path) -> None:
    phone = {"ro.soc.model": "SM8750", "ro.product.cpu.abi": "arm64-v8a", "ro.build.version.release": "15"}
    plan = tiny_artifact / "plan.onnx.json"
    host, _ = run_greedy_ids(plan, [1, 2, 3, 4], 16)
    with FakeAdbServer({"arm-1": phone}, qemu=frozenset({"arm-1"})) as server:
        common = ["--device", "arm-1", "--adb-port", str(server.port), "--workdir", str(tmp_path / "data-local-tmp"),
                  "--runtime", str(bundles["linux-aarch64"])]
        pushed = cli("push", *common, "--artifact", str(tiny_artifact), "--plan-name", "plan.onnx.json")
        assert pushed.returncode == 0, pushed.stderr[-2000:]
        assert json.loads(pushed.stdout)["verified"][0]["qualified"] is True  # the aarch64 binary re-hashed it there
        arm, _ = run_greedy_ids(plan, [1, 2, 3, 4], 16, *common)
        assert arm == host
        out = tmp_path / "profile"
        done = cli("profile", *common, "--plan", str(plan), "--runs", "3", "--warmup", "1", "--threads", "1", "--out", str(out))
        assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["device"]["abi"] == "arm64-v8a" and report["deployment"]["device"] == "arm-1"


@pytest.fixture(scope="session")
def wine_prefix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One Wine prefix for the session's Windows runs (made at the first, ~10 s)."""
    assert WINE is not None, "wine64 is not installed (scripts/install_cross_toolchains.sh installs it)"
    return tmp_path_factory.mktemp("wine") / "prefix"


def _wine_env(prefix: Path) -> dict[str, str]:
    return {**os.environ, "WINEPREFIX": str(prefix), "WINEDEBUG": "-all"}


def _wine(bundle: Path, args: list[str], prefix: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(WINE), str(bundle / "bin" / "omni-edge-run.exe"), *args], capture_output=True, text=True,
                          env=_wine_env(prefix), timeout=600, cwd=prefix.parent)


def _native_chat(plan: Path, prompt: str, n: int) -> str:
    """The host's native greedy reply to a one-turn chat."""
    native = subprocess.run([str(CLI.parent / "omni-edge-run"), "--plan", str(plan), "--chat", "--prompt", prompt,
                             "--max-new-tokens", str(n), "--temperature", "0", "--json"], capture_output=True, text=True,
                            timeout=300)
    assert native.returncode == 0, native.stderr[-2000:]
    return "".join(e.get("text", "") for e in map(json.loads, native.stdout.splitlines()) if e["kind"] == "token")


def test_windows_x64_runs_its_bundled_plan_under_wine_from_a_non_ascii_path(bundles: dict[str, Path], tiny_artifact: Path,
                                                                            tmp_path: Path, wine_prefix: Path) -> None:
    bundle = tmp_path / "модель-ü 1"  # the binary finds onnxruntime.dll beside itself, by a UTF-8 path
    shutil.copytree(bundles["windows-x64"], bundle)
    assert verify_bundle(bundle)["files"] > 3 and (bundle / "artifacts" / "thinker-onnx" / "manifest.json").is_file()
    host, _ = run_greedy_ids(tiny_artifact / "plan.onnx.json", [1, 2, 3, 4], 24)
    done = _wine(bundle, ["--plan", str(bundle / "plan.json"), "--prompt-ids", "1,2,3,4",
                          "--max-new-tokens", "24", "--ignore-stop-tokens", "--json"], wine_prefix)
    assert done.returncode == 0, done.stderr[-2000:]
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [t for e in events if e["kind"] == "token" for t in e["token_ids"]] == host
    assert events[-1]["kind"] == "done"
    verified = _wine(bundle, ["verify", str(bundle / "artifacts" / "thinker-onnx")], wine_prefix)
    assert verified.returncode == 0 and json.loads(verified.stdout.splitlines()[-1])["qualified"] is True
    missing = _wine(bundle, ["--plan", str(bundle / "nope.json"), "--prompt", "hi"], wine_prefix)
    assert missing.returncode != 0 and "nope.json" in missing.stderr and "cannot open plan" in missing.stderr


def test_windows_arm64_bundle_is_a_pe32plus_arm64_executable_with_its_dlls(bundles: dict[str, Path]) -> None:
    bundle = bundles["windows-arm64"]
    exe = read_pe(bundle / "bin" / "omni-edge-run.exe")
    assert exe is not None and exe.machine == "arm64" and exe.pe32_plus and exe.executable
    assert "KERNEL32.dll" in exe.imports and "WS2_32.dll" in exe.imports  # the server: Asio on Winsock
    # ONNX Runtime is loaded at run time from beside the executable, as on Linux.
    assert b"$ORIGIN/onnxruntime.dll" in (bundle / "bin" / "omni-edge-run.exe").read_bytes()
    for dll in ("onnxruntime.dll", "onnxruntime_providers_qnn.dll", "QnnHtp.dll", "QnnSystem.dll", "QnnHtpV73Stub.dll"):
        image = read_pe(bundle / "bin" / dll)
        assert image is not None and image.machine == "arm64" and image.pe32_plus and not image.executable, dll
    report = verify_bundle(bundle)
    assert report["abi"] == "windows-arm64" and "MSVCP140.dll" in report["from_system"]
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert manifest["triple"] == "aarch64-windows-gnu" and manifest["qnn_sdk"] and manifest["onnxruntime"]


def test_bundle_verification_refuses_changes(bundles: dict[str, Path], tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    shutil.copytree(bundles["windows-x64"], bundle)
    assert cli("verify", str(bundle)).returncode == 0
    dll = bundle / "bin" / "onnxruntime.dll"
    data = bytearray(dll.read_bytes())
    data[len(data) // 2] ^= 1
    dll.write_bytes(bytes(data))
    with pytest.raises(BundleError, match=r"onnxruntime\.dll' does not match its SHA-256"):
        verify_bundle(bundle)
    refused = cli("verify", str(bundle))
    assert refused.returncode == 1 and "REFUSED" in refused.stdout
    shutil.rmtree(bundle)
    shutil.copytree(bundles["windows-x64"], bundle)
    (bundle / "bin" / "extra.dll").write_bytes(b"MZ")
    with pytest.raises(BundleError, match=r"files not in bundle\.json: bin/extra\.dll"):
        verify_bundle(bundle)
    (bundle / "bin" / "extra.dll").unlink()
    manifest = json.loads((bundle / "bundle.json").read_text())
    for bad, message in (({"../outside": "0" * 64}, "outside the bundle"), ({"/etc/passwd": "0" * 64}, "outside the bundle"),
                         ({}, "'files' must map")):
        (bundle / "bundle.json").write_text(json.dumps({**manifest, "files": bad}))
        with pytest.raises(BundleError, match=message):
            verify_bundle(bundle)
    (bundle / "bundle.json").write_text("{not json")
    with pytest.raises(BundleError, match="not readable JSON"):
        verify_bundle(bundle)


def test_android_without_an_ndk_says_so_in_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANDROID_NDK")}
    done = subprocess.run([str(CLI), "bundle", "--target", "android-arm64", "--out", str(tmp_path / "android")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and "set ANDROID_NDK" in done.stderr
    assert not (tmp_path / "android").exists()


def _wav(path: Path) -> tuple[int, np.ndarray]:
    with wave.open(str(path), "rb") as w:
        return w.getframerate(), np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64)


def test_speak_on_qemu_pulls_back_the_hosts_wav(bundles: dict[str, Path], tts_artifact: Path, tmp_path: Path) -> None:
    base = ["speak", "--plan", str(tts_artifact), "--text", "hello there", "--max-frames", "12", "--temperature", "0"]
    host = cli(*base, "--out", str(tmp_path / "host.wav"))
    assert host.returncode == 0, host.stderr[-2000:]
    arm = cli(*base, "--out", str(tmp_path / "arm.wav"), "--json", "--device", "qemu-aarch64",
              "--workdir", str(tmp_path / "qemu"), "--runtime", str(bundles["linux-aarch64"]))
    assert arm.returncode == 0, arm.stderr[-2000:]
    assert json.loads(arm.stdout.splitlines()[-1])["kind"] == "done"  # the device's JSON lines, streamed back
    (rate, want), (arm_rate, got) = _wav(tmp_path / "host.wav"), _wav(tmp_path / "arm.wav")
    assert arm_rate == rate and len(got) == len(want) > 0
    assert_sqnr(want, got, 60.0, "aarch64 speech against the host's")


def test_ctrl_c_during_run_on_qemu_cancels_the_device_process(bundles: dict[str, Path], tiny_artifact: Path,
                                                              tmp_path: Path) -> None:
    command = [str(CLI), "run", "--plan", str(tiny_artifact / "plan.onnx.json"), "--prompt", "hi", "--max-new-tokens", "3000",
               "--ignore-stop-tokens", "--json", "--device", "qemu-aarch64", "--workdir", str(tmp_path / "qemu"),
               "--runtime", str(bundles["linux-aarch64"])]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # the device is generating
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=300)
    events = [json.loads(line) for line in (first + out).splitlines()]
    assert proc.returncode == 130 and events[0]["kind"] == "token"
    assert [e["kind"] for e in events if e["kind"] != "token"] == ["cancelled"]  # one terminal event, the device's
    refused = cli("run", "--plan", str(tiny_artifact / "plan.onnx.json"), "--prompt", "hi", "--json", "--device", "host",
                  "--workdir", str(tmp_path / "host"), "--runtime", str(bundles["linux-aarch64"]))
    assert refused.returncode == 1 and json.loads(refused.stdout)["reason"] == "device"


@contextmanager
def _served_on_qemu(plan: Path, runtime: Path, workdir: Path) -> Iterator[dict[str, Any]]:
    """`omni-edge serve --device qemu-aarch64`: its listening line; SIGINT at the end must exit 0."""
    proc = subprocess.Popen([str(CLI), "serve", "--plan", str(plan), "--device", "qemu-aarch64", "--workdir", str(workdir),
                             "--runtime", str(runtime), "--threads", "1"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        listening = json.loads(proc.stdout.readline() or "{}")
        assert listening.get("kind") == "listening", proc.stderr.read() if proc.stderr else ""
        yield listening
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0


def test_the_aarch64_server_speaks_and_acts_under_qemu(bundles: dict[str, Path], tts_artifact: Path, policy_plan: Path,
                                                       scene: dict[str, Any], tmp_path: Path) -> None:
    """The other two protocols on the aarch64 bundle's server: /v1/audio/speech through the `openai`
    client (the host's `speak` samples, to 60 dB: another ISA's kernels), and openpi-client's
    `infer` (the host's `act` chunk, to 1e-4)."""
    import openai
    from openpi_client.websocket_client_policy import WebsocketClientPolicy
    from pi0_unseen import act_reference, observation

    host = cli("speak", "--plan", str(tts_artifact), "--text", "hello there", "--max-frames", "12",  # the plan's sampling
               "--out", str(tmp_path / "host.wav"))
    assert host.returncode == 0, host.stderr[-2000:]
    with _served_on_qemu(tts_artifact, bundles["linux-aarch64"], tmp_path / "qemu") as served:
        api = openai.OpenAI(base_url=served["url"], api_key="none", max_retries=0, timeout=600)
        wav = api.audio.speech.create(model=served["model"], voice="default", input="hello there", response_format="wav",
                                      extra_body={"max_new_tokens": 12}).content
    (tmp_path / "arm.wav").write_bytes(wav)
    (rate, want), (arm_rate, got) = _wav(tmp_path / "host.wav"), _wav(tmp_path / "arm.wav")
    assert arm_rate == rate and len(got) == len(want) > 0
    assert_sqnr(want, got, 60.0, "aarch64 server speech against the host's speak")

    want_actions = act_reference(policy_plan, scene, tmp_path)
    with _served_on_qemu(policy_plan, bundles["linux-aarch64"], tmp_path / "qemu") as served:
        address = served["url"].removeprefix("http://").removesuffix("/v1").split(":")
        policy = WebsocketClientPolicy(host=address[0], port=int(address[1]))
        actions = policy.infer(observation(scene))["actions"]
        policy._ws.close()  # openpi-client has no close of its own
    assert actions.shape == want_actions.shape and np.allclose(actions, want_actions, rtol=1e-4, atol=1e-4)


def test_the_aarch64_server_answers_the_openai_client_through_the_adb_forward(bundles: dict[str, Path],
                                                                               tiny_artifact: Path, tmp_path: Path) -> None:
    """`omni-edge serve --device` on an aarch64 phone behind the ADB test server: the bundle's
    omni-edge-run serves under qemu on the phone's loopback, `adb forward` brings the port here,
    and the official client's greedy reply equals the host's native run of the same chat."""
    import openai

    plan = tiny_artifact / "plan.onnx.json"
    text = _native_chat(plan, "def greet(name):", 8)
    phone = {"ro.product.cpu.abi": "arm64-v8a"}
    with FakeAdbServer({"arm-1": phone}, qemu=frozenset({"arm-1"})) as server:
        proc = subprocess.Popen([str(CLI), "serve", "--plan", str(plan), "--device", "arm-1", "--adb-port", str(server.port),
                                 "--workdir", str(tmp_path / "data-local-tmp"), "--runtime", str(bundles["linux-aarch64"]),
                                 "--api-key", "k"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            listening = json.loads(proc.stdout.readline() or "{}")
            assert listening.get("kind") == "listening", proc.stderr.read() if proc.stderr else ""
            assert listening["device"] == "arm-1" and listening["url"] != listening["device_url"]
            assert any(r.startswith("host-serial:arm-1:forward:tcp:") for r in server.requests)
            client = openai.OpenAI(base_url=listening["url"], api_key="k", max_retries=0, timeout=300)
            reply = client.chat.completions.create(model=listening["model"], max_tokens=8, temperature=0,
                                                   messages=[{"role": "user", "content": "def greet(name):"}])
            assert reply.choices[0].message.content == text
        finally:
            proc.send_signal(signal.SIGINT)  # the remote server gets SIGTERM, ends, and the forward is removed
            assert proc.wait(timeout=120) == 0
        assert server.forwards == {}


def test_the_windows_x64_server_answers_the_openai_client_under_wine(bundles: dict[str, Path], tiny_artifact: Path,
                                                                      wine_prefix: Path) -> None:
    """The Windows bundle's server (Asio on Winsock) under wine64: the official client's greedy
    reply, plain and streamed, equals the host's native run of the same chat."""
    import openai

    text = _native_chat(tiny_artifact / "plan.onnx.json", "def greet(name):", 8)
    bundle = bundles["windows-x64"]
    proc = subprocess.Popen([str(WINE), str(bundle / "bin" / "omni-edge-run.exe"), "serve", "--plan",
                             str(bundle / "plan.json"), "--port", "0", "--threads", "1"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_wine_env(wine_prefix), cwd=wine_prefix.parent)
    try:
        assert proc.stdout is not None
        listening = json.loads(proc.stdout.readline() or "{}")
        assert listening.get("kind") == "listening", proc.stderr.read() if proc.stderr else ""
        client = openai.OpenAI(base_url=listening["url"], api_key="none", max_retries=0, timeout=300)
        messages: Any = [{"role": "user", "content": "def greet(name):"}]
        reply = client.chat.completions.create(model=listening["model"], messages=messages, max_tokens=8, temperature=0)
        assert reply.choices[0].message.content == text
        stream = client.chat.completions.create(model=listening["model"], messages=messages, max_tokens=8, temperature=0,
                                                stream=True)
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == text
    finally:
        proc.kill()  # wine does not pass a POSIX signal on as a console control event
        proc.communicate(timeout=60)
