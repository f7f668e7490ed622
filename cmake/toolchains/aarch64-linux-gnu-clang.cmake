# Cross-compiling for 64-bit Arm Linux with clang++ (--target=aarch64-linux-gnu),
# using the headers and libraries of Debian's g++-aarch64-linux-gnu. Pick the
# clang with -DCMAKE_CXX_COMPILER=clang++-22 (default: clang++). Usage:
#   cmake -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu-clang.cmake ...
include(${CMAKE_CURRENT_LIST_DIR}/aarch64-linux-common.cmake)
if(NOT CMAKE_CXX_COMPILER)
  set(CMAKE_CXX_COMPILER clang++)
endif()
set(CMAKE_CXX_COMPILER_TARGET aarch64-linux-gnu)
