"""What an executable or library is built for, read from its own headers (ELF and PE/COFF).

Deployment refuses a binary for another ABI before anything is pushed, and bundle
verification checks every file's machine, so both read the headers rather than trust a name.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

_ELF_MACHINES = {183: "aarch64", 62: "x86_64", 164: "hexagon"}  # EM_AARCH64, EM_X86_64, EM_QDSP6 (HTP skels)
_PE_MACHINES = {0xAA64: "arm64", 0x8664: "x64"}  # IMAGE_FILE_MACHINE_ARM64, _AMD64
# Devices name the same instruction sets differently (Android's arm64-v8a, Windows' AMD64).
ABI_ALIASES = {"arm64-v8a": "aarch64", "aarch64": "aarch64", "arm64": "aarch64", "x86_64": "x86_64", "amd64": "x86_64"}


def elf_machine(path: Path) -> int | None:
    """The ELF e_machine of a file, or None for anything that is not a little-endian ELF."""
    try:
        with path.open("rb") as f:
            head = f.read(20)
    except OSError:
        return None
    if len(head) < 20 or head[:4] != b"\x7fELF" or head[5] != 1:
        return None
    return int.from_bytes(head[18:20], "little")


@dataclass
class PeImage:
    machine: str            # "arm64", "x64" or the hex number of another machine
    pe32_plus: bool         # a 64-bit image (optional header magic 0x20b)
    executable: bool        # an .exe rather than a .dll
    imports: list[str] = field(default_factory=list)  # DLL names of the import table, in order


def read_pe(path: Path) -> PeImage | None:
    """The machine, kind and imported DLLs of a PE/COFF image, or None if `path` is not one."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        if data[:2] != b"MZ":
            return None
        pe = struct.unpack_from("<I", data, 0x3C)[0]
        if data[pe:pe + 4] != b"PE\0\0":
            return None
        machine, sections, _, _, _, optional_size, characteristics = struct.unpack_from("<HHIIIHH", data, pe + 4)
        optional = pe + 24
        magic = struct.unpack_from("<H", data, optional)[0]
        directories = optional + (112 if magic == 0x20B else 96)
        import_rva = struct.unpack_from("<I", data, directories + 8)[0]  # data directory 1: imports
        table = optional + optional_size
        section_list = [struct.unpack_from("<IIII", data, table + 40 * i + 8) for i in range(sections)]

        def offset(rva: int) -> int:
            for virtual_size, virtual_address, raw_size, raw_pointer in section_list:
                if virtual_address <= rva < virtual_address + max(virtual_size, raw_size):
                    return int(rva - virtual_address + raw_pointer)
            raise ValueError(f"RVA {rva:#x} outside every section")

        imports: list[str] = []
        if import_rva:
            entry = offset(import_rva)
            while True:
                name_rva = struct.unpack_from("<I", data, entry + 12)[0]
                if name_rva == 0:
                    break
                start = offset(name_rva)
                imports.append(data[start:data.index(b"\0", start)].decode("ascii"))
                entry += 20
    except (struct.error, ValueError, UnicodeDecodeError):
        return None
    return PeImage(_PE_MACHINES.get(machine, f"{machine:#x}"), magic == 0x20B, not characteristics & 0x2000, imports)


def binary_abi(path: Path) -> str | None:
    """'aarch64' / 'x86_64' for an ELF, 'windows-arm64' / 'windows-x64' for a PE image, else None."""
    machine = elf_machine(path)
    if machine is not None:
        return _ELF_MACHINES.get(machine)
    image = read_pe(path)
    if image is not None and image.machine in _PE_MACHINES.values():
        return f"windows-{image.machine}"
    return None
