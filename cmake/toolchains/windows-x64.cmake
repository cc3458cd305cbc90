# Windows x64 from an x86_64 Linux host, with zig (runs here under wine64 where installed).
set(CMAKE_SYSTEM_PROCESSOR AMD64)
set(OMNI_EDGE_ZIG_TARGET x86_64-windows-gnu)
include(${CMAKE_CURRENT_LIST_DIR}/zig-windows.cmake)
