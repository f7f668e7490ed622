#!/usr/bin/env python3
"""Independent float32 model of ggml's reference quantizers (Q8_0, Q4_0, Q4_K,
Q6_K, Q8_K), used to produce the golden bytes in golden_test.cpp.

Python floats are binary64; rounding each +, -, *, /, sqrt result of binary32
operands to binary32 gives the correctly rounded binary32 result (53 >= 2*24+2),
so this is an exact model of the C code compiled without FP contraction.
Inputs come from an integer LCG scaled by 2^-18, exact in binary32, so the C++
test regenerates the same floats. Run: python3 tests/quant/golden_gen.py
"""
import math
import struct


def f32(x):
    return struct.unpack('<f', struct.pack('<f', x))[0]


def f16_bits(x):
    return struct.unpack('<H', struct.pack('<e', x))[0]


def f16_val(bits):
    return struct.unpack('<e', struct.pack('<H', bits))[0]


def nearest_int(x):  # ggml's magic-number rounding (ties to even)
    v = f32(x + 12582912.0)
    i = struct.unpack('<I', struct.pack('<f', v))[0]
    return (i & 0x007FFFFF) - 0x00400000


def inputs(seed, n, scale_shift=18):
    out = []
    s = seed
    for _ in range(n):
        s = (s * 1103515245 + 12345) & 0x7FFFFFFF
        out.append(float((s % 2000001) - 1000000) / (1 << scale_shift))
    return out


def q8_0(x):
    amax = 0.0
    for v in x:
        amax = max(amax, abs(v))
    d = f32(amax / 127.0)
    inv = f32(1.0 / d) if d else 0.0
    qs = []
    for v in x:
        t = f32(v * inv)
        qs.append(int(math.copysign(math.floor(abs(t) + 0.5), t)) & 0xFF)
    return struct.pack('<H', f16_bits(d)) + bytes(qs)


def q4_0(x):
    amax = 0.0
    mx = 0.0
    for v in x:
        if amax < abs(v):
            amax = abs(v)
            mx = v
    d = f32(mx / -8.0)
    inv = f32(1.0 / d) if d else 0.0
    qs = []
    for j in range(16):
        lo = min(15, int(f32(f32(x[j] * inv) + 8.5)))
        hi = min(15, int(f32(f32(x[j + 16] * inv) + 8.5)))
        qs.append(lo | hi << 4)
    return struct.pack('<H', f16_bits(d)) + bytes(qs)


def make_qkx2(x, w, nmax=15, rmin=-1.0, rdelta=0.1, nstep=20):
    n = len(x)
    rdelta = f32(rdelta)
    mn = x[0]
    mx = x[0]
    sum_w = w[0]
    sum_x = f32(sum_w * x[0])
    for i in range(1, n):
        if x[i] < mn:
            mn = x[i]
        if x[i] > mx:
            mx = x[i]
        sum_w = f32(sum_w + w[i])
        sum_x = f32(sum_x + f32(w[i] * x[i]))
    if mn > 0:
        mn = 0.0
    if mx == mn:
        return 0.0, -mn, [0] * n
    iscale = f32(nmax / f32(mx - mn))
    scale = f32(1.0 / iscale)
    L = []
    best = 0.0
    for i in range(n):
        l = max(0, min(nmax, nearest_int(f32(iscale * f32(x[i] - mn)))))
        L.append(l)
        diff = f32(f32(f32(scale * l) + mn) - x[i])
        diff = f32(diff * diff)
        best = f32(best + f32(w[i] * diff))
    for step in range(nstep + 1):
        iscale = f32(f32(f32(rmin + f32(rdelta * step)) + nmax) / f32(mx - mn))
        sl = sl2 = sxl = 0.0
        aux = []
        for i in range(n):
            l = max(0, min(nmax, nearest_int(f32(iscale * f32(x[i] - mn)))))
            aux.append(l)
            wl = f32(w[i] * l)
            sl = f32(sl + wl)
            sl2 = f32(sl2 + f32(wl * l))
            sxl = f32(sxl + f32(wl * x[i]))
        D = f32(f32(sum_w * sl2) - f32(sl * sl))
        if D > 0:
            ts = f32(f32(f32(sum_w * sxl) - f32(sum_x * sl)) / D)
            tm = f32(f32(f32(sl2 * sum_x) - f32(sl * sxl)) / D)
            if tm > 0:
                tm = 0.0
                ts = f32(sxl / sl2)
            mad = 0.0
            for i in range(n):
                diff = f32(f32(f32(ts * aux[i]) + tm) - x[i])
                diff = f32(diff * diff)
                mad = f32(mad + f32(w[i] * diff))
            if mad < best:
                L = aux
                best = mad
                scale = ts
                mn = tm
    return scale, -mn, L


