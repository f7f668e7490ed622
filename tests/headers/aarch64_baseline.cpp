// The umbrella header for a baseline ARMv8-A target (NEON without the dot-product
// extension): the dot-product kernels must still compile, under a target attribute
// (tests/CMakeLists.txt runs this through clang++ --target=aarch64-linux-gnu).
#include "hedge/hedge.hpp"
