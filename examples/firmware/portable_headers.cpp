// Every portable header (hedge/hedge.hpp includes all but hedge/os/) compiled for the
// Cortex-M7 with the firmware flags: the image links only what main.cpp uses, this
// proves the rest of the profile builds too.
#include "hedge/hedge.hpp"
