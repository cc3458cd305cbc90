"""A phone (or emulator) reached through the ADB server, via the adbutils client.

Shell v1, the protocol every device speaks, returns stdout and stderr mixed and no exit code. So
each command is wrapped on the device: `sh -c 'echo PID; exec COMMAND' 2>ERRFILE`, then a marker
line, the stderr file, and a marker line with `$?`. One round trip gives the pid (for `kill` and
`memory`), stdout exactly, stderr separately and the exit code. The markers carry a random token
per call, so no output can fake them.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import shlex
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import adbutils
from adbutils.errors import AdbConnectionError

from omni_edge.harness.devices.base import (
    Device,
    DeviceError,
    DeviceFacts,
    LineCallback,
    MemorySample,
    RunResult,
    StartCallback,
    parse_meminfo_kb,
    parse_sha256sum,
)

SOCKET_TIMEOUT = 60.0  # per socket operation with the server (a push is many), not per command
HANDSHAKE_TIMEOUT = 5.0  # listing devices: a server that does not answer is named in seconds, not a minute
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class _Connection(adbutils.AdbConnection):  # type: ignore[misc]
    """adbutils runs `adb start-server` when it cannot connect; a harness must not start daemons unasked."""

    def _safe_connect(self) -> socket.socket:
        sock: socket.socket = self._create_socket()
        return sock


class _Client(adbutils.AdbClient):  # type: ignore[misc]
    def __init__(self, host: str, port: int, socket_timeout: float) -> None:
        super().__init__(host, port)
        self._timeout = socket_timeout

    def make_connection(self, timeout: float | None = None) -> _Connection:
        conn = _Connection(self.host, self.port)
        conn.conn.settimeout(timeout or self._timeout)
        return conn


@contextlib.contextmanager
def _adb_errors(what: str, host: str, port: int) -> Iterator[None]:
    """Every adbutils/socket failure as a DeviceError that says what was being done."""
    try:
        yield
    except adbutils.AdbError as exc:
        text = " ".join(str(a) for a in exc.args) or type(exc).__name__
        if isinstance(exc, AdbConnectionError):
            raise DeviceError(f"{what}: no adb server at {host}:{port} ({text}); start one with `adb start-server`") from exc
        raise DeviceError(f"{what}: the adb server at {host}:{port}: {text}") from exc
    except (ValueError, UnicodeDecodeError) as exc:  # a reply that is not the protocol (wrong port, another service)
        raise DeviceError(f"{what}: the adb server at {host}:{port} answered something that is not ADB ({exc})") from exc
    except (OSError, EOFError) as exc:  # socket timeouts are OSErrors too
        raise DeviceError(f"{what}: connection to the adb server at {host}:{port} failed ({exc or type(exc).__name__})") from exc


def _device_rows(client: _Client, host: str, port: int) -> list[tuple[str, str]]:
    with _adb_errors("adb devices", host, port):
        return [(info.serial, info.state) for info in client.list()]


def list_devices(host: str = "127.0.0.1", port: int = 5037) -> list[str]:
    """Serials the ADB server reports in state "device" (ready; not offline or unauthorized)."""
    return [serial for serial, state in _device_rows(_Client(host, port, HANDSHAKE_TIMEOUT), host, port) if state == "device"]


class AdbDevice(Device):
    """One serial on an ADB server; layouts live under `workdir` (writable by adb's shell user)."""

    kind = "adb"

    def __init__(self, serial: str, host: str = "127.0.0.1", port: int = 5037, workdir: str = "/data/local/tmp/omni-edge") -> None:
        self.serial = serial
        self._host, self._port = host, port
        self._workdir = workdir.rstrip("/") or "/"
        self._client = _Client(host, port, SOCKET_TIMEOUT)
        rows = dict(_device_rows(_Client(host, port, HANDSHAKE_TIMEOUT), host, port))
        if serial not in rows:
            listed = ", ".join(f"{s} ({st})" for s, st in rows.items()) or "nothing"
            raise DeviceError(f"device '{serial}' not found; adb devices lists: {listed}")
        if rows[serial] != "device":
            hint = "; accept the USB debugging prompt on it" if rows[serial] == "unauthorized" else ""
            raise DeviceError(f"device '{serial}' is {rows[serial]}, not ready{hint}")
        self._device: Any = self._client.device(serial)

    @property
    def workdir(self) -> str:
        return self._workdir

    def _errors(self, what: str) -> contextlib.AbstractContextManager[None]:
        return _adb_errors(f"{what} on {self.serial}", self._host, self._port)

    # ---- commands --------------------------------------------------------------------------
    def _wrap(self, argv: list[str], env: dict[str, str] | None, token: str) -> tuple[str, list[str]]:
        """The device-side script, and where its stderr file may be."""
        if not argv:
            raise DeviceError("empty command")
        bad = [k for k in env or {} if not _ENV_NAME.match(k)]
        if bad:
            raise DeviceError(f"invalid environment variable name(s): {', '.join(bad)}")
        exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in (env or {}).items())
        inner = f"echo __OE_PID_{token}__=$$; {exports}exec {shlex.join(argv)}"
        tmp = shlex.quote(f"{self._workdir}/.oe-tmp")
        err = f'"$d/stderr.{token}"'
        script = (f"d={tmp}; mkdir -p \"$d\" 2>/dev/null || d=/data/local/tmp; "
                  f"sh -c {shlex.quote(inner)} 2>{err}; r=$?; "
                  f"printf '\\n__OE_ERR_{token}__\\n'; cat {err} 2>/dev/null; rm -f {err}; "
                  f"printf '\\n__OE_RC_{token}__=%s\\n' \"$r\"")
        return script, [f"{self._workdir}/.oe-tmp/stderr.{token}", f"/data/local/tmp/stderr.{token}"]

    def _run(self, argv: list[str], timeout: float, env: dict[str, str] | None,
             on_chunk: Callable[[bytes], None], what: str) -> tuple[bytes, bool, float]:
        """Runs the wrapped command, feeding raw output to on_chunk; (all output, timed out, seconds)."""
        token = secrets.token_hex(6)
        script, errfiles = self._wrap(argv, env, token)
        start = time.perf_counter()
        deadline = start + timeout
        data = bytearray()
        timed_out = False
        with self._errors(what):
            conn = self._device.shell(script, stream=True)
            try:
                while True:
                    remaining = deadline - time.perf_counter()
                    if remaining <= 0:
                        timed_out = True
                        break
                    conn.conn.settimeout(remaining)
                    try:
                        chunk = conn.conn.recv(65536)
                    except TimeoutError:
                        timed_out = True
                        break
                    if not chunk:
                        break
                    data += chunk
                    on_chunk(chunk)
            finally:
                conn.close()
        if timed_out:
            pid = _pid(bytes(data), token)
            if pid is not None:  # shell v1 leaves it running when the connection goes; stop it
                self._cleanup(pid, errfiles)
        return bytes(data), timed_out, time.perf_counter() - start

    def _cleanup(self, pid: int, errfiles: list[str]) -> None:
        with contextlib.suppress(DeviceError):
            self._raw(f"kill -9 {pid} 2>/dev/null; rm -f {shlex.join(errfiles)}", 15.0)

    def _raw(self, script: str, timeout: float) -> str:
        """A command whose stderr and exit code do not matter (cleanup)."""
        with self._errors("shell"):
            out: str = self._device.shell(script, timeout=timeout)
        return out

    def shell(self, argv: list[str], timeout: float = 60.0, env: dict[str, str] | None = None) -> RunResult:
        data, timed_out, seconds = self._run(argv, timeout, env, lambda chunk: None, f"shell {shlex.join(argv)}")
        if timed_out:
            out, _, _ = _split(data)
            return RunResult(None, out, "", seconds, timed_out=True)
        stdout, stderr, rc = _split(data)
        if rc is None:
            raise DeviceError(f"shell {shlex.join(argv)} on {self.serial}: output ended before the exit code "
                              f"(connection lost?): {data[-200:]!r}")
        return RunResult(rc, stdout, stderr, seconds)

    def stream(self, argv: list[str], on_line: LineCallback, timeout: float = 600.0,
               env: dict[str, str] | None = None, on_start: StartCallback | None = None) -> RunResult:
        lines = _LineSplitter(on_line, on_start)
        data, timed_out, seconds = self._run(argv, timeout, env, lines.feed, f"stream {shlex.join(argv)}")
        stdout = "\n".join(lines.lines)
        if timed_out:
            return RunResult(None, stdout, "", seconds, timed_out=True)
        _, stderr, rc = _split(data)
        if rc is None:
            raise DeviceError(f"stream {shlex.join(argv)} on {self.serial}: output ended before the exit code (connection lost?)")
        return RunResult(rc, stdout, stderr, seconds)

    # ---- files -----------------------------------------------------------------------------
    def remote_hashes(self, remote_dir: str) -> dict[str, str]:
        root = remote_dir.rstrip("/") or "/"
        q = shlex.quote(root)
        done = self.shell(["sh", "-c", f"if [ -d {q} ]; then find {q} -type f -exec sha256sum {{}} +; fi"], timeout=600)
        if done.timed_out:
            raise DeviceError(f"hashing {root} on {self.serial} timed out")
        if done.returncode != 0 and not done.stdout:  # some output: hash what was readable, re-send the rest
            raise DeviceError(f"hashing {root} on {self.serial} failed: {done.stderr.strip() or done.returncode}")
        return parse_sha256sum(done.stdout, root)

    def put_file(self, local: Path, remote: str) -> None:
        parent = str(PurePosixPath(remote).parent)
        made = self.shell(["mkdir", "-p", parent], timeout=60)
        if made.returncode != 0:
            raise DeviceError(f"mkdir -p {parent} on {self.serial}: {made.stderr.strip()}")
        mode = 0o755 if local.stat().st_mode & 0o111 else 0o644
        with self._errors(f"push {local} → {remote}"):
            self._device.sync.push(local, remote, mode=mode, check=True)

    def pull(self, remote: str, local: Path) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        part = local.with_name(local.name + ".part")
        try:
            # pull_file, not pull: Sync.pull takes a missing file for a directory and makes an empty one locally.
            with self._errors(f"pull {remote}"):
                self._device.sync.pull_file(remote, part)
            part.replace(local)
        finally:
            part.unlink(missing_ok=True)

    # ---- ports ----------------------------------------------------------------------------
    def forward(self, remote_port: int) -> int:
        """`adb forward tcp:LOCAL tcp:REMOTE` on a free local port (an existing one is reused)."""
        with self._errors(f"forwarding port {remote_port}"):
            return int(self._device.forward_port(remote_port))

    def remove_forward(self, local_port: int) -> None:
        with self._errors(f"removing the forward of port {local_port}"):
            self._device.forward_remove(f"tcp:{local_port}", raise_non_found=False)

    # ---- processes -------------------------------------------------------------------------
    def kill(self, pid: int, hard: bool = False) -> None:
        done = self.shell(["kill", *(["-9"] if hard else []), str(pid)], timeout=15)
        if done.timed_out:
            raise DeviceError(f"kill {pid} on {self.serial} timed out")
        if done.returncode != 0 and "no such process" not in done.stderr.lower():
            raise DeviceError(f"kill {pid} on {self.serial}: {done.stderr.strip()}")

    def memory(self, pid: int) -> MemorySample | None:
        t = time.perf_counter()
        # smaps_rollup has Rss and Pss; status (VmRSS) is the fallback on kernels before 4.14.
        done = self.shell(["sh", "-c", f"cat /proc/{int(pid)}/smaps_rollup /proc/{int(pid)}/status 2>/dev/null"], timeout=15)
        rss = parse_meminfo_kb(done.stdout, "Rss")
        pss = parse_meminfo_kb(done.stdout, "Pss")
        if rss is None:
            rss = parse_meminfo_kb(done.stdout, "VmRSS")
        return None if rss is None else MemorySample(t=t, rss_kb=rss, pss_kb=pss)

    # ---- facts -----------------------------------------------------------------------------
    def facts(self) -> DeviceFacts:
        binary = shlex.quote(f"{self._workdir}/bin/omni-edge-run")
        sections = {
            **{prop: f"getprop {prop}" for prop in PROPS},
            "meminfo": "cat /proc/meminfo",
            "cpuinfo": "cat /proc/cpuinfo",
            "battery": "dumpsys battery",
            "thermal": "for z in /sys/class/thermal/thermal_zone*; do "
                       "t=$(cat $z/type) && v=$(cat $z/temp) && printf '%s\\t%s\\t%s\\n' ${z##*/} \"$t\" \"$v\"; done",
            "runtime": f"if [ -x {binary} ]; then {binary} --version; fi",
        }
        token = secrets.token_hex(6)
        script = "; ".join(f"echo __OE_{token}__{name}; {cmd} 2>/dev/null" for name, cmd in sections.items())
        done = self.shell(["sh", "-c", script], timeout=60)
        if done.timed_out:
            raise DeviceError(f"reading facts of {self.serial} timed out")
        got = _sections(done.stdout, f"__OE_{token}__")
        prop = {p: got.get(p, "").strip() or None for p in PROPS}
        from omni_edge.socs import SOCS

        named = [v for v in (prop["ro.soc.model"], prop["ro.board.platform"]) if v]
        key = next((v.lower() for v in named if v.lower() in SOCS), None)  # ro.soc.model reads e.g. "SM8750"
        total_kb = parse_meminfo_kb(got.get("meminfo", ""), "MemTotal")
        release = prop["ro.build.version.release"]
        version = got.get("runtime", "").strip()
        return DeviceFacts(
            serial=self.serial, kind=self.kind,
            soc=key or next(iter(named), None),
            htp_arch=None if key is None else f"v{SOCS[key].htp_arch}",
            ram_bytes=None if total_kb is None else total_kb * 1024,
            os=f"Android {release}" if release else None,
            build=prop["ro.build.fingerprint"], abi=prop["ro.product.cpu.abi"],
            cpu=_cpu(got.get("cpuinfo", "")),
            battery=_battery(got.get("battery", "")),
            thermal=_thermal(got.get("thermal", "")),
            runtimes={"omni-edge-run": version} if version else {},
        )


