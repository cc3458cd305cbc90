# Windows through zig (ziglang from PyPI): clang + mingw-w64 headers and import libraries for
# the target, no Windows SDK needed. Included by windows-arm64.cmake / windows-x64.cmake after
# they set OMNI_EDGE_ZIG_TARGET. OMNI_EDGE_ZIG names the zig executable (default: zig on PATH).
set(CMAKE_SYSTEM_NAME Windows)
set(OMNI_EDGE_ZIG "" CACHE FILEPATH "The zig executable (pip install ziglang: site-packages/ziglang/zig)")
if(NOT OMNI_EDGE_ZIG)
  find_program(OMNI_EDGE_ZIG_FOUND zig REQUIRED)
  set(OMNI_EDGE_ZIG "${OMNI_EDGE_ZIG_FOUND}")
endif()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES OMNI_EDGE_ZIG OMNI_EDGE_ZIG_TARGET)

# CMake wants one executable per tool: small wrappers that call zig with the target.
set(_wrappers "${CMAKE_BINARY_DIR}/zig-${OMNI_EDGE_ZIG_TARGET}")
foreach(_tool cc c++ ar ranlib rc)
  if(_tool STREQUAL "cc" OR _tool STREQUAL "c++")
    # -O2 first (the build's own flags come after it): zig builds its C++ runtime for the
    # target in the optimize mode of the first link that needs it, and CMake's compiler
    # identification links without -O; with -O2 there, the runtime is built once, not twice.
    set(_args "${_tool} -target ${OMNI_EDGE_ZIG_TARGET} -O2")
  else()
    set(_args "${_tool}")
  endif()
  file(WRITE "${_wrappers}/${_tool}" "#!/bin/sh\nexec \"${OMNI_EDGE_ZIG}\" ${_args} \"$@\"\n")
  file(CHMOD "${_wrappers}/${_tool}" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endforeach()
set(CMAKE_C_COMPILER "${_wrappers}/cc")
set(CMAKE_CXX_COMPILER "${_wrappers}/c++")
set(CMAKE_AR "${_wrappers}/ar" CACHE FILEPATH "" FORCE)
set(CMAKE_RANLIB "${_wrappers}/ranlib" CACHE FILEPATH "" FORCE)
set(CMAKE_RC_COMPILER "${_wrappers}/rc")

# Configure checks compile without linking: a linked check would make zig build its C++ runtime
# for the target once more, in the checks' debug mode (minutes, on 2 cores).
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
