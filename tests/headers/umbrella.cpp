// The umbrella header alone, for a target the host build does not cover: baseline
// ARMv8-A, where the dot-product kernels must still compile, under a target attribute
// (tests/CMakeLists.txt runs it through aarch64 g++ and clang++).
#include "hedge/hedge.hpp"
