// examples/firmware/model_flash.cpp: the model's GGUF bytes in flash, as they are on disk:
// the file hedge-quantize wrote at build time (CMakeLists.txt), included by the assembler
// into a read-only section of its own, 64-byte aligned, between two symbols. The image
// reads it with the same GGUF reader and weight loader as a host reads a mapped file.
#include <cstddef>

#include "model_flash.hpp"

asm(".section .rodata.hedge_model, \"a\", %progbits\n"
    ".balign 64\n"
    ".global hedge_model_gguf\n"
    "hedge_model_gguf:\n"
    ".incbin \"" HEDGE_FIRMWARE_MODEL_FILE "\"\n"
    ".global hedge_model_gguf_end\n"
    "hedge_model_gguf_end:\n"
    ".previous\n");
