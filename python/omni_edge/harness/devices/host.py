"""The machine the harness runs on, as a device: same interface, local processes and files."""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from omni_edge.contracts.manifest import sha256_file
from omni_edge.files import atomic_output
from omni_edge.harness.devices.base import (
    Device,
    DeviceFacts,
    LineCallback,
    MemorySample,
    RunResult,
    StartCallback,
    parse_meminfo_kb,
)


def read_memory(pid: int, t: float) -> MemorySample | None:
    """RSS/PSS of a local process from /proc (smaps_rollup has both; status is the fallback)."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        text = ""
    rss = parse_meminfo_kb(text, "Rss")
    pss = parse_meminfo_kb(text, "Pss")
    if rss is None:
        try:
            rss = parse_meminfo_kb(Path(f"/proc/{pid}/status").read_text(), "VmRSS")
        except OSError:
            return None
    return None if rss is None else MemorySample(t=t, rss_kb=rss, pss_kb=pss)


def thermal_zones(root: Path = Path("/sys/class/thermal")) -> dict[str, float]:
    zones: dict[str, float] = {}
    for zone in sorted(root.glob("thermal_zone*")):
        try:
            zones[(zone / "type").read_text().strip() or zone.name] = int((zone / "temp").read_text()) / 1000.0
        except (OSError, ValueError):
            continue
    return zones


class HostDevice(Device):
    """Runs on this machine; `push` copies into a work directory so the layout matches a phone's."""

    kind = "host"

    def __init__(self, workdir: str | Path | None = None) -> None:
        self.serial = "host"
        self._workdir = str(Path(workdir or Path.home() / ".cache" / "omni-edge" / "device").absolute())
        self._lock = threading.Lock()

    @property
    def workdir(self) -> str:
        return self._workdir

    def _env(self, env: dict[str, str] | None) -> dict[str, str]:
        return {**os.environ, **(env or {})}

    def shell(self, argv: list[str], timeout: float = 60.0, env: dict[str, str] | None = None) -> RunResult:
        start = time.perf_counter()
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self._env(env))
        except subprocess.TimeoutExpired as exc:
            return RunResult(None, _text(exc.stdout), _text(exc.stderr), time.perf_counter() - start, timed_out=True)
        except OSError as exc:
            return RunResult(127, "", f"{argv[0]}: {exc.strerror}", time.perf_counter() - start)
        return RunResult(done.returncode, done.stdout, done.stderr, time.perf_counter() - start)

    def stream(self, argv: list[str], on_line: LineCallback, timeout: float = 600.0,
               env: dict[str, str] | None = None, on_start: StartCallback | None = None) -> RunResult:
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=self._env(env), start_new_session=True)
        except OSError as exc:
            return RunResult(127, "", f"{argv[0]}: {exc.strerror}", 0.0)
        if on_start is not None:
            on_start(proc.pid)
        stderr: list[str] = []
        drain = threading.Thread(target=lambda: stderr.append(proc.stderr.read() if proc.stderr else ""), daemon=True)
        drain.start()
        timer = threading.Timer(timeout, lambda: _terminate(proc))
        timer.start()
        lines: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            lines.append(line)
            on_line(line)
        proc.wait()
        timer.cancel()
        drain.join()
        timed_out = proc.returncode is not None and proc.returncode < 0 and time.perf_counter() - start >= timeout
        return RunResult(None if timed_out else proc.returncode, "\n".join(lines), "".join(stderr),
                         time.perf_counter() - start, timed_out=timed_out)

    def remote_hashes(self, remote_dir: str) -> dict[str, str]:
        root = Path(remote_dir)
        if not root.is_dir():
            return {}
        return {p.relative_to(root).as_posix(): sha256_file(p) for p in root.rglob("*") if p.is_file()}

    def remove_files(self, remote_root: str, rels: list[str]) -> list[str]:
        root = Path(remote_root)
        if root.is_symlink():  # hashed through the link, but nothing is deleted outside the tree
            return []
        inside, removed = root.resolve(), []
        for rel in rels:
            path = root / rel
            if path.resolve().is_relative_to(inside) and (path.is_file() or path.is_symlink()):
                path.unlink()
                removed.append(rel)
        return removed

    def put_file(self, local: Path, remote: str) -> None:
        target = Path(remote)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".part")
        shutil.copy2(local, tmp)  # copy2 keeps the mode bits, so executables stay executable
        tmp.replace(target)

    def pull(self, remote: str, local: Path) -> None:
        with atomic_output(local) as part:  # whole or not at all, as adb's pull
            shutil.copy2(remote, part)

    def kill(self, pid: int, hard: bool = False) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL if hard else signal.SIGTERM)

    def memory(self, pid: int) -> MemorySample | None:
        return read_memory(pid, time.perf_counter())

    def facts(self) -> DeviceFacts:
        meminfo = Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else ""
        total_kb = parse_meminfo_kb(meminfo, "MemTotal")
        cpu = None
        if Path("/proc/cpuinfo").exists():
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        runtimes = {"python": platform.python_version()}
        try:
            import onnxruntime

            runtimes["onnxruntime"] = onnxruntime.__version__
        except ImportError:
            pass
        binary = Path(self.workdir) / "bin" / "omni-edge-run"
        if binary.exists():
            version = self.shell([str(binary), "--version"], timeout=30)
            if version.returncode == 0:
                runtimes["omni-edge-run"] = version.stdout.strip()
        return DeviceFacts(serial=self.serial, kind=self.kind, soc=None, htp_arch=None,
                           ram_bytes=None if total_kb is None else total_kb * 1024,
                           os=f"{platform.system()} {platform.release()}", build=platform.version(),
                           abi=platform.machine(), cpu=cpu, thermal=thermal_zones(), runtimes=runtimes)


def _terminate(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _text(value: str | bytes | None) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value or ""
