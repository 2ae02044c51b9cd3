#!/usr/bin/env python3
"""Coefficients of the CPU backend's vector erf (codegen/cpu_prelude.cpp, tt_verf).

erf on [0, 4) in 16 intervals [i/4, (i+1)/4), each a degree-5 polynomial in t = a - i/4,
interpolated at Chebyshev nodes (near-minimax). Interval 0 fits (erf(t) - t) / t, evaluated as
t + t q(t), so that the result keeps its relative accuracy near 0. Prints the six tables in C and
the largest error (in ulps of the exact value) of a float32 emulation of the kernel's Horner
scheme with fused multiply-adds; tests/codegen/test_vector_math.cpp measures the compiled one.

    python3 scripts/fit_erf.py
"""
import math
import random
import struct

DEGREE, INTERVALS, WIDTH = 5, 16, 0.25


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def solve(a, b):
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c:
                k = m[r][c] / m[c][c]
                for j in range(c, n + 1):
                    m[r][j] -= k * m[c][j]
    return [m[i][n] / m[i][i] for i in range(n)]


def interpolate(g, degree, lo, hi):
    nodes = [(lo + hi) / 2 + (hi - lo) / 2 * math.cos((2 * k + 1) * math.pi / (2 * (degree + 1)))
             for k in range(degree + 1)]
    return solve([[t ** j for j in range(degree + 1)] for t in nodes], [g(t) for t in nodes])


def tables():
    coef = []
    for i in range(INTERVALS):
        if i == 0:
            q = interpolate(lambda t: (math.erf(t) - t) / t if t else 2 / math.sqrt(math.pi) - 1,
                            DEGREE - 1, 0, WIDTH)
            c = [0.0] + q
        else:
            c = interpolate(lambda t, m=i * WIDTH: math.erf(m + t), DEGREE, 0, WIDTH)
        coef.append([f32(v) for v in c])
    return coef


def evaluate(coef, a):
    """The kernel's steps in float32 (a product of floats is exact in a double: one rounding)."""
    if a >= 4:
        return 1.0
    i = min(int(a * 4), INTERVALS - 1)
    t = f32(a - i * WIDTH)
    c = coef[i]
    p = c[DEGREE]
    for j in range(DEGREE - 1, 0, -1):
        p = f32(p * t + c[j])
    return f32(p * t + (t if i == 0 else c[0]))


def c_float(v):
    text = "%.9g" % v
    return text + ("f" if "." in text or "e" in text else ".0f")


def ulps(y, exact):
    r = abs(f32(exact))
    if r == 0:
        return 0.0 if y == 0 else math.inf
    bits = struct.unpack("I", struct.pack("f", r))[0]
    ulp = struct.unpack("f", struct.pack("I", bits + 1))[0] - r
    return abs(y - exact) / ulp


def main():
    coef = tables()
    random.seed(1)
    inputs = [f32(random.uniform(0, 4.2)) for _ in range(200000)]
    inputs += [f32(s * 2.0 ** k) for k in range(-140, 3) for s in (1.0, 1.3, 1.7)]
    worst = max(ulps(evaluate(coef, a), math.erf(a)) for a in inputs)
    for j in range(DEGREE + 1):
        values = ", ".join(c_float(coef[i][j]) for i in range(INTERVALS))
        print("static const float tt_erf_c%d[16] __attribute__((aligned(64))) = {%s};" % (j, values))
    print("// largest error of the float32 emulation: %.2f ulp of the exact value" % worst)


if __name__ == "__main__":
    main()
