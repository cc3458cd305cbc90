# Linux aarch64 (Snapdragon boards running Linux: SA8775P ADP, RB3 Gen 2) from an x86_64 host
# with Debian's g++-aarch64-linux-gnu. Headers-only dependencies (nlohmann_json) come from the
# host; the ONNX Runtime and QNN libraries are loaded at run time from the bundle's lib/.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(OMNI_EDGE_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${OMNI_EDGE_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${OMNI_EDGE_TRIPLE}-g++)
set(CMAKE_FIND_ROOT_PATH /usr/${OMNI_EDGE_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
# ctest and gtest discovery run the aarch64 binaries under qemu-user.
find_program(OMNI_EDGE_QEMU NAMES qemu-aarch64-static qemu-aarch64)
if(OMNI_EDGE_QEMU)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${OMNI_EDGE_QEMU} -L /usr/${OMNI_EDGE_TRIPLE})
endif()
