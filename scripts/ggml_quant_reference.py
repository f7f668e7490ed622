#!/usr/bin/env python3
"""Bytes of ggml's own reference quantizers, for tests/quant/ggml_reference_test.cpp.

Calls quantize_row_<type>_ref in the libggml-base.so that node-llama-cpp 3.22.1 ships
(a baseline x86-64 build: no FMA instructions, so no contraction) through ctypes, on
inputs made here, and prints one line per case:

    <type> <case> <input: float32 little-endian, hex> <ggml's blocks, hex> <dequantize_row_<type> of them, hex>

Run through scripts/llama_cpp_peer.sh, which installs the package:

    scripts/llama_cpp_peer.sh quant-reference > tests/quant/data/ggml_quant_reference.txt
"""
import ctypes
import math
import random
import struct
import sys

# type: (elements per block, bytes per block)
FORMATS = {
    'q8_0': (32, 34), 'q4_0': (32, 18), 'q5_0': (32, 22), 'q5_1': (32, 24),
    'q4_K': (256, 144), 'q5_K': (256, 176), 'q6_K': (256, 210), 'q8_K': (256, 292),
}


def f32(x):
    return struct.unpack('<f', struct.pack('<f', x))[0]


def lcg(seed, n, scale_shift=18):
    """Integers from an LCG scaled by 2^-scale_shift (exact in binary32)."""
    out, s = [], seed
    for _ in range(n):
        s = (s * 1103515245 + 12345) & 0x7FFFFFFF
        out.append(float((s % 2000001) - 1000000) / (1 << scale_shift))
    return out


def gaussian(seed, n, sigma):
    rng = random.Random(seed)
    return [f32(rng.gauss(0.0, sigma)) for _ in range(n)]


def shaped_32(seed):
    """Eight 32-blocks that reach each branch of the 32-block quantizers."""
    x = lcg(seed, 256)
    x[0:32] = [0.0] * 32                                   # all zero
    x[32:64] = [0.75] * 32                                 # constant
    x[64:96] = [abs(v) + 0.25 for v in x[64:96]]           # all positive: max is the largest
    x[96:128] = [-abs(v) for v in x[96:128]]               # all negative
    x[128:160] = [1.5 if i % 2 else -1.5 for i in range(32)]  # a tie between signs: first wins
    x[160 + 7] = 300.0                                     # an outlier
    x[192:224] = [v * 2.0 ** -40 for v in x[192:224]]      # tiny
    x[224:256] = [float(i - 16) for i in range(32)]        # exact levels
    return [f32(v) for v in x]


def shaped_256(seed):
    """Two 256-blocks whose sub-blocks reach each branch of the K-quant searches."""
    x = lcg(seed, 512)
    x[64:96] = [abs(v) + 0.25 for v in x[64:96]]           # fitted min clamps to 0
    x[160:192] = [0.0] * 32                                # max == min
    x[200] = 100.0                                         # its scale sets d
    x[48:64] = [0.0] * 16                                  # a zero 16-sub-block (Q6_K)
    x[112:128] = [-abs(v) for v in x[112:128]]
    x[144:160] = [0.75] * 16
    x[224:240] = [1.5 if i % 2 else -1.5 for i in range(16)]
    x[256:512] = [v * 2.0 ** -40 for v in x[256:512]]      # a block whose d rounds to fp16 zero
    return [f32(v) for v in x]


def cases(block):
    n = 256 if block == 32 else 512
    yield 'lcg', lcg(101, n)
    yield 'gauss', gaussian(102, n, 0.02)
    yield 'wide', gaussian(103, n, 300.0)
    yield 'shaped', shaped_32(104) if block == 32 else shaped_256(104)


def main():
    if len(sys.argv) != 2:
        sys.exit('usage: ggml_quant_reference.py libggml-base.so')
    lib = ctypes.CDLL(sys.argv[1])
    print('# ggml reference quantizer bytes: scripts/ggml_quant_reference.py (node-llama-cpp 3.22.1, '
          'quantize_row_<type>_ref)')
    print('# <type> <case> <input float32 hex> <blocks hex> <dequantized float32 hex>')
    for name, (block, size) in FORMATS.items():
        quantize = getattr(lib, f'quantize_row_{name}_ref')
        quantize.restype = None
        quantize.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        dequantize = getattr(lib, f'dequantize_row_{name}')
        dequantize.restype = None
        dequantize.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        for case, values in cases(block):
            n = len(values)
            src = (ctypes.c_float * n)(*values)
            dst = (ctypes.c_uint8 * (n // block * size))()
            back = (ctypes.c_float * n)()
            quantize(src, dst, n)
            dequantize(dst, back, n)
            print(name.lower(), case, bytes(src).hex(), bytes(dst).hex(), bytes(back).hex())


if __name__ == '__main__':
    main()