def q4_k(x):
    L = [0] * 256
    scales = []
    mins = []
    for j in range(8):
        sub = x[32 * j:32 * j + 32]
        sx2 = 0.0
        for v in sub:
            sx2 = f32(sx2 + f32(v * v))
        av = f32(math.sqrt(f32(sx2 / 32.0)))
        w = [f32(av + abs(v)) for v in sub]
        s, m, l = make_qkx2(sub, w)
        scales.append(s)
        mins.append(m)
        L[32 * j:32 * j + 32] = l
    max_scale = max([0.0] + [s for s in scales])
    max_min = max([0.0] + [m for m in mins])
    inv_s = f32(63.0 / max_scale) if max_scale > 0 else 0.0
    inv_m = f32(63.0 / max_min) if max_min > 0 else 0.0
    sc = [0] * 12
    for j in range(8):
        ls = min(63, nearest_int(f32(inv_s * scales[j])) & 0xFF)
        lm = min(63, nearest_int(f32(inv_m * mins[j])) & 0xFF)
        if j < 4:
            sc[j] = ls
            sc[j + 4] = lm
        else:
            sc[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4)
            sc[j - 4] |= (ls >> 4) << 6
            sc[j] |= (lm >> 4) << 6
    d_bits = f16_bits(f32(max_scale / 63.0))
    dmin_bits = f16_bits(f32(max_min / 63.0))
    for j in range(8):
        if j < 4:
            s6, m6 = sc[j] & 63, sc[j + 4] & 63
        else:
            s6 = (sc[j + 4] & 0xF) | ((sc[j - 4] >> 6) << 4)
            m6 = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4)
        d = f32(f16_val(d_bits) * s6)
        if not d:
            continue
        dm = f32(f16_val(dmin_bits) * m6)
        for i in range(32):
            l = nearest_int(f32(f32(x[32 * j + i] + dm) / d))
            L[32 * j + i] = max(0, min(15, l))
    qs = []
    for g in range(4):
        for l in range(32):
            qs.append(L[64 * g + l] | (L[64 * g + 32 + l] << 4))
    return struct.pack('<HH', d_bits, dmin_bits) + bytes(sc) + bytes(qs)


def make_qx(x, nmax=32):
    """ggml's make_qx_quants(n, nmax, x, L, rmse_type=1, qw=NULL): weights x^2."""
    n = len(x)
    amax = 0.0
    mx = 0.0
    for v in x:
        if abs(v) > amax:
            amax = abs(v)
            mx = v
    if amax < f32(1e-15):
        return 0.0, [0] * n

    def levels(iscale):
        return [max(-nmax, min(nmax - 1, nearest_int(f32(iscale * v)))) for v in x]

    def sums(ls):
        slx = sl2 = 0.0
        for v, l in zip(x, ls):
            w = f32(v * v)
            slx = f32(slx + f32(f32(w * v) * l))
            sl2 = f32(sl2 + f32(f32(w * l) * l))
        return slx, sl2

    iscale = f32(-nmax / mx)
    ls = levels(iscale)
    L = [l + nmax for l in ls]
    slx, sl2 = sums(ls)
    scale = f32(slx / sl2) if sl2 else 0.0
    best = f32(scale * slx)
    for step in range(-9, 10):
        if step == 0:
            continue
        iscale = f32(-f32(nmax + f32(f32(0.1) * step)) / mx)
        ls = levels(iscale)
        slx, sl2 = sums(ls)
        if sl2 > 0 and f32(slx * slx) > f32(best * sl2):
            L = [l + nmax for l in ls]
            scale = f32(slx / sl2)
            best = f32(scale * slx)
    return scale, L


