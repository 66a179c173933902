#include "codegen/cpu/float_math.h"

#include <cmath>

#include <llvm/IR/Intrinsics.h>

namespace kiln::codegen::cpu {
namespace {

llvm::Value* f(llvm::IRBuilder<>& b, double v) { return llvm::ConstantFP::get(b.getFloatTy(), v); }

// c[0] + x*(c[1] + x*(c[2] + ...)), with fused multiply-adds.
llvm::Value* horner(llvm::IRBuilder<>& b, llvm::Value* x, std::initializer_list<double> c) {
  auto it = std::rbegin(c);
  llvm::Value* acc = f(b, *it++);
  for (; it != std::rend(c); ++it) acc = b.CreateIntrinsic(llvm::Intrinsic::fma, {b.getFloatTy()}, {acc, x, f(b, *it)});
  return acc;
}

// 2^n for an i32 n in [-126, 127], built from its exponent bits.
llvm::Value* pow2(llvm::IRBuilder<>& b, llvm::Value* n) {
  return b.CreateBitCast(b.CreateShl(b.CreateAdd(n, b.getInt32(127)), 23), b.getFloatTy());
}

}  // namespace

llvm::Value* exp_f32(llvm::IRBuilder<>& b, llvm::Value* x) {
  // e^x = 2^n * e^r with n = round(x / ln 2) and |r| <= ln 2 / 2. ln 2 is split in two
  // so that n * ln2_hi is exact (ln2_hi has 16 significant bits, |n| < 2^8).
  constexpr double kLn2Hi = 0.693145751953125, kLn2Lo = 1.428606765330187e-06;
  // Clamping keeps n within [-150, 129]; beyond that the result is 0 or inf anyway, and
  // the two-factor scaling below reaches both through ordinary float rounding.
  llvm::Value* clamped = b.CreateSelect(b.CreateFCmpOLT(x, f(b, -104.0)), f(b, -104.0), x);
  clamped = b.CreateSelect(b.CreateFCmpOGT(clamped, f(b, 89.0)), f(b, 89.0), clamped);
  llvm::Value* nf = b.CreateIntrinsic(llvm::Intrinsic::rint, {b.getFloatTy()}, {b.CreateFMul(clamped, f(b, 1.0 / std::log(2.0)))});
  llvm::Value* r = b.CreateIntrinsic(llvm::Intrinsic::fma, {b.getFloatTy()}, {nf, f(b, -kLn2Hi), clamped});
  r = b.CreateIntrinsic(llvm::Intrinsic::fma, {b.getFloatTy()}, {nf, f(b, -kLn2Lo), r});
  // Taylor series of e^r to r^7: the first omitted term is below 2^-27 for |r| <= ln 2 / 2.
  llvm::Value* p = horner(b, r, {1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040});
  // 2^n as two factors, each a normal float, so the product under- and overflows gradually.
  llvm::Value* n = b.CreateFPToSI(nf, b.getInt32Ty());
  llvm::Value* half = b.CreateAShr(n, 1);
  llvm::Value* result = b.CreateFMul(b.CreateFMul(p, pow2(b, half)), pow2(b, b.CreateSub(n, half)));
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, result);
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
  llvm::Value* small = b.CreateFMul(x, horner(b, x2, {c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10], c[11]}));
  // |x| >= 1: Abramowitz and Stegun 7.1.26, erf(x) = 1 - t P(t) e^(-x^2) with
  // t = 1 / (1 + p x), absolute error at most 1.5e-7 (Handbook of Mathematical Functions, 1964).
  llvm::Value* t = b.CreateFDiv(f(b, 1.0), b.CreateIntrinsic(llvm::Intrinsic::fma, {b.getFloatTy()}, {ax, f(b, 0.3275911), f(b, 1.0)}));
  llvm::Value* poly = b.CreateFMul(t, horner(b, t, {0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429}));
  llvm::Value* large = b.CreateFSub(f(b, 1.0), b.CreateFMul(poly, exp_f32(b, b.CreateFNeg(x2))));
  large = b.CreateIntrinsic(llvm::Intrinsic::copysign, {b.getFloatTy()}, {large, x});
  // NaN fails the comparison and takes the second branch, where it propagates.
  return b.CreateSelect(b.CreateFCmpOLT(ax, f(b, 1.0)), small, large);
}

}  // namespace kiln::codegen::cpu
