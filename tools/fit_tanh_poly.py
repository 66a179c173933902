#!/usr/bin/env python3
"""Derives the coefficients of the odd polynomial for tanh(x), |x| < 0.8, in
codegen/cpu/float_math.cc (tanh_f32): tanh(x) = x + x^3 P(x^2), P of degree DEGREE. Needs
numpy; not part of the build.

A fit for least maximum relative error (weighted least squares, reweighted by the error:
Lawson's algorithm) on a dense grid, then the worst ulp error of the whole tanh_f32 as the
CPU code evaluates it in float (this polynomial below the threshold, 1 - 2 / (e^(2|x|) + 1)
above it with a correctly rounded e^y standing in for exp_f32), over a sweep.

    python3 tools/fit_tanh_poly.py      # prints the coefficients and the worst ulp error
"""
import numpy as np

F32 = np.float32
DEGREE = 5
THRESHOLD = 0.8


def lawson_fit(degree, iterations=400):
    x = np.linspace(1e-4, THRESHOLD * 1.001, 20001)
    t = np.tanh(x)
    u = x * x
    a = np.stack([x**3 * u**k for k in range(degree + 1)], 1) / t[:, None]
    b = (t - x) / t
    w = np.full(len(x), 1.0 / len(x))
    for _ in range(iterations):
        s = np.sqrt(w)
        c, *_ = np.linalg.lstsq(a * s[:, None], b * s, rcond=None)
        w *= np.abs(a @ c - b)
        w /= w.sum()
    return c, np.max(np.abs(a @ c - b))


def tanh_f32(x, c):
    x = x.astype(F32)
    ax = np.abs(x)
    u = ax * ax
    p = F32(c[-1])
    for k in reversed(c[:-1]):
        p = (p * u + F32(k)).astype(F32)
    small = (ax + ax * u * p).astype(F32)
    e = np.exp((2 * ax).astype(np.float64)).astype(F32)
    big = (F32(1) - F32(2) / (e + F32(1))).astype(F32)
    return np.copysign(np.where(ax < F32(THRESHOLD), small, big), x)


def ulps(got, want):
    w = want.astype(F32)
    ulp = np.maximum(np.spacing(np.abs(w)), np.finfo(F32).smallest_subnormal)
    return np.abs(got.astype(np.float64) - want) / ulp


def main():
    c, rel = lawson_fit(DEGREE)
    c32 = [float(F32(v)) for v in c]
    xs = np.concatenate([np.linspace(-12, 12, 2000001), np.geomspace(1e-30, 1, 100001)]).astype(F32)
    worst = np.max(ulps(tanh_f32(xs, c32), np.tanh(xs.astype(np.float64))))
    print("coefficients of P (u = x^2, ascending):", ", ".join(repr(v) for v in c32))
    print("fit's relative error: %.3g; worst error of tanh_f32 over the sweep: %.3f ulp" % (rel, worst))


main()