PROPS = ("ro.soc.model", "ro.board.platform", "ro.build.fingerprint", "ro.build.version.release", "ro.product.cpu.abi")


# ---- parsing the wrapped output ------------------------------------------------------------------
def _pid(data: bytes, token: str) -> int | None:
    m = re.match(rb"__OE_PID_" + token.encode() + rb"__=(\d+)\n", data)
    return int(m.group(1)) if m else None


def _token(data: bytes) -> bytes | None:
    m = re.match(rb"__OE_PID_([0-9a-f]+)__=\d+\n", data)
    return m.group(1) if m else None


def _split(data: bytes) -> tuple[str, str, int | None]:
    """(stdout, stderr, exit code) of wrapped output; exit code None when the end never came."""
    token = _token(data)
    if token is None:  # the wrapper itself failed before the command started
        return "", data.decode(errors="replace"), None
    body = data[data.index(b"\n") + 1:]
    err_mark, rc_mark = b"\n__OE_ERR_" + token + b"__\n", b"\n__OE_RC_" + token + b"__="
    i = body.rfind(err_mark)
    if i < 0:
        return body.decode(errors="replace"), "", None
    j = body.rfind(rc_mark)
    if j < i:
        return body[:i].decode(errors="replace"), body[i + len(err_mark):].decode(errors="replace"), None
    rc = body[j + len(rc_mark):].strip()
    return (body[:i].decode(errors="replace"), body[i + len(err_mark):j].decode(errors="replace"),
            int(rc) if rc.isdigit() else None)


