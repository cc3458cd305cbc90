"""An emulated aarch64 Linux target: binaries pushed here run under qemu-user on this host.

It is the host device with one difference: an aarch64 ELF is started through
`qemu-aarch64-static -L SYSROOT` (the cross toolchain's sysroot by default). It tells the truth
about what it is: facts report the aarch64 ABI and "qemu-user" as the kernel, never a SoC.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from omni_edge.harness.deploy.binaries import elf_machine
from omni_edge.harness.devices.base import DROP_PAGE_CACHE, DeviceError, DeviceFacts, LineCallback, RunResult, StartCallback
from omni_edge.harness.devices.host import HostDevice

_EM_AARCH64 = 183
DEFAULT_SYSROOT = Path("/usr/aarch64-linux-gnu")


class QemuDevice(HostDevice):
    kind = "qemu-aarch64"

    def __init__(self, workdir: str | Path | None = None, sysroot: Path = DEFAULT_SYSROOT) -> None:
        super().__init__(workdir or Path.home() / ".cache" / "omni-edge" / "qemu-aarch64")
        self.serial = "qemu-aarch64"
        qemu = shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")
        if qemu is None:
            raise DeviceError("qemu-aarch64: qemu-user is not installed (apt-get install qemu-user-static)")
        if not sysroot.is_dir():
            raise DeviceError(f"qemu-aarch64: no aarch64 sysroot at {sysroot} (apt-get install g++-aarch64-linux-gnu)")
        self.qemu, self.sysroot = qemu, sysroot

    def _wrap(self, argv: list[str]) -> list[str]:
        if argv and elf_machine(Path(argv[0])) == _EM_AARCH64:
            return [self.qemu, "-L", str(self.sysroot), *argv]
        return argv

    def shell(self, argv: list[str], timeout: float = 60.0, env: dict[str, str] | None = None) -> RunResult:
        return super().shell(self._wrap(argv), timeout, env)

    def stream(self, argv: list[str], on_line: LineCallback, timeout: float = 600.0,
               env: dict[str, str] | None = None, on_start: StartCallback | None = None) -> RunResult:
        return super().stream(self._wrap(argv), on_line, timeout, env, on_start)

    def facts(self) -> DeviceFacts:
        host = super().facts()
        return DeviceFacts(serial=self.serial, kind=self.kind, soc=None, htp_arch=None, ram_bytes=host.ram_bytes,
                           os=f"Linux (qemu-user on {host.abi})", build=host.build, abi="aarch64", cpu=host.cpu,
                           thermal=host.thermal, runtimes={**host.runtimes, "qemu": self.qemu})

    def drop_page_cache(self) -> bool:  # the page cache is the host's: drop it there, not under qemu
        return super().shell(DROP_PAGE_CACHE, timeout=60.0).returncode == 0