def q6_k(x):
    L = [0] * 256
    scales = []
    max_scale = 0.0
    max_abs = 0.0
    for j in range(16):
        s, l = make_qx(x[16 * j:16 * j + 16])
        scales.append(s)
        L[16 * j:16 * j + 16] = l
        if abs(s) > max_abs:
            max_abs = abs(s)
            max_scale = s
    if max_abs < f32(1e-15):
        return bytes(210)
    iscale = f32(-128.0 / max_scale)
    d_bits = f16_bits(f32(1.0 / iscale))
    sc = [min(127, nearest_int(f32(iscale * s))) for s in scales]
    for j in range(16):
        d = f32(f16_val(d_bits) * sc[j])
        if not d:
            continue
        for i in range(16):
            l = nearest_int(f32(x[16 * j + i] / d))
            L[16 * j + i] = max(-32, min(31, l)) + 32
    ql = [0] * 128
    qh = [0] * 64
    for h in range(2):
        for l in range(32):
            e = 128 * h + l
            ql[64 * h + l] = (L[e] & 0xF) | ((L[e + 64] & 0xF) << 4)
            ql[64 * h + 32 + l] = (L[e + 32] & 0xF) | ((L[e + 96] & 0xF) << 4)
            qh[32 * h + l] = ((L[e] >> 4) | ((L[e + 32] >> 4) << 2) | ((L[e + 64] >> 4) << 4) |
                              ((L[e + 96] >> 4) << 6))
    return bytes(ql) + bytes(qh) + bytes(v & 0xFF for v in sc) + struct.pack('<H', d_bits)


def q8_k(x):
    amax = 0.0
    mx = 0.0
    for v in x:
        if abs(v) > amax:
            amax = abs(v)
            mx = v
    iscale = f32(-127.0 / mx)
    qs = [min(127, nearest_int(f32(iscale * v))) for v in x]
    bsums = [sum(qs[16 * g:16 * g + 16]) for g in range(16)]
    return (struct.pack('<f', f32(1.0 / iscale)) + bytes(q & 0xFF for q in qs) +
            struct.pack('<16h', *bsums))


def shaped_q4_k_input(seed):
    """Random values, with sub-block 2 all positive, 5 all zero, 6 an outlier."""
    x = inputs(seed, 256)
    x[64:96] = [abs(v) + 0.25 for v in x[64:96]]
    x[160:192] = [0.0] * 32
    x[200] = 100.0
    return x


def shaped_q6_k_input(seed):
    """Random values, with sub-block 3 all zero, 7 negated (the first largest
    magnitude negative), 9 constant, 12 an outlier that sets d, 14 alternating
    signs of one magnitude (levels clamped at 31)."""
    x = inputs(seed, 256)
    x[48:64] = [0.0] * 16
    x[112:128] = [-abs(v) for v in x[112:128]]
    x[144:160] = [0.75] * 16
    x[200] = -20.0
    x[224:240] = [1.5 if i % 2 else -1.5 for i in range(16)]
    return x


def emit(name, data):
    print('// %s' % name)
    hexs = data.hex()
    for i in range(0, len(hexs), 96):
        print('"%s"' % hexs[i:i + 96])


if __name__ == '__main__':
    emit('q8_0 seed 1', q8_0(inputs(1, 32)))
    emit('q4_0 seed 2', q4_0(inputs(2, 32)))
    emit('q4_k seed 3', q4_k(inputs(3, 256)))
    emit('q4_k shaped seed 4', q4_k(shaped_q4_k_input(4)))
    emit('q8_k seed 5', q8_k(inputs(5, 256)))
    emit('q6_k seed 6', q6_k(inputs(6, 256)))
    emit('q6_k shaped seed 7', q6_k(shaped_q6_k_input(7)))
    emit('q6_k tiny seed 8', q6_k(inputs(8, 256, scale_shift=60)))