class _LineSplitter:
    """Raw chunks → stdout lines as they complete; the pid line goes to on_start, marker lines nowhere.

    The wrapper prints a newline before its end marker (the output may not end with one), so an
    empty line is held until the next line shows it was real output, not that added newline.
    """

    def __init__(self, on_line: LineCallback, on_start: StartCallback | None) -> None:
        self.on_line, self.on_start = on_line, on_start
        self.lines: list[str] = []
        self.buf = b""
        self.state = "pid"
        self.held_empty = 0
        self.err_mark = b""

    def feed(self, chunk: bytes) -> None:
        self.buf += chunk
        while self.state != "done" and b"\n" in self.buf:
            line, _, self.buf = self.buf.partition(b"\n")
            self._line(line)

    def _line(self, line: bytes) -> None:
        if self.state == "pid":
            m = re.fullmatch(rb"__OE_PID_([0-9a-f]+)__=(\d+)", line)
            if m is None:  # never happens with the wrapper; keep the line rather than lose it
                self.state = "out"
                return self._line(line)
            self.err_mark = b"__OE_ERR_" + m.group(1) + b"__"
            self.state = "out"
            if self.on_start is not None:
                self.on_start(int(m.group(2)))
            return
        if line == self.err_mark:
            self.held_empty = max(0, self.held_empty - 1)  # the newline the wrapper added
            self._flush_empty()
            self.state = "done"
            return
        if not line:
            self.held_empty += 1
            return
        self._flush_empty()
        self._emit(line.decode(errors="replace"))

    def _flush_empty(self) -> None:
        for _ in range(self.held_empty):
            self._emit("")
        self.held_empty = 0

    def _emit(self, text: str) -> None:
        self.lines.append(text)
        self.on_line(text)


