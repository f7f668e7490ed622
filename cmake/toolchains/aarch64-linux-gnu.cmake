# Cross-compiling for 64-bit Arm Linux with Debian's g++-aarch64-linux-gnu. Usage:
#   cmake -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake ...
include(${CMAKE_CURRENT_LIST_DIR}/aarch64-linux-common.cmake)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
