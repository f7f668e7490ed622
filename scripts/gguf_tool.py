#!/usr/bin/env python3
"""Small GGUF utilities for scripts/llama_cpp_quantize_check.sh (standard library only).

    gguf_tool.py compare A.gguf B.gguf     every tensor's type and bytes, by name; exit 1 on a difference
    gguf_tool.py types FILE.gguf           one line per tensor: name, type id
    gguf_tool.py widen IN.gguf OUT.gguf    a llama model with IN's metadata and vocabulary, dim 256,
                                           hidden 512, 4 layers, 8 heads, 4 KV heads, random F32 weights:
                                           rows that are whole 256-blocks, so the K-quant mixes use
                                           their own types (stories260K's 64-wide rows fall back)
"""
import random
import struct
import sys

# GGUF value types with a fixed size (gguf.h): uint8 .. float64, bool
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9
# type id: (block elements, block bytes), the types these scripts meet
TYPES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 6: (32, 22), 7: (32, 24), 8: (32, 34), 12: (256, 144),
         13: (256, 176), 14: (256, 210), 30: (1, 2)}


class Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, fmt):
        value = struct.unpack_from('<' + fmt, self.data, self.at)
        self.at += struct.calcsize('<' + fmt)
        return value[0]

    def string(self):
        n = self.take('Q')
        s = self.data[self.at:self.at + n].decode('utf-8')
        self.at += n
        return s

    def skip_value(self, vtype):
        if vtype in FIXED:
            self.at += FIXED[vtype]
        elif vtype == STRING:
            self.string()
        elif vtype == ARRAY:
            etype, count = self.take('I'), self.take('Q')
            for _ in range(count):
                self.skip_value(etype)
        else:
            raise ValueError(f'unknown GGUF value type {vtype}')


def parse(path):
    """(metadata: list of (key, raw bytes of type + value), tensors: dict name -> (type, dims, bytes))"""
    data = open(path, 'rb').read()
    r = Reader(data)
    if r.take('I') != 0x46554747:
        raise ValueError(f'{path}: not GGUF')
    r.take('I')  # version
    n_tensors, n_kv = r.take('Q'), r.take('Q')
    metadata, alignment = [], 32
    for _ in range(n_kv):
        key = r.string()
        start = r.at
        vtype = r.take('I')
        if key == 'general.alignment':
            alignment = struct.unpack_from('<I', data, r.at)[0]
        r.skip_value(vtype)
        metadata.append((key, data[start:r.at]))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.take('Q') for _ in range(r.take('I'))]
        infos.append((name, dims, r.take('I'), r.take('Q')))
    base = (r.at + alignment - 1) // alignment * alignment
    tensors = {}
    for name, dims, ttype, offset in infos:
        elements = 1
        for d in dims:
            elements *= d
        block, size = TYPES[ttype]
        tensors[name] = (ttype, dims, data[base + offset:base + offset + elements // block * size])
    return metadata, tensors


def gguf_string(s):
    b = s.encode('utf-8')
    return struct.pack('<Q', len(b)) + b


def write(path, metadata, tensors):
    """metadata: (key, raw type + value bytes); tensors: (name, dims, type, bytes)."""
    out = bytearray(struct.pack('<IIQQ', 0x46554747, 3, len(tensors), len(metadata)))
    for key, raw in metadata:
        out += gguf_string(key) + raw
    offset = 0
    for name, dims, ttype, data in tensors:
        out += gguf_string(name) + struct.pack('<I', len(dims)) + b''.join(struct.pack('<Q', d) for d in dims)
        out += struct.pack('<IQ', ttype, offset)
        offset += (len(data) + 31) // 32 * 32
    out += bytes(-len(out) % 32)
    for _, _, _, data in tensors:
        out += data + bytes(-len(data) % 32)
    open(path, 'wb').write(out)


def compare(a, b):
    _, ta = parse(a)
    _, tb = parse(b)
    bad = 0
    for name in sorted(set(ta) | set(tb)):
        if name not in ta or name not in tb:
            print(f'{name}: only in {a if name in ta else b}')
            bad += 1
        elif ta[name][0] != tb[name][0]:
            print(f'{name}: type {ta[name][0]} vs {tb[name][0]}')
            bad += 1
        elif ta[name][2] != tb[name][2]:
            same = sum(x == y for x, y in zip(ta[name][2], tb[name][2]))
            print(f'{name}: type {ta[name][0]}, bytes differ ({same} of {len(ta[name][2])} equal)')
            bad += 1
    print(f'{len(ta)} tensors compared, {bad} differ')
    return 1 if bad else 0


def widen(src, dst):
    metadata, tensors = parse(src)
    dim, hidden, layers, heads, kv_heads = 256, 512, 4, 8, 4
    vocab = tensors['token_embd.weight'][1][1]
    u32 = lambda v: struct.pack('<II', 4, v)
    shape = {'llama.embedding_length': u32(dim), 'llama.feed_forward_length': u32(hidden),
             'llama.block_count': u32(layers), 'llama.attention.head_count': u32(heads),
             'llama.attention.head_count_kv': u32(kv_heads), 'llama.rope.dimension_count': u32(dim // heads),
             'general.file_type': u32(0)}
    metadata = [(k, shape.get(k, raw)) for k, raw in metadata]
    rng = random.Random(2026)

    def matrix(cols, rows, sigma):
        return struct.pack(f'<{cols * rows}f', *(rng.gauss(0.0, sigma) for _ in range(cols * rows)))

    def ones(n):
        return struct.pack(f'<{n}f', *([1.0] * n))

    kv = dim // heads * kv_heads
    out = [('token_embd.weight', [dim, vocab], 0, matrix(dim, vocab, 1.0))]
    for i in range(layers):
        p = f'blk.{i}.'
        out += [(p + 'attn_norm.weight', [dim], 0, ones(dim)),
                (p + 'attn_q.weight', [dim, dim], 0, matrix(dim, dim, 0.1)),
                (p + 'attn_k.weight', [dim, kv], 0, matrix(dim, kv, 0.1)),
                (p + 'attn_v.weight', [dim, kv], 0, matrix(dim, kv, 0.1)),
                (p + 'attn_output.weight', [dim, dim], 0, matrix(dim, dim, 0.05)),
                (p + 'ffn_norm.weight', [dim], 0, ones(dim)),
                (p + 'ffn_gate.weight', [dim, hidden], 0, matrix(dim, hidden, 0.1)),
                (p + 'ffn_down.weight', [hidden, dim], 0, matrix(hidden, dim, 0.05)),
                (p + 'ffn_up.weight', [dim, hidden], 0, matrix(dim, hidden, 0.1))]
    out += [('output_norm.weight', [dim], 0, ones(dim)), ('output.weight', [dim, vocab], 0, matrix(dim, vocab, 0.1))]
    write(dst, metadata, out)


def main():
    args = sys.argv[1:]
    if len(args) == 3 and args[0] == 'compare':
        sys.exit(compare(args[1], args[2]))
    if len(args) == 2 and args[0] == 'types':
        for name, (ttype, _, _) in parse(args[1])[1].items():
            print(name, ttype)
        return
    if len(args) == 3 and args[0] == 'widen':
        widen(args[1], args[2])
        return
    sys.exit(__doc__)


if __name__ == '__main__':
    main()
