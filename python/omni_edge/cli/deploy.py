"""`omni-edge devices`, `push` and `bundle`: the devices this host reaches (host, ADB serials,
qemu) and their facts; a plan, its artifacts and a runtime laid out on one and verified there;
a runtime cross-built for a device."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from omni_edge.cli import flags
from omni_edge.harness.devices.base import DeviceError


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("devices", help="list reachable devices (host + ADB) with their facts, one JSON line each")
    flags.adb(p)
    p.set_defaults(func=devices)

    p = sub.add_parser("push", help="lay out binary, libraries, artifacts and plan on a device and verify there")
    flags.device(p, required=True)
    p.add_argument("--artifact", type=Path, help="an export directory (with plan.json)")
    p.add_argument("--plan-name", default="plan.json")
    p.add_argument("--app", action="store_true", help="for the Android app: artifacts and plan only, into "
                   "/sdcard/Android/data/PACKAGE/files/NAME/ (--workdir overrides the files directory)")
    p.add_argument("--app-package", default="dev.omniedge.app")
    p.add_argument("--install", type=Path, metavar="APK", help="with --app: install this APK first (adb install -r -t)")
    deployment(p)
    p.set_defaults(func=push)

    p = sub.add_parser("bundle", help="cross-build the controller for a device: binary, runtime libraries, bundle.json")
    p.add_argument("--target", required=True, choices=["linux-aarch64", "windows-arm64", "windows-x64", "android-arm64"])
    p.add_argument("--out", type=Path, required=True, help="the bundle directory (replaced whole)")
    p.add_argument("--plan", type=Path, default=None, help="also carry this plan and every artifact it names")
    p.add_argument("--tests", action="store_true", help="also build the C++ unit tests for the target (in build/targets/)")
    p.add_argument("--build-type", choices=["Release", "RelWithDebInfo", "Debug"], default="Release")
    p.set_defaults(func=bundle)


def deployment(p: argparse.ArgumentParser) -> None:
    """How push and profile lay a plan out on the device: the runtime, its ABI, the directory."""
    flags.runtime(p)
    p.add_argument("--runtime-abi", default=None, help="the ABI --runtime must have (read from its binary; mismatch = error)")
    p.add_argument("--name", default=None, help="deployment directory name on the device")


def device_of(args: argparse.Namespace) -> Any:
    """The device the command names (--device), reached as the flags say."""
    from omni_edge.harness.devices import open_device

    return open_device(args.device, adb_host=args.adb_host, adb_port=args.adb_port,
                       workdir=getattr(args, "workdir", None))


def runtime_of(args: argparse.Namespace) -> Any:
    from omni_edge.harness.deploy.deploy import runtime_from_dir

    if args.runtime is None:
        return None
    return runtime_from_dir(args.runtime, args.runtime_abi)  # deploy compares it with the device's ABI


def devices(args: argparse.Namespace) -> int:
    from omni_edge.harness.devices.adb import list_devices

    try:
        serials = list_devices(host=args.adb_host, port=args.adb_port)
    except DeviceError as exc:
        print(f"adb: {exc}", file=sys.stderr)
        serials = []
    for name in ["host", *serials]:
        args.device = name
        try:
            facts = device_of(args).facts()
            print(json.dumps(facts.to_dict()))
        except DeviceError as exc:
            print(json.dumps({"serial": name, "error": str(exc)}))
    return 0


def _push_app(args: argparse.Namespace) -> int:
    from omni_edge.harness.deploy import app

    if args.install is None and args.artifact is None:
        print("omni-edge push --app: give --artifact ART, --install APK, or both", file=sys.stderr)
        return 2
    try:
        device = device_of(args)
        if device.kind != "adb":
            raise DeviceError(f"--app needs a phone (an ADB serial), not '{args.device}'")
        if args.install is not None:
            print(json.dumps(app.install_apk(device, args.install)))
        if args.artifact is not None:
            plan = args.artifact / args.plan_name if args.artifact.is_dir() else args.artifact
            print(json.dumps(app.push_to_app(device, plan, name=args.name, package=args.app_package,
                                             root=args.workdir)))
    except (DeviceError, OSError, ValueError) as exc:
        print(f"omni-edge push --app: {exc}", file=sys.stderr)
        return 1
    return 0


def push(args: argparse.Namespace) -> int:
    from omni_edge.harness.deploy.deploy import deploy, verify_on_target

    if args.app:
        return _push_app(args)
    if args.install is not None or args.artifact is None:
        print("omni-edge push: --artifact is required (--install goes with --app)", file=sys.stderr)
        return 2
    try:
        device = device_of(args)
        d = deploy(device, args.artifact, plan_name=args.plan_name, name=args.name, runtime=runtime_of(args))
        verified = verify_on_target(d)
    except (DeviceError, OSError, ValueError) as exc:
        print(f"omni-edge push: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({**d.to_dict(), "verified": [{"component": v["manifest"]["component"],
                                                   "qualified": v["qualified"]} for v in verified]}))
    return 0


def bundle(args: argparse.Namespace) -> int:
    from omni_edge.harness.deploy.bundle import BundleError, build_bundle, verify_bundle

    def progress(step: str) -> None:
        print(f"[bundle] {step}", file=sys.stderr)

    try:
        manifest = build_bundle(args.target, args.out, plan=args.plan, tests=args.tests, build_type=args.build_type,
                                progress=progress)
        report = verify_bundle(args.out)
    except (BundleError, DeviceError, OSError) as exc:
        print(f"omni-edge bundle: {exc}", file=sys.stderr)
        return 2
    size = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(json.dumps({k: v for k, v in manifest.items() if k != "files"} | {"out": str(args.out), "files": report["files"],
                                                                            "bytes": size}))
    return 0
