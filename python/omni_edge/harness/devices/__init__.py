"""Targets the harness deploys to and profiles on: the host, ADB devices, an emulated aarch64 target."""

from __future__ import annotations

from omni_edge.harness.devices.base import Device, DeviceError


def open_device(name: str, *, adb_host: str = "127.0.0.1", adb_port: int = 5037, workdir: str | None = None) -> Device:
    """`host`, `qemu-aarch64`, or an ADB serial (resolved through the ADB server).

    `workdir` is where deployments live on the target (default: ~/.cache/omni-edge/<kind> on
    this machine, /data/local/tmp/omni-edge on a phone)."""
    if name == "host":
        from omni_edge.harness.devices.host import HostDevice

        return HostDevice(workdir)
    if name == "qemu-aarch64":
        from omni_edge.harness.devices.qemu import QemuDevice

        return QemuDevice(workdir)
    from omni_edge.harness.devices.adb import AdbDevice

    if workdir is None:
        return AdbDevice(name, host=adb_host, port=adb_port)
    return AdbDevice(name, host=adb_host, port=adb_port, workdir=workdir)


__all__ = ["Device", "DeviceError", "open_device"]
