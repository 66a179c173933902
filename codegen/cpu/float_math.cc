#include "codegen/cpu/float_math.h"

#include <cmath>
#include <limits>

#include <llvm/IR/Intrinsics.h>

namespace kiln::codegen::cpu {
namespace {

llvm::Value* f(llvm::IRBuilder<>& b, double v) { return llvm::ConstantFP::get(b.getFloatTy(), v); }

llvm::Value* fma(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y, llvm::Value* z) {
  return b.CreateIntrinsic(llvm::Intrinsic::fma, {b.getFloatTy()}, {x, y, z});
}

// c[0] + x*(c[1] + x*(c[2] + ...)), with fused multiply-adds.
llvm::Value* horner(llvm::IRBuilder<>& b, llvm::Value* x, std::initializer_list<double> c) {
  auto it = std::rbegin(c);
  llvm::Value* acc = f(b, *it++);
  for (; it != std::rend(c); ++it) acc = fma(b, acc, x, f(b, *it));
  return acc;
}

}  // namespace

llvm::Value* exp_f32(llvm::IRBuilder<>& b, llvm::Value* x) {
  // e^x = 2^n * e^r with n = round(x / ln 2) and |r| <= ln 2 / 2. ln 2 is split in two
  // so that n * ln2_hi is exact (ln2_hi has 16 significant bits, |n| < 2^8).
  constexpr double kLn2Hi = 0.693145751953125, kLn2Lo = 1.428606765330187e-06;
  const double kLogSmallestNormal = std::log(static_cast<double>(std::numeric_limits<float>::min()));
  // Below ln(FLT_MIN) the result is flushed to 0 (it would be a denormal at most): those
  // lanes compute e^0 and are replaced at the end, since a product that underflows takes
  // a microcode assist on x86, about 100x a multiply's time (an attention mask of -3.4e38,
  // or Swin's -100, made a softmax 7x slower). Above, clamping keeps n at most 128, and
  // the two-factor scaling below reaches inf through ordinary float rounding. A NaN fails
  // both comparisons and flows through to the result.
  llvm::Value* zero_result = b.CreateFCmpOLT(x, f(b, kLogSmallestNormal));
  llvm::Value* clamped = b.CreateSelect(zero_result, f(b, 0.0), x);
  clamped = b.CreateSelect(b.CreateFCmpOGT(clamped, f(b, 89.0)), f(b, 89.0), clamped);
  // Adding 1.5 * 2^23 rounds x / ln 2 to an integer in the low bits of t, which then hold
  // n + 254 (the offset gives each half of n below its exponent bias of 127): no separate
  // round and float-to-int conversion.
  constexpr double kShift = 12582912.0 + 254.0;
  llvm::Value* t = fma(b, clamped, f(b, 1.0 / std::log(2.0)), f(b, kShift));
  llvm::Value* nf = b.CreateFSub(t, f(b, kShift));
  llvm::Value* r = fma(b, nf, f(b, -kLn2Hi), clamped);
  r = fma(b, nf, f(b, -kLn2Lo), r);
  // e^r on [-ln 2 / 2, ln 2 / 2], degree 6. The coefficients were fitted for least maximum
  // relative error, then nudged in their last bits for the least ulp error once evaluated
  // in float (tools/fit_exp_poly.py); e^x is then within 1 ulp over its whole range.
  llvm::Value* p = horner(b, r,
                          {1.0, 1.0, 0.49999988079071045, 0.1666644662618637, 0.04166800528764725, 0.008374195545911789,
                           0.0013843596680089831});
  // 2^n as two factors 2^floor(n/2) and 2^ceil(n/2), each a normal float, so that the
  // product under- and overflows gradually. Shifting (n/2 + 127) into the exponent field
  // drops t's upper bits.
  llvm::Value* bits = b.CreateBitCast(t, b.getInt32Ty());
  llvm::Value* half = b.CreateAShr(bits, 1);
  llvm::Value* low = b.CreateBitCast(b.CreateShl(half, 23), b.getFloatTy());
  llvm::Value* high = b.CreateBitCast(b.CreateShl(b.CreateSub(bits, half), 23), b.getFloatTy());
  return b.CreateSelect(zero_result, f(b, 0.0), b.CreateFMul(b.CreateFMul(p, low), high));
}

llvm::Value* erf_f32(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Value* ax = b.CreateIntrinsic(llvm::Intrinsic::fabs, {b.getFloatTy()}, {x});
  // |x| < 1: the Maclaurin series 2/sqrt(pi) * sum (-1)^k x^(2k+1) / (k! (2k+1)), to
  // k = 11 (the next term is below 6e-11).
  std::vector<double> c;
  double factorial = 1;
  for (int k = 0; k <= 11; ++k) {
    if (k > 0) factorial *= k;
    c.push_back((k % 2 ? -1.0 : 1.0) / (factorial * (2 * k + 1)) * 2.0 / std::sqrt(M_PI));
  }
  llvm::Value* x2 = b.CreateFMul(x, x);
  llvm::Value* small =
      b.CreateFMul(x, horner(b, x2, {c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11]}));
  // |x| >= 1: Abramowitz and Stegun 7.1.26, erf(x) = 1 - t P(t) e^(-x^2) with
  // t = 1 / (1 + p x), absolute error at most 1.5e-7 (Handbook of Mathematical Functions, 1964).
  llvm::Value* t = b.CreateFDiv(f(b, 1.0), fma(b, ax, f(b, 0.3275911), f(b, 1.0)));
  llvm::Value* poly =
      b.CreateFMul(t, horner(b, t, {0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429}));
  llvm::Value* large = b.CreateFSub(f(b, 1.0), b.CreateFMul(poly, exp_f32(b, b.CreateFNeg(x2))));
  large = b.CreateIntrinsic(llvm::Intrinsic::copysign, {b.getFloatTy()}, {large, x});
  // NaN fails the comparison and takes the second branch, where it propagates.
  return b.CreateSelect(b.CreateFCmpOLT(ax, f(b, 1.0)), small, large);
}

llvm::Value* tanh_f32(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Value* ax = b.CreateIntrinsic(llvm::Intrinsic::fabs, {b.getFloatTy()}, {x});
  // Below 0.8, tanh(x) = x + x^3 P(x^2): 1 - 2 / (e^2x + 1) would cancel there. The
  // coefficients are a fit for least maximum relative error (tools/fit_tanh_poly.py).
  llvm::Value* u = b.CreateFMul(ax, ax);
  llvm::Value* p = horner(b, u,
                          {-0.33333295583724976, 0.1333221197128296, -0.05385156348347664, 0.021300332620739937,
                           -0.007405411917716265, 0.0015823690919205546});
  llvm::Value* small = fma(b, b.CreateFMul(ax, u), p, ax);
  // Above, e^2|x| overflows to inf from |x| > 44.4 on, and 2 / inf is 0: tanh is 1. NaN
  // fails the comparison and flows through exp.
  llvm::Value* e = exp_f32(b, b.CreateFAdd(ax, ax));
  llvm::Value* large = b.CreateFSub(f(b, 1.0), b.CreateFDiv(f(b, 2.0), b.CreateFAdd(e, f(b, 1.0))));
  llvm::Value* magnitude = b.CreateSelect(b.CreateFCmpOLT(ax, f(b, 0.8)), small, large);
  return b.CreateIntrinsic(llvm::Intrinsic::copysign, {b.getFloatTy()}, {magnitude, x});
}

}  // namespace kiln::codegen::cpu
