"""The host (and qemu-user) device's push: a directory is mirrored, so a re-exported artifact
pushed over an older one leaves none of the older files (the controller refuses files its
manifest does not list), and nothing is deleted through a symlinked remote directory."""

from __future__ import annotations

from pathlib import Path

from omni_edge.harness.devices.host import HostDevice


def test_a_pushed_directory_is_mirrored(tmp_path: Path) -> None:
    device = HostDevice(tmp_path / "device")
    src = tmp_path / "component"
    src.mkdir()
    for name in ("manifest.json", "decode_s256.onnx", "prefill_s256.onnx"):
        (src / name).write_text(name)
    remote = f"{device.workdir}/artifacts/thinker-onnx"
    assert len(device.push(src, remote).sent) == 3

    for name in ("decode_s256.onnx", "prefill_s256.onnx"):  # re-exported with other buckets
        (src / name).unlink()
    (src / "decode_s512.onnx").write_text("512")
    again = device.push(src, remote)
    assert again.sent == [f"{remote}/decode_s512.onnx"] and again.skipped == [f"{remote}/manifest.json"]
    assert again.removed == [f"{remote}/decode_s256.onnx", f"{remote}/prefill_s256.onnx"]
    assert sorted(p.name for p in Path(remote).iterdir()) == ["decode_s512.onnx", "manifest.json"]


def test_nothing_is_deleted_through_a_symlinked_remote_directory(tmp_path: Path) -> None:
    device = HostDevice(tmp_path / "device")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the device's")
    remote = Path(device.workdir) / "artifacts" / "thinker-onnx"
    remote.parent.mkdir(parents=True)
    remote.symlink_to(outside, target_is_directory=True)
    src = tmp_path / "component"
    src.mkdir()
    (src / "manifest.json").write_text("{}")
    report = device.push(src, str(remote))
    assert report.removed == [] and (outside / "keep.txt").read_text() == "not the device's"
