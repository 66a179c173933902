#!/usr/bin/env python3
"""Derives the coefficients of the degree-6 polynomial for e^r, |r| <= ln 2 / 2, in
codegen/cpu/float_math.cc (exp_f32). Needs numpy; not part of the build.

1. A fit for least maximum relative error, with p(0) = 1 exactly (so that e^0 = 1, which
   softmax's largest element relies on): weighted least squares, reweighted by the error
   (Lawson's algorithm), on a dense grid.
2. Its coefficients rounded to float, then nudged a few ulps at a time while that lowers
   the worst ulp error of exp_f32 as the CPU code evaluates it (float fused multiply-adds,
   the same range reduction and scaling), over random points of [-104, 89].

    python3 tools/fit_exp_poly.py      # prints the coefficients and the worst ulp error
"""
import numpy as np

F32 = np.float32
DEGREE = 6


def lawson_fit(degree, iterations=300):
    half = np.log(2) / 2
    r = np.linspace(-half * 1.0005, half * 1.0005, 20001)
    e = np.exp(r)
    a = np.stack([r**k for k in range(1, degree + 1)], 1) / e[:, None]  # relative error of 1 + sum c_k r^k
    b = (e - 1) / e
    w = np.full(len(r), 1.0 / len(r))
    for _ in range(iterations):
        s = np.sqrt(w)
        c, *_ = np.linalg.lstsq(a * s[:, None], b * s, rcond=None)
        w *= np.abs(a @ c - b)
        w /= w.sum()
    return [1.0] + [float(F32(v)) for v in c]


def fma(a, b, c):  # a float product is exact in double; one rounding to float after the add
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(F32)


def exp_f32(x, coefficients):
    """exp_f32's arithmetic, in numpy float32."""
    full = lambda v: np.full_like(x, F32(v))
    clamped = np.minimum(np.maximum(x, F32(-104)), F32(89))
    shift = F32(12582912 + 254)
    t = fma(clamped, full(1 / np.log(2)), full(shift))
    n = (t - shift).astype(F32)
    r = fma(n, full(-0.693145751953125), clamped)
    r = fma(n, full(-1.428606765330187e-06), r)
    p = full(coefficients[-1])
    for c in coefficients[-2::-1]:
        p = fma(p, r, full(c))
    bits = t.view(np.int32)
    half = bits >> 1
    with np.errstate(all="ignore"):
        return ((p * (half << 23).view(F32)).astype(F32) * ((bits - half) << 23).view(F32)).astype(F32)


def worst_ulps(x, coefficients):
    want = np.exp(x.astype(np.float64))
    w = want.astype(F32)
    ulp = np.maximum(np.nextafter(np.abs(w), F32(np.inf)) - np.abs(w), 1.4e-45).astype(np.float64)
    got = exp_f32(x, coefficients)
    error = np.abs(got.astype(np.float64) - want) / ulp
    error[got == w] = 0
    return error.max()


def main():
    rng = np.random.default_rng(5)
    sample = np.concatenate([rng.uniform(-0.36, 0.36, 300000), rng.uniform(-104, 89, 300000)]).astype(F32)
    best = lawson_fit(DEGREE)
    best_error = worst_ulps(sample, best)
    print("least-squares fit: worst %.3f ulp" % best_error)
    for _ in range(400):
        trial = list(best)
        k = int(rng.integers(2, DEGREE + 1))  # 1 and r stay exact
        trial[k] = float(F32(trial[k]) + int(rng.integers(-3, 4)) * np.spacing(F32(trial[k])))
        error = worst_ulps(sample, trial)
        if error < best_error:
            best, best_error = trial, error
    sweep = np.linspace(-110, 95, 2000001).astype(F32)
    print("nudged: worst %.3f ulp on the sample, %.3f on a sweep of [-110, 95]" % (best_error, worst_ulps(sweep, best)))
    print("coefficients:", ", ".join(repr(float(F32(c))) for c in best))


if __name__ == "__main__":
    main()