def _sections(text: str, mark: str) -> dict[str, str]:
    out: dict[str, str] = {}
    name = None
    for line in text.splitlines(keepends=True):
        if line.startswith(mark):
            name = line[len(mark):].strip()
            out[name] = ""
        elif name is not None:
            out[name] += line
    return out


def _cpu(cpuinfo: str) -> str | None:
    for key in ("Hardware", "model name"):
        for line in cpuinfo.splitlines():
            name, _, value = line.partition(":")
            if name.strip() == key and value.strip():
                return value.strip()
    return None


def _battery(text: str) -> dict[str, str]:
    """`dumpsys battery` → {"level": "87", "temperature": "301", ...} (temperature in tenths of °C, as reported)."""
    out: dict[str, str] = {}
    for line in text.splitlines()[1:] if text.startswith("Current Battery Service state") else []:
        name, sep, value = line.partition(":")
        if sep and name.strip() and line.startswith("  ") and not line.startswith("   "):
            out[name.strip().lower().replace(" ", "_")] = value.strip()
    return out


def _thermal(text: str) -> dict[str, float]:
    """Zone lines `thermal_zoneN<TAB>type<TAB>millidegrees` → {type: °C}; a repeated type keeps its zone name."""
    zones: dict[str, float] = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) != 3:
            continue
        zone, kind, value = parts
        try:
            celsius = int(value.strip()) / 1000.0
        except ValueError:
            continue
        key = kind or zone
        zones[f"{key} ({zone})" if key in zones else key] = celsius
    return zones
