# Windows on ARM64 (Snapdragon X Elite / X Plus) from an x86_64 host, with zig.
set(CMAKE_SYSTEM_PROCESSOR ARM64)
set(OMNI_EDGE_ZIG_TARGET aarch64-windows-gnu)
include(${CMAKE_CURRENT_LIST_DIR}/zig-windows.cmake)
