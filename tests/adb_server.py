"""A phone for the tests: an ADB server on loopback that speaks the real host protocol.

adbutils (and the `adb` command-line client) talk to the ADB server over TCP: a request is four
hex digits of length and a payload ("host:version", "host:tport:serial:X", then on that transport
"shell:CMD" or "sync:", or "host-serial:X:forward:tcp:L;tcp:R"); the answer is OKAY, or FAIL with
a hex-length message. This server
implements that protocol, answering for fake serials; a shell command really runs here under
`sh -c`, and sync really reads and writes this host's files, so every byte goes through the same
client code as with a phone. Phone-only tools (`getprop`, `dumpsys battery`, `pm install`) are small scripts put
first on PATH; they read each serial's props. Everything else (sha256sum, find, kill, cat, /proc)
is this host's.

A serial in `qemu` is an aarch64 phone: an aarch64 executable pushed to it is remembered, and a
shell command that executes it (`exec PATH`, or PATH at the start of a command) runs it under
qemu-user instead, which is what binfmt_misc does on a machine that has it (this one does not).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import socketserver
import struct
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

VERSION = 41  # what current platform-tools report (1.0.41); adbutils uses host:tport from 41 on
FEATURES = "cmd"  # no shell_v2/stat_v2/ls_v2: clients fall back to shell v1 and sync v1, all served here

GETPROP = r"""#!/bin/sh
# getprop NAME: the value or an empty line, like Android's; no argument: every [name]: [value].
f="$(dirname "$0")/props"
if [ $# -eq 0 ]; then sed 's/^\([^=]*\)=\(.*\)$/[\1]: [\2]/' "$f"; exit 0; fi
awk -v k="$1" 'index($0, k "=") == 1 { print substr($0, length(k) + 2); found = 1; exit }
               END { if (!found) print "" }' "$f"
"""

DUMPSYS = r"""#!/bin/sh
# Only `dumpsys battery`, and only when the serial has battery.* props.
if [ "$1" = battery ] && [ -s "$(dirname "$0")/battery" ]; then exec cat "$(dirname "$0")/battery"; fi
echo "Can't find service: $1" >&2
exit 1
"""


PM = r"""#!/bin/sh
# pm install [-r] [-t] APK: Android's package manager as `adb install` drives it. It installs what
# aapt2 can read as an APK (its package name from the binary manifest) and answers as pm does.
[ "$1" = install ] || { echo "Error: this phone's pm only installs" >&2; exit 1; }
shift
while [ $# -gt 1 ]; do shift; done  # -r -t
[ -f "$1" ] || { echo "Failure [INSTALL_FAILED_INVALID_URI: $1]"; exit 1; }
pkg=$(aapt2 dump packagename "$1" 2>/dev/null) || { echo "Failure [INSTALL_PARSE_FAILED_NOT_APK: Failed to parse $1]"; exit 1; }
mkdir -p "$(dirname "$0")/installed" && cp "$1" "$(dirname "$0")/installed/$pkg.apk"
echo Success
"""


def battery_block(props: dict[str, str]) -> str:
    """`dumpsys battery` text from props battery.level, battery.temperature (tenths of °C), ..."""
    fields = {k.removeprefix("battery."): v for k, v in props.items() if k.startswith("battery.")}
    if not fields:
        return ""
    return "Current Battery Service state:\n" + "".join(f"  {k}: {v}\n" for k, v in fields.items())


class FakeAdbServer:
    """`with FakeAdbServer({"emu-1": {"ro.soc.model": "SM8750"}}) as server:` → adb on server.port."""

    def __init__(self, serials: dict[str, dict[str, str]] | None = None, states: dict[str, str] | None = None,
                 qemu: frozenset[str] = frozenset()) -> None:
        self.serials = serials if serials is not None else {"emu-1": {}}
        self.qemu = qemu
        self.aarch64_executables: set[str] = set()  # pushed to a qemu serial
        self.states = {s: (states or {}).get(s, "device") for s in self.serials}
        self._tmp = tempfile.TemporaryDirectory(prefix="fake-adb-")
        self.bin: dict[str, Path] = {}
        for serial, props in self.serials.items():  # one PATH directory per serial, so props differ by device
            d = Path(self._tmp.name) / serial
            d.mkdir()
            (d / "props").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
            (d / "battery").write_text(battery_block(props))
            for name, text in (("getprop", GETPROP), ("dumpsys", DUMPSYS), ("pm", PM)):
                (d / name).write_text(text)
                (d / name).chmod(0o755)
            self.bin[serial] = d
        self.children: set[subprocess.Popen[bytes]] = set()
        self.lock = threading.Lock()
        self.requests: list[str] = []  # every smart-socket request, for tests that check what a client asked
        self.forwards: dict[str, tuple[str, str, socket.socket]] = {}  # local -> (serial, remote, listener)
        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Handler, bind_and_activate=True)
        self._server.daemon_threads = True
        self._server.fake = self  # type: ignore[attr-defined]
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def installed(self, serial: str) -> dict[str, Path]:
        """Package name -> the APK `pm install` took on this serial."""
        d = self.bin[serial] / "installed"
        return {p.stem: p for p in sorted(d.glob("*.apk"))} if d.is_dir() else {}

    def __enter__(self) -> FakeAdbServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
        for local in list(self.forwards):
            self.remove_forward(local)
        with self.lock:
            for proc in self.children:  # commands a client walked away from (adbd would hang them up)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
        self._tmp.cleanup()


    def forward(self, serial: str, local: str, remote: str) -> str | None:
        """Starts `adb forward LOCAL REMOTE` (tcp:PORT each; LOCAL's port 0: any free one); an error or None."""
        if not (local.startswith("tcp:") and remote.startswith("tcp:")):
            return f"cannot bind listener: only tcp:PORT here, not '{local}' / '{remote}'"
        listener = socket.create_server(("127.0.0.1", int(local[4:])))
        with self.lock:
            if local in self.forwards:
                listener.close()
                return f"cannot rebind existing socket: {local}"
            self.forwards[local] = (serial, remote, listener)
        threading.Thread(target=_accept_forwarded, args=(listener, int(remote[4:])), daemon=True).start()
        return None

    def remove_forward(self, local: str) -> bool:
        with self.lock:
            entry = self.forwards.pop(local, None)
        if entry is not None:
            entry[2].close()
        return entry is not None


def _accept_forwarded(listener: socket.socket, port: int) -> None:
    """Each connection to the forward's local port, carried to the device's port both ways."""
    while True:
        try:
            client, _ = listener.accept()
        except OSError:  # the forward was removed
            return
        try:
            device = socket.create_connection(("127.0.0.1", port))
        except OSError:
            client.close()  # adbd: nothing listens there, and the connection ends
            continue
        for a, b in ((client, device), (device, client)):
            threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


class _Handler(socketserver.BaseRequestHandler):
    request: socket.socket

    def handle(self) -> None:
        fake: FakeAdbServer = self.server.fake  # type: ignore[attr-defined]
        serial: str | None = None  # set once the connection is switched to a device's transport
        while (req := self._request()) is not None:
            with fake.lock:
                fake.requests.append(req)
            if serial is not None:  # a device service: it owns the rest of the connection
                return self._service(fake, serial, req)
            serial = self._host(fake, req)
            if serial == "":
                return

    def _host(self, fake: FakeAdbServer, req: str) -> str | None:
        """Answers a host request; the serial when it selects a transport, "" when the connection ends."""
        if req == "host:version":
            return self._okay(block(f"{VERSION:04x}"), close=True)
        if req in ("host:devices", "host:devices-l"):
            rows = [(s, fake.states[s], i + 1) for i, s in enumerate(fake.serials)]
            lines = [f"{s:<22} {st} product:fake model:fake device:fake transport_id:{t}" if req.endswith("-l")
                     else f"{s}\t{st}" for s, st, t in rows]
            return self._okay(block("".join(line + "\n" for line in lines)), close=True)
        if req == "host:features":
            return self._okay(block(FEATURES), close=True)
        if (answered := self._forwarding(fake, req)) is not None:
            return answered
        target, service = _target(fake, req)
        if service is None:
            return self._fail(f"unknown host service '{req}'")
        if target not in fake.serials:
            return self._fail(target if target in ANY_ERRORS else f"device '{target}' not found")
        if service == "get-state":
            return self._okay(block(fake.states[target]), close=True)
        if fake.states[target] != "device":
            return self._fail(f"device {fake.states[target]}")
        if service == "features":
            return self._okay(block(FEATURES), close=True)
        # The connection now belongs to the device; tport also answers the transport id (u64 LE).
        tid = struct.pack("<Q", list(fake.serials).index(target) + 1) if service == "tport" else b""
        self.request.sendall(b"OKAY" + tid)
        return target

    def _forwarding(self, fake: FakeAdbServer, req: str) -> str | None:
        """host-serial:S:forward:L;R, list-forward, killforward:L (adb's port forwards); else None."""
        m = re.fullmatch(r"host-serial:(.+):(forward(?::norebind)?:(tcp:\d+);(tcp:\d+)|list-forward|killforward:(tcp:\d+))", req)
        if m is None:
            return None
        serial, service = m.group(1), m.group(2)
        if serial not in fake.serials:
            return self._fail(f"device '{serial}' not found")
        if service.startswith("forward"):
            error = fake.forward(serial, m.group(3), m.group(4))
            return self._fail(error) if error else self._okay(b"OKAY", close=True)  # adb answers OKAY twice
        if service == "list-forward":
            with fake.lock:
                rows = [f"{s} {local} {remote}\n" for local, (s, remote, _) in fake.forwards.items() if s == serial]
            return self._okay(block("".join(rows)), close=True)
        if not fake.remove_forward(m.group(5)):
            return self._fail(f"listener '{m.group(5)}' not found")
        return self._okay(b"OKAY", close=True)

    def _service(self, fake: FakeAdbServer, serial: str, req: str) -> None:
        if req.startswith("shell:"):
            self.request.sendall(b"OKAY")
            return self._shell(fake, serial, req[len("shell:"):])
        if req == "sync:":
            self.request.sendall(b"OKAY")
            return self._sync(fake if serial in fake.qemu else None)
        self._fail(f"closed: unknown service '{req}'")  # adbd closes such a stream

    def _shell(self, fake: FakeAdbServer, serial: str, cmd: str) -> None:
        """Shell v1: stdout and stderr together as raw bytes, then the connection closes (no exit code)."""
        env = {**os.environ, "PATH": f"{fake.bin[serial]}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
        if serial in fake.qemu:
            cmd = _under_qemu(cmd, fake.aarch64_executables)
        proc = subprocess.Popen(["sh", "-c", cmd or "true"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, cwd="/", env=env, start_new_session=True)
        with fake.lock:
            fake.children.add(proc)
        assert proc.stdout is not None
        try:
            while chunk := os.read(proc.stdout.fileno(), 65536):
                self.request.sendall(chunk)
        except OSError:  # the client went away: hang the command up as adbd would
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGHUP)
        finally:
            proc.stdout.close()
            proc.wait()
            with fake.lock:
                fake.children.discard(proc)

    def _sync(self, emulated: FakeAdbServer | None) -> None:
        """Sync v1: 4-byte id + u32 length + payload per request, until QUIT or the client closes."""
        while (head := self._exact(8)) is not None:
            cmd, size = head[:4], struct.unpack("<I", head[4:])[0]
            if cmd == b"QUIT":
                return
            arg = self._exact(size)
            if arg is None or cmd not in (b"STAT", b"LIST", b"SEND", b"RECV"):
                return self._sync_fail(f"unknown sync request {cmd!r}")
            path = arg.decode()
            if cmd == b"STAT":  # a missing path answers all zeros, as adbd does
                try:
                    st = os.stat(path)
                    self.request.sendall(b"STAT" + struct.pack("<III", st.st_mode, st.st_size & 0xFFFFFFFF, int(st.st_mtime)))
                except OSError:
                    self.request.sendall(b"STAT" + bytes(12))
            elif cmd == b"LIST":
                with contextlib.suppress(OSError):
                    for entry in os.scandir(path):
                        st, name = entry.stat(follow_symlinks=False), entry.name.encode()
                        self.request.sendall(b"DENT" + struct.pack("<IIII", st.st_mode, st.st_size & 0xFFFFFFFF,
                                                                   int(st.st_mtime), len(name)) + name)
                self.request.sendall(b"DONE" + bytes(16))
            elif cmd == b"SEND" and not self._receive_file(path, emulated):
                return
            elif cmd == b"RECV":
                try:
                    with open(path, "rb") as f:
                        while chunk := f.read(64 * 1024):  # SYNC_DATA_MAX
                            self.request.sendall(b"DATA" + struct.pack("<I", len(chunk)) + chunk)
                except OSError as exc:
                    return self._sync_fail(f"{exc.strerror}: {path}")
                self.request.sendall(b"DONE" + bytes(4))

    def _receive_file(self, spec: str, emulated: FakeAdbServer | None) -> bool:
        """SEND "path,mode": DATA chunks, then DONE with the mtime; adbd creates the parent directories."""
        path, _, mode_text = spec.rpartition(",")
        target = Path(path)
        tmp = target.with_name(f".{target.name}.fake-adb")
        error = None
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            out = tmp.open("wb")
        except OSError as exc:
            error, out = f"secure_mkdirs/open failed: {exc.strerror}", None
        while (head := self._exact(8)) is not None:
            kind, value = head[:4], struct.unpack("<I", head[4:])[0]
            if kind == b"DATA":
                data = self._exact(value)
                if data is None:
                    break
                if out is not None:
                    out.write(data)
            elif kind == b"DONE":
                if out is None:
                    self._sync_fail(error or "write failed")
                    return False
                out.close()
                os.chmod(tmp, int(mode_text) & 0o777)
                os.utime(tmp, (value, value))
                tmp.replace(target)
                if emulated is not None and _is_aarch64_executable(target):
                    with emulated.lock:
                        emulated.aarch64_executables.add(str(target))
                self.request.sendall(b"OKAY" + bytes(4))
                return True
            else:
                break
        if out is not None:
            out.close()
            tmp.unlink(missing_ok=True)
        return False

    # ---- framing ---------------------------------------------------------------------------
    def _exact(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = self.request.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def _request(self) -> str | None:
        size = self._exact(4)
        if size is None:
            return None
        payload = self._exact(int(size, 16))
        return None if payload is None else payload.decode()

    def _okay(self, payload: bytes = b"", close: bool = False) -> str | None:
        self.request.sendall(b"OKAY" + payload)
        return "" if close else None

    def _fail(self, message: str) -> str:
        self.request.sendall(b"FAIL" + block(message))
        return ""

    def _sync_fail(self, message: str) -> None:
        data = message.encode()
        self.request.sendall(b"FAIL" + struct.pack("<I", len(data)) + data)


ANY_ERRORS = ("no devices/emulators found", "more than one device/emulator")


QEMU_SYSROOT = "/usr/aarch64-linux-gnu"


def _is_aarch64_executable(path: Path) -> bool:
    with path.open("rb") as f:
        head = f.read(20)
    return head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == 183 and ".so" not in path.name


def _under_qemu(cmd: str, executables: set[str]) -> str:
    """Where the command executes a pushed aarch64 binary, qemu-user runs it."""
    for path in executables:
        cmd = re.sub(rf"(^|exec |; |&& ){re.escape(path)}(?=\s|$)", rf"\g<1>qemu-aarch64 -L {QEMU_SYSROOT} {path}", cmd)
    return cmd


def _target(fake: FakeAdbServer, req: str) -> tuple[str, str | None]:
    """(serial, service) of a request that names a device: transport, tport, or host-serial:S:SERVICE."""
    if req in ("host:transport-any", "host:tport:any"):
        ready = [s for s in fake.serials if fake.states[s] == "device"]
        return (ready[0] if len(ready) == 1 else ANY_ERRORS[bool(ready)]), req.split(":")[1].split("-")[0]
    for prefix, service in (("host:transport:", "transport"), ("host:tport:serial:", "tport")):
        if req.startswith(prefix):
            return req[len(prefix):], service
    if req.startswith("host-serial:"):  # the serial may itself hold ':' (ip:port), so split at the last one
        serial, _, service = req[len("host-serial:"):].rpartition(":")
        if service in ("features", "get-state"):
            return serial, service
    return "", None


def block(text: str) -> bytes:
    data = text.encode()
    return f"{len(data):04x}".encode() + data


__all__ = ["FakeAdbServer", "battery_block"]
