"""The one interface every target speaks: the host, an ADB device, an emulated aarch64 target.

A device runs commands, streams their stdout line by line, moves files (pushing only what
changed, decided by SHA-256 on both sides), samples a process's memory and reports facts.
Remote paths are POSIX strings; local paths are `Path`s.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from omni_edge.contracts.manifest import sha256_file
from omni_edge.harness.devices.sensors import SensorSample, parse_sensors, sensor_script


class DeviceError(RuntimeError):
    """A device could not be reached or refused a command; the message says which and why."""


@dataclass(frozen=True)
class RunResult:
    """A finished command: exit code (None when it was killed by the timeout)."""

    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False


@dataclass(frozen=True)
class MemorySample:
    """Resident memory of one process at one moment, in KiB; PSS where the kernel reports it."""

    t: float
    rss_kb: int
    pss_kb: int | None = None


@dataclass
class PushReport:
    sent: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # on the device, no longer in the pushed tree
    bytes_sent: int = 0

    def merge(self, other: PushReport) -> None:
        self.sent += other.sent
        self.skipped += other.skipped
        self.removed += other.removed
        self.bytes_sent += other.bytes_sent

    def counts(self) -> dict[str, int]:
        """What `push` prints of it: files sent, skipped (same hash), removed, and bytes sent."""
        return {"files_sent": len(self.sent), "files_skipped": len(self.skipped), "files_removed": len(self.removed),
                "bytes_sent": self.bytes_sent}


@dataclass
class DeviceFacts:
    """What a report needs to say where it ran. Unknown values stay None, never guessed."""

    serial: str
    kind: str
    soc: str | None = None
    htp_arch: str | None = None
    ram_bytes: int | None = None
    os: str | None = None
    build: str | None = None
    abi: str | None = None
    cpu: str | None = None
    battery: dict[str, str] = field(default_factory=dict)
    thermal: dict[str, float] = field(default_factory=dict)
    runtimes: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# Evicts file pages (needs root): the next start reads artifacts from storage.
DROP_PAGE_CACHE = ["sh", "-c", "sync && echo 3 > /proc/sys/vm/drop_caches"]
LineCallback = Callable[[str], None]
StartCallback = Callable[[int], None]


def local_files(local: Path) -> list[tuple[Path, str]]:
    """(file, path relative to `local`) for a file or every file under a directory, sorted."""
    if local.is_file():
        return [(local, local.name)]
    if not local.is_dir():
        raise DeviceError(f"push: {local} does not exist")
    return [(p, p.relative_to(local).as_posix()) for p in sorted(local.rglob("*")) if p.is_file()]


def parse_sha256sum(text: str, root: str) -> dict[str, str]:
    """`sha256sum` output → {path relative to root: digest}; lines it cannot read are ignored."""
    out: dict[str, str] = {}
    prefix = root.rstrip("/") + "/"
    for line in text.splitlines():
        digest, _, path = line.partition("  ")
        if len(digest) == 64 and path.startswith(prefix):
            out[path[len(prefix):]] = digest
    return out


def parse_meminfo_kb(text: str, key: str) -> int | None:
    """A `Key:   123 kB` value from /proc/meminfo, /proc/PID/status or smaps_rollup."""
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name.strip() == key:
            parts = rest.split()
            if parts and parts[0].isdigit():
                return int(parts[0])
    return None


class Device(ABC):
    """A target the harness can deploy to and run on."""

    serial: str
    kind: str

    @property
    @abstractmethod
    def workdir(self) -> str:
        """Remote root under which pushed layouts live."""

    @abstractmethod
    def shell(self, argv: list[str], timeout: float = 60.0, env: dict[str, str] | None = None) -> RunResult:
        """Run to completion and return exit code and output."""

    @abstractmethod
    def stream(self, argv: list[str], on_line: LineCallback, timeout: float = 600.0,
               env: dict[str, str] | None = None, on_start: StartCallback | None = None) -> RunResult:
        """Run, calling `on_line` for every stdout line as it arrives and `on_start(pid)` once."""

    @abstractmethod
    def remote_hashes(self, remote_dir: str) -> dict[str, str]:
        """SHA-256 of every file under `remote_dir`, keyed by relative path (empty if absent)."""

    @abstractmethod
    def put_file(self, local: Path, remote: str) -> None:
        """Copy one file (creating parent directories), keeping its executable bit."""

    @abstractmethod
    def pull(self, remote: str, local: Path) -> None:
        """Copy one remote file to `local`."""

    def remove_files(self, remote_root: str, rels: list[str]) -> list[str]:
        """Delete these files (paths relative to `remote_root`, as `remote_hashes` names them);
        returns the ones deleted."""
        done = self.shell(["rm", "-f", "--", *(str(PurePosixPath(remote_root) / rel) for rel in rels)], timeout=120)
        if done.returncode != 0:
            raise DeviceError(f"removing stale files under {remote_root} on {self.serial}: {done.stderr.strip()}")
        return rels

    @abstractmethod
    def kill(self, pid: int, hard: bool = False) -> None:
        """Stop a process started by `stream` (no error if it already ended): SIGTERM, the way a
        user stops it (it ends its streams cleanly), or with `hard` SIGKILL (a crash or the OS)."""

    @abstractmethod
    def memory(self, pid: int) -> MemorySample | None:
        """Current RSS (and PSS when readable) of a process; None once it has ended."""

    @abstractmethod
    def facts(self) -> DeviceFacts:
        """SoC, RAM, OS/build, ABI, HTP arch, battery/thermal state, runtime versions."""

    def sensors(self, t: float) -> SensorSample:
        """CPU clocks, thermal zones and battery readings now (devices/sensors.py); `t` stamps them."""
        script, marker = sensor_script()
        try:
            done = self.shell(["sh", "-c", script], timeout=15.0)
        except DeviceError:
            return SensorSample(t=t)
        return parse_sensors(done.stdout, marker, t)

    def forward(self, remote_port: int) -> int:
        """A port of this host that reaches `remote_port` on the device's loopback. The host and
        qemu devices are this machine: the same port."""
        return remote_port

    def remove_forward(self, local_port: int) -> None:
        """Ends what forward() set up (nothing to end on this machine)."""
        return None

    def drop_page_cache(self) -> bool:
        """Evict file pages so the next start reads artifacts from storage (a cold start);
        needs root on the target. False when it could not be done: the start is then warm."""
        try:
            result = self.shell(DROP_PAGE_CACHE, timeout=60.0)
        except DeviceError:
            return False
        return result.returncode == 0

    def push(self, local: Path, remote: str) -> PushReport:
        """Copy a file or directory tree, skipping files whose remote SHA-256 already matches; a
        directory's remote files that the tree does not have are removed."""
        files = local_files(local)
        remote_root = remote if local.is_dir() else str(PurePosixPath(remote).parent)
        have = self.remote_hashes(remote_root)
        report = PushReport()
        for path, rel in files:
            target = str(PurePosixPath(remote_root) / rel) if local.is_dir() else remote
            key = rel if local.is_dir() else PurePosixPath(remote).name
            if have.get(key) == sha256_file(path):
                report.skipped.append(target)
                continue
            self.put_file(path, target)
            report.sent.append(target)
            report.bytes_sent += path.stat().st_size
        if local.is_dir():
            # A directory is mirrored: what an earlier push left and this tree no longer has (a
            # re-export's other buckets) would be refused by the controller as unlisted files.
            stale = sorted(set(have) - {rel for _, rel in files})
            if stale:
                report.removed += [str(PurePosixPath(remote_root) / rel) for rel in self.remove_files(remote_root, stale)]
        return report

