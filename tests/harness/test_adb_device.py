"""AdbDevice through the real adbutils client, against an ADB server on loopback (tests/adb_server.py)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import adbutils
import pytest
from adb_server import FakeAdbServer
from omni_edge.harness.devices.adb import AdbDevice, _thermal, list_devices
from omni_edge.harness.devices.base import DeviceError, parse_meminfo_kb
from omni_edge.socs import SOCS

PHONE = {
    "ro.soc.model": "SM8750",
    "ro.board.platform": "sun",
    "ro.build.fingerprint": "OnePlus/CPH2653/OP5D0DL1:15/AP3A.240617.008/V.1a2b3c:user/release-keys",
    "ro.build.version.release": "15",
    "ro.product.cpu.abi": "arm64-v8a",
    "battery.level": "87",
    "battery.temperature": "301",
    "battery.status": "2",
}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeAdbServer]:
    with FakeAdbServer({"emu-1": PHONE, "bare-2": {}, "locked-3": {}}, states={"locked-3": "unauthorized"}) as s:
        yield s


@pytest.fixture
def dev(server: FakeAdbServer, tmp_path: Path) -> AdbDevice:
    return AdbDevice("emu-1", port=server.port, workdir=str(tmp_path / "device"))


def adb_processes() -> set[int]:
    pids = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == "adb":
                pids.add(int(entry.name))
        except OSError:
            continue
    return pids


def running(cmdline: bytes) -> bool:
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes() == cmdline:
                return True
        except OSError:
            continue
    return False


def test_list_devices_reports_ready_serials(server: FakeAdbServer) -> None:
    assert list_devices("127.0.0.1", server.port) == ["emu-1", "bare-2"]  # locked-3 is unauthorized


def test_shell_separates_stdout_stderr_and_exit_code(dev: AdbDevice) -> None:
    done = dev.shell(["sh", "-c", "echo out; echo err >&2; echo more; exit 3"])
    assert (done.returncode, done.stdout, done.stderr, done.timed_out) == (3, "out\nmore\n", "err\n", False)
    assert dev.shell(["printf", "%s|", "a b", "it's", "$HOME", ";ls"]).stdout == "a b|it's|$HOME|;ls|"
    assert dev.shell(["printf", "no newline"]).stdout == "no newline"
    assert dev.shell(["sh", "-c", 'echo "$GREETING"'], env={"GREETING": "hi there"}).stdout == "hi there\n"
    missing = dev.shell(["no-such-command-xyz"])
    assert missing.returncode == 127 and "no-such-command-xyz" in missing.stderr and missing.stdout == ""


def test_shell_timeout_stops_the_command(dev: AdbDevice) -> None:
    start = time.perf_counter()
    done = dev.shell(["sleep", "7.31"], timeout=0.5)
    assert done.timed_out and done.returncode is None
    assert time.perf_counter() - start < 5
    deadline = time.time() + 5
    while running(b"sleep\x007.31\x00") and time.time() < deadline:
        time.sleep(0.05)
    assert not running(b"sleep\x007.31\x00")

    lines: list[str] = []
    streamed = dev.stream(["sh", "-c", "echo first; exec sleep 7.32"], lines.append, timeout=0.7)
    assert streamed.timed_out and streamed.returncode is None and lines == ["first"] and streamed.stdout == "first"
    deadline = time.time() + 5
    while running(b"sleep\x007.32\x00") and time.time() < deadline:
        time.sleep(0.05)
    assert not running(b"sleep\x007.32\x00")


def test_stream_delivers_lines_in_order_as_they_arrive(dev: AdbDevice) -> None:
    seen: list[tuple[str, float]] = []
    pids: list[int] = []
    done = dev.stream(["sh", "-c", "echo one; echo; echo two; echo oops >&2; sleep 0.6; printf three"],
                      lambda line: seen.append((line, time.perf_counter())), on_start=pids.append)
    assert [line for line, _ in seen] == ["one", "", "two", "three"]
    assert seen[-1][1] - seen[0][1] > 0.4  # "one" came before the sleep, not at the end
    assert (done.returncode, done.stdout, done.stderr) == (0, "one\n\ntwo\nthree", "oops\n")
    assert len(pids) == 1 and pids[0] > 1


def test_stream_pid_memory_and_kill(dev: AdbDevice) -> None:
    started = threading.Event()
    pids: list[int] = []
    result = []

    def on_start(pid: int) -> None:
        pids.append(pid)
        started.set()

    worker = threading.Thread(target=lambda: result.append(dev.stream(["sleep", "30"], lambda _: None, on_start=on_start)))
    worker.start()
    assert started.wait(10)
    pid = pids[0]
    deadline = time.time() + 5
    while (Path(f"/proc/{pid}/comm").read_text().strip() if Path(f"/proc/{pid}/comm").exists() else "") != "sleep":
        assert time.time() < deadline, "the pid on_start gave is not the command's"
        time.sleep(0.02)
    sample = dev.memory(pid)
    assert sample is not None and sample.rss_kb > 0 and sample.pss_kb is not None
    dev.kill(pid)
    worker.join(10)
    assert not worker.is_alive()
    assert result[0].returncode == 128 + 15 and not result[0].timed_out  # SIGTERM
    assert dev.memory(pid) is None
    dev.kill(pid)  # already gone: no error


def test_push_pull_hash_skip_and_modes(dev: AdbDevice, tmp_path: Path) -> None:
    src = tmp_path / "layout"
    (src / "sub" / "deep").mkdir(parents=True)
    (src / "bin").mkdir()
    (src / "a.txt").write_text("alpha\n")
    blob = os.urandom(3 * 1024 * 1024 + 17)
    (src / "sub" / "deep" / "weights.bin").write_bytes(blob)
    script = src / "bin" / "run.sh"
    script.write_text('#!/bin/sh\necho "ran with $1"\n')
    script.chmod(0o755)
    remote = f"{dev.workdir}/layout"

    first = dev.push(src, remote)
    assert sorted(first.sent) == sorted(f"{remote}/{p}" for p in ("a.txt", "bin/run.sh", "sub/deep/weights.bin"))
    assert first.skipped == [] and first.bytes_sent == 6 + len(blob) + len(script.read_bytes())

    back = tmp_path / "back"
    for rel in ("a.txt", "bin/run.sh", "sub/deep/weights.bin"):
        dev.pull(f"{remote}/{rel}", back / rel)
        assert (back / rel).read_bytes() == (src / rel).read_bytes()

    ran = dev.shell([f"{remote}/bin/run.sh", "x y"])
    assert (ran.returncode, ran.stdout) == (0, "ran with x y\n")
    assert dev.shell(["test", "-x", f"{remote}/a.txt"]).returncode == 1
    assert dev.shell(["stat", "-c", "%a", f"{remote}/a.txt"]).stdout.strip() == "644"

    again = dev.push(src, remote)
    assert again.sent == [] and again.bytes_sent == 0 and len(again.skipped) == 3

    (src / "a.txt").write_text("alpha, changed\n")
    changed = dev.push(src, remote)
    assert changed.sent == [f"{remote}/a.txt"] and len(changed.skipped) == 2
    assert dev.shell(["cat", f"{remote}/a.txt"]).stdout == "alpha, changed\n"

    # A directory is mirrored: what the tree no longer has (a re-export's other buckets) goes.
    (src / "sub" / "deep" / "weights.bin").unlink()
    (src / "b.txt").write_text("beta\n")
    mirrored = dev.push(src, remote)
    assert mirrored.removed == [f"{remote}/sub/deep/weights.bin"] and mirrored.sent == [f"{remote}/b.txt"]
    assert sorted(dev.remote_hashes(remote)) == ["a.txt", "b.txt", "bin/run.sh"]

    single = dev.push(src / "a.txt", f"{dev.workdir}/single/renamed.txt")
    assert single.sent == [f"{dev.workdir}/single/renamed.txt"]
    assert dev.push(src / "a.txt", f"{dev.workdir}/single/renamed.txt").skipped == [f"{dev.workdir}/single/renamed.txt"]


def test_pull_of_a_missing_file_fails_cleanly(dev: AdbDevice, tmp_path: Path) -> None:
    with pytest.raises(DeviceError, match="pull"):
        dev.pull(f"{dev.workdir}/nope.bin", tmp_path / "out" / "nope.bin")
    assert not (tmp_path / "out" / "nope.bin").exists()
    assert dev.remote_hashes(f"{dev.workdir}/no-such-dir") == {}


def test_facts_report_the_props_and_never_invent(server: FakeAdbServer, dev: AdbDevice, tmp_path: Path) -> None:
    runner = Path(dev.workdir) / "bin" / "omni-edge-run"
    runner.parent.mkdir(parents=True)
    runner.write_text("#!/bin/sh\necho 'omni-edge-run 0.1.0'\n")
    runner.chmod(0o755)
    facts = dev.facts()
    assert (facts.serial, facts.kind, facts.soc, facts.htp_arch) == ("emu-1", "adb", "sm8750", f"v{SOCS['sm8750'].htp_arch}")
    assert (facts.os, facts.build, facts.abi) == ("Android 15", PHONE["ro.build.fingerprint"], "arm64-v8a")
    total_kb = parse_meminfo_kb(Path("/proc/meminfo").read_text(), "MemTotal")  # the "phone" is this host
    assert total_kb is not None and facts.ram_bytes == total_kb * 1024
    assert facts.battery == {"level": "87", "temperature": "301", "status": "2"}
    assert facts.runtimes == {"omni-edge-run": "omni-edge-run 0.1.0"}
    # Thermal zones are whatever this host has (often none in a VM): check the parser directly.
    assert _thermal("thermal_zone0\tcpu-0\t45000\nthermal_zone1\tcpu-0\t47500\nthermal_zone2\tbattery\tn/a\n"
                    "garbage\nthermal_zone3\t\t30000\n") == {"cpu-0": 45.0, "cpu-0 (thermal_zone1)": 47.5,
                                                              "thermal_zone3": 30.0}

    bare = AdbDevice("bare-2", port=server.port, workdir=str(tmp_path / "bare")).facts()
    assert (bare.soc, bare.htp_arch, bare.os, bare.build, bare.abi, bare.battery, bare.runtimes) == (None, None, None, None, None, {}, {})


def test_unknown_or_unauthorized_serial(server: FakeAdbServer) -> None:
    with pytest.raises(DeviceError, match=r"device 'nope' not found; adb devices lists: emu-1 \(device\)"):
        AdbDevice("nope", port=server.port)
    with pytest.raises(DeviceError, match="locked-3' is unauthorized"):
        AdbDevice("locked-3", port=server.port)


def test_no_server_is_an_error_and_starts_nothing() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    before = adb_processes()
    with pytest.raises(DeviceError, match=f"no adb server at 127.0.0.1:{port}"):
        AdbDevice("emu-1", port=port)
    with pytest.raises(DeviceError, match="no adb server"):
        list_devices("127.0.0.1", port)
    assert adb_processes() <= before  # adbutils alone would have run `adb start-server`


def test_the_real_adb_client_speaks_to_the_test_server(server: FakeAdbServer, tmp_path: Path) -> None:
    """The double is only worth trusting if Google's own client accepts it too."""
    bundled = Path(adbutils.__file__).parent / "binaries" / "adb"
    adb = shutil.which("adb") or (str(bundled) if bundled.exists() else None)
    if adb is None:
        pytest.skip("no adb binary")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([adb, "-P", str(server.port), *args], capture_output=True, text=True, timeout=30,
                              env={**os.environ, "HOME": str(tmp_path)})

    assert "emu-1\tdevice" in run("devices").stdout
    assert run("-s", "emu-1", "shell", "getprop ro.soc.model").stdout == "SM8750\n"
    blob = tmp_path / "blob.bin"
    blob.write_bytes(os.urandom(300_000))
    assert run("-s", "emu-1", "push", str(blob), str(tmp_path / "remote" / "blob.bin")).returncode == 0
    assert run("-s", "emu-1", "pull", str(tmp_path / "remote" / "blob.bin"), str(tmp_path / "back.bin")).returncode == 0
    assert (tmp_path / "back.bin").read_bytes() == blob.read_bytes()
    assert "not found" in run("-s", "nope", "shell", "true").stderr


@pytest.mark.parametrize("reply, why", [(b"OKAYzzzz", "answered something that is not ADB"),
                                        (None, "read timeout")])
def test_a_broken_adb_server_is_named_quickly(monkeypatch: pytest.MonkeyPatch, reply: bytes | None, why: str) -> None:
    """A server that answers garbage once gave a traceback; one that never answers stalled
    `devices` for a minute with neither host nor port in the message."""
    from omni_edge.harness.devices import adb

    monkeypatch.setattr(adb, "HANDSHAKE_TIMEOUT", 0.5)
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def answer() -> None:
        conn, _ = listener.accept()
        accepted.append(conn)
        conn.recv(1024)
        if reply is not None:
            conn.sendall(reply)

    threading.Thread(target=answer, daemon=True).start()
    port = listener.getsockname()[1]
    start = time.monotonic()
    try:
        with pytest.raises(DeviceError, match=why) as caught:
            list_devices(port=port)
    finally:
        listener.close()
        for conn in accepted:
            conn.close()
    assert f"127.0.0.1:{port}" in str(caught.value) and time.monotonic() - start < 10
