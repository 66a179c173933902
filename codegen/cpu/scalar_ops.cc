#include "codegen/cpu/scalar_ops.h"

#include "codegen/cpu/float_math.h"

#include <fmt/format.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PatternMatch.h>

namespace kiln::codegen::cpu {
namespace {

using ir::DType;
using ir::Op;

llvm::Value* call_intrinsic(llvm::IRBuilder<>& b, llvm::Intrinsic::ID id, std::vector<llvm::Value*> args) {
  return b.CreateIntrinsic(id, {args[0]->getType()}, args);
}

// A libm function of one argument (tanh, erf): tanhf for float, tanh for double.
llvm::Value* call_libm(llvm::IRBuilder<>& b, llvm::Module& m, const char* name, llvm::Value* x) {
  bool is_float = x->getType()->isFloatTy();
  std::string fn = std::string(name) + (is_float ? "f" : "");
  llvm::FunctionCallee callee = m.getOrInsertFunction(fn, llvm::FunctionType::get(x->getType(), {x->getType()}, false));
  if (auto* f = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
    f->setDoesNotThrow();
    f->setDoesNotAccessMemory();
  }
  return b.CreateCall(callee, {x});
}

constexpr const char* kBf16InstructionsFlag = "kiln.avx512bf16";

bool bf16_instructions(llvm::IRBuilder<>& b) { return uses_bf16_instructions(*b.GetInsertBlock()->getModule()); }

// bf16 bits from a float, rounding to nearest even; NaN stays a quiet NaN.
llvm::Value* bf16_bits(llvm::IRBuilder<>& b, llvm::Value* f) {
  // A value bf16_value widened (a rounding, a load) is its bits: a result rounded to bf16
  // by its op and then stored is converted once.
  using namespace llvm::PatternMatch;
  llvm::Value* bits = nullptr;
  if (match(f, m_BitCast(m_Shl(m_ZExt(m_Value(bits)), m_SpecificInt(16)))) && bits->getType()->isIntegerTy(16))
    return bits;
  if (bf16_instructions(b)) return b.CreateBitCast(b.CreateFPTrunc(f, b.getBFloatTy()), b.getInt16Ty());
  bits = b.CreateBitCast(f, b.getInt32Ty());
  llvm::Value* lsb = b.CreateAnd(b.CreateLShr(bits, 16), 1);
  llvm::Value* rounded = b.CreateAdd(bits, b.CreateAdd(b.getInt32(0x7fff), lsb));
  llvm::Value* high = b.CreateTrunc(b.CreateLShr(rounded, 16), b.getInt16Ty());
  llvm::Value* nan = b.CreateFCmpUNO(f, f);
  return b.CreateSelect(nan, b.getInt16(0x7fc0), high);
}

llvm::Value* bf16_value(llvm::IRBuilder<>& b, llvm::Value* bits) {
  return b.CreateBitCast(b.CreateShl(b.CreateZExt(bits, b.getInt32Ty()), 16), b.getFloatTy());
}

}  // namespace

void use_bf16_instructions(llvm::Module& module) {
  module.addModuleFlag(llvm::Module::Error, kBf16InstructionsFlag, 1);
}

bool uses_bf16_instructions(const llvm::Module& module) {
  return module.getModuleFlag(kBf16InstructionsFlag) != nullptr;
}

void widen_half_compares(llvm::Module& module) {
  for (llvm::Function& f : module)
    for (llvm::BasicBlock& block : f)
      for (llvm::Instruction& instruction : block) {
        auto* compare = llvm::dyn_cast<llvm::FCmpInst>(&instruction);
        if (!compare || !compare->getOperand(0)->getType()->getScalarType()->isHalfTy()) continue;
        llvm::IRBuilder<> b(compare);
        llvm::Type* wide = compare->getOperand(0)->getType()->getWithNewType(b.getFloatTy());
        for (unsigned k = 0; k < 2; ++k) compare->setOperand(k, b.CreateFPExt(compare->getOperand(k), wide));
      }
}

llvm::Type* storage_type(llvm::LLVMContext& ctx, DType d) {
  switch (d) {
    case DType::F32: return llvm::Type::getFloatTy(ctx);
    case DType::F64: return llvm::Type::getDoubleTy(ctx);
    case DType::F16: return llvm::Type::getHalfTy(ctx);
    case DType::BF16: return llvm::Type::getInt16Ty(ctx);
    case DType::I32: return llvm::Type::getInt32Ty(ctx);
    case DType::I64: return llvm::Type::getInt64Ty(ctx);
    case DType::Bool:
    case DType::I8:
    case DType::U8: return llvm::Type::getInt8Ty(ctx);
  }
  return nullptr;
}

llvm::Type* compute_type(llvm::LLVMContext& ctx, DType d) {
  switch (d) {
    case DType::F32:
    case DType::F16:
    case DType::BF16: return llvm::Type::getFloatTy(ctx);
    case DType::F64: return llvm::Type::getDoubleTy(ctx);
    // Bytes compute in i32, wrapped back to 8 bits after each op (as f16 rounds in f32):
    // vectors of i8 have no compare-and-select cheaper than i32's, and signed compares
    // of zero-extended u8 values order them right.
    case DType::I8:
    case DType::U8:
    case DType::I32: return llvm::Type::getInt32Ty(ctx);
    case DType::I64: return llvm::Type::getInt64Ty(ctx);
    case DType::Bool: return llvm::Type::getInt1Ty(ctx);
  }
  return nullptr;
}

llvm::Value* load_element(llvm::IRBuilder<>& b, DType d, llvm::Value* base, llvm::Value* index) {
  llvm::Type* st = storage_type(b.getContext(), d);
  llvm::Value* v = b.CreateLoad(st, b.CreateGEP(st, base, index));
  switch (d) {
    case DType::F16: return b.CreateFPExt(v, b.getFloatTy());
    case DType::BF16: return bf16_value(b, v);
    case DType::Bool: return b.CreateICmpNE(v, b.getInt8(0));
    case DType::I8: return b.CreateSExt(v, b.getInt32Ty());
    case DType::U8: return b.CreateZExt(v, b.getInt32Ty());
    default: return v;
  }
}

void store_element(llvm::IRBuilder<>& b, DType d, llvm::Value* base, llvm::Value* index, llvm::Value* value) {
  llvm::Type* st = storage_type(b.getContext(), d);
  switch (d) {
    case DType::F16: value = b.CreateFPTrunc(value, st); break;
    case DType::BF16: value = bf16_bits(b, value); break;
    case DType::Bool: value = b.CreateZExt(value, st); break;
    case DType::I8:
    case DType::U8: value = b.CreateTrunc(value, st); break;
    default: break;
  }
  b.CreateStore(value, b.CreateGEP(st, base, index));
}

llvm::Value* round_to(llvm::IRBuilder<>& b, DType d, llvm::Value* v) {
  if (d == DType::F16) return b.CreateFPExt(b.CreateFPTrunc(v, b.getHalfTy()), b.getFloatTy());
  if (d == DType::BF16) return bf16_value(b, bf16_bits(b, v));
  if (d == DType::I8) return b.CreateSExt(b.CreateTrunc(v, b.getInt8Ty()), v->getType());
  if (d == DType::U8) return b.CreateZExt(b.CreateTrunc(v, b.getInt8Ty()), v->getType());
  return v;
}

llvm::Value* constant(llvm::IRBuilder<>& b, DType d, double value, int64_t int_value) {
  llvm::Type* t = compute_type(b.getContext(), d);
  if (ir::is_float(d)) return llvm::ConstantFP::get(t, ir::round_to_dtype(d, value));
  if (d == DType::Bool) return b.getInt1(int_value != 0);
  return llvm::ConstantInt::get(t, static_cast<uint64_t>(int_value), true);
}

bool calls_math_library(Op op, DType dtype) {
  switch (ir::op_cpu_math(op)) {
    case ir::CpuMath::Libm: return ir::is_float(dtype);
    case ir::CpuMath::Polynomial: return dtype == DType::F64;  // f32, f16 and bf16 get the inlined polynomial
    case ir::CpuMath::Inline: return false;
  }
  return false;
}

Result<llvm::Value*> elementwise(llvm::IRBuilder<>& b, llvm::Module& m, Op op, const ir::Attrs& attrs,
                                 std::span<llvm::Value* const> in, std::span<const DType> in_types, DType rt) {
  DType dt = in_types.empty() ? rt : in_types[0];
  bool fp = ir::is_float(dt);
  llvm::Value* x = in.empty() ? nullptr : in[0];
  llvm::Value* y = in.size() > 1 ? in[1] : nullptr;
  auto zero = [&](llvm::Value* like) { return llvm::Constant::getNullValue(like->getType()); };
  // f16/bf16 round after each op; i8/u8 wrap.
  auto fpr = [&](llvm::Value* v) { return round_to(b, rt, v); };
  // Floats get an inlined exp that vectorizes without calls; doubles keep libm's (libmvec's).
  auto exp = [&](llvm::Value* v) {
    return v->getType()->isFloatTy() ? exp_f32(b, v) : call_intrinsic(b, llvm::Intrinsic::exp, {v});
  };
  switch (op) {
    case Op::Neg: return fpr(fp ? b.CreateFNeg(x) : b.CreateSub(zero(x), x));
    case Op::Abs:
      return fpr(fp ? call_intrinsic(b, llvm::Intrinsic::fabs, {x})
                    : b.CreateSelect(b.CreateICmpSLT(x, zero(x)), b.CreateSub(zero(x), x), x));
    case Op::Relu:
      // NaN stays NaN, as in the interpreter (x > 0 or unordered).
      return fp ? b.CreateSelect(b.CreateFCmpUGT(x, zero(x)), x, zero(x))
                : b.CreateSelect(b.CreateICmpSGT(x, zero(x)), x, zero(x));
    case Op::Exp: return fpr(exp(x));
    case Op::Log: return fpr(call_intrinsic(b, llvm::Intrinsic::log, {x}));
    case Op::Sqrt: return fpr(call_intrinsic(b, llvm::Intrinsic::sqrt, {x}));
    case Op::Rsqrt:
      return fpr(b.CreateFDiv(llvm::ConstantFP::get(x->getType(), 1.0), call_intrinsic(b, llvm::Intrinsic::sqrt, {x})));
    case Op::Sin: return fpr(call_intrinsic(b, llvm::Intrinsic::sin, {x}));
    case Op::Cos: return fpr(call_intrinsic(b, llvm::Intrinsic::cos, {x}));
    case Op::Tanh: return fpr(x->getType()->isFloatTy() ? tanh_f32(b, x) : call_libm(b, m, "tanh", x));
    case Op::Erf: return fpr(x->getType()->isFloatTy() ? erf_f32(b, x) : call_libm(b, m, "erf", x));
    case Op::Floor: return fpr(call_intrinsic(b, llvm::Intrinsic::floor, {x}));
    case Op::Ceil: return fpr(call_intrinsic(b, llvm::Intrinsic::ceil, {x}));
    case Op::Sigmoid: {
      llvm::Value* one = llvm::ConstantFP::get(x->getType(), 1.0);
      return fpr(b.CreateFDiv(one, b.CreateFAdd(one, exp(b.CreateFNeg(x)))));
    }
    case Op::Not: return b.CreateNot(x);
    case Op::Add: return fpr(fp ? b.CreateFAdd(x, y) : b.CreateAdd(x, y));
    case Op::Sub: return fpr(fp ? b.CreateFSub(x, y) : b.CreateSub(x, y));
    case Op::Mul: return fpr(fp ? b.CreateFMul(x, y) : b.CreateMul(x, y));
    case Op::Div: {
      if (fp) return fpr(b.CreateFDiv(x, y));
      // x / 0 is 0 and x / -1 is -x (wrapping), without trapping.
      llvm::Value* safe = b.CreateSelect(
          b.CreateOr(b.CreateICmpEQ(y, zero(y)), b.CreateICmpEQ(y, llvm::ConstantInt::getSigned(y->getType(), -1))),
          llvm::ConstantInt::get(y->getType(), 1), y);
      llvm::Value* q = b.CreateSDiv(x, safe);
      llvm::Value* neg = b.CreateSub(zero(x), x);
      return fpr(
          b.CreateSelect(b.CreateICmpEQ(y, zero(y)), zero(x),
                         b.CreateSelect(b.CreateICmpEQ(y, llvm::ConstantInt::getSigned(y->getType(), -1)), neg, q)));
    }
    case Op::Pow:
      if (!fp) return make_error("cpu codegen: pow on integers is not supported yet");
      // A small whole exponent (GELU's x^3) as multiplications: libm's pow is a scalar
      // call that keeps the loop from vectorizing. Within an ulp of pow per product.
      if (auto* c = llvm::dyn_cast<llvm::ConstantFP>(y)) {
        const double e = c->getValueAPF().convertToDouble();
        if (e == 1 || e == 2 || e == 3 || e == 4) {
          llvm::Value* p = x;
          for (int k = 1; k < static_cast<int>(e); ++k) p = fpr(b.CreateFMul(p, x));
          return p;
        }
      }
      return fpr(call_intrinsic(b, llvm::Intrinsic::pow, {x, y}));
    // NaN when either operand is, as the interpreter: x where x is NaN, else the compare
    // picks y where y is (x86's maxps and minps, and a blend). LLVM's maximum and minimum
    // also order -0 below +0, which x86 has no instruction for: six instructions a vector,
    // where a pool's taps spent most of their time (docs/cpu.md).
    case Op::Maximum:
      return fp ? fpr(b.CreateSelect(b.CreateFCmpUNO(x, x), x, b.CreateSelect(b.CreateFCmpOGT(x, y), x, y)))
                : b.CreateSelect(b.CreateICmpSGE(x, y), x, y);
    case Op::Minimum:
      return fp ? fpr(b.CreateSelect(b.CreateFCmpUNO(x, x), x, b.CreateSelect(b.CreateFCmpOLT(x, y), x, y)))
                : b.CreateSelect(b.CreateICmpSLE(x, y), x, y);
    case Op::Eq: return fp ? b.CreateFCmpOEQ(x, y) : b.CreateICmpEQ(x, y);
    case Op::Ne: return fp ? b.CreateFCmpUNE(x, y) : b.CreateICmpNE(x, y);
    case Op::Lt:
      return fp ? b.CreateFCmpOLT(x, y) : (dt == DType::Bool ? b.CreateICmpULT(x, y) : b.CreateICmpSLT(x, y));
    case Op::Le:
      return fp ? b.CreateFCmpOLE(x, y) : (dt == DType::Bool ? b.CreateICmpULE(x, y) : b.CreateICmpSLE(x, y));
    case Op::Gt:
      return fp ? b.CreateFCmpOGT(x, y) : (dt == DType::Bool ? b.CreateICmpUGT(x, y) : b.CreateICmpSGT(x, y));
    case Op::Ge:
      return fp ? b.CreateFCmpOGE(x, y) : (dt == DType::Bool ? b.CreateICmpUGE(x, y) : b.CreateICmpSGE(x, y));
    case Op::And: return b.CreateAnd(x, y);
    case Op::Or: return b.CreateOr(x, y);
    case Op::Select: return b.CreateSelect(in[0], in[1], in[2]);
    case Op::Cast: {
      DType to = attrs.get_dtype("to");
      llvm::Type* t = compute_type(b.getContext(), to);
      if (to == DType::Bool) return fp ? b.CreateFCmpUNE(x, zero(x)) : b.CreateICmpNE(x, zero(x));
      if (dt == DType::Bool) return ir::is_float(to) ? b.CreateUIToFP(x, t) : b.CreateZExt(x, t);
      if (fp && ir::is_float(to)) return round_to(b, to, b.CreateFPCast(x, t));
      if (fp && (to == DType::I8 || to == DType::U8)) {  // saturated to the byte's range
        const bool u = to == DType::U8;
        llvm::Value* byte = b.CreateIntrinsic(u ? llvm::Intrinsic::fptoui_sat : llvm::Intrinsic::fptosi_sat,
                                              {b.getInt8Ty(), x->getType()}, {x});
        return u ? b.CreateZExt(byte, t) : b.CreateSExt(byte, t);
      }
      if (fp) return b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {t, x->getType()}, {x});
      if (ir::is_float(to)) return round_to(b, to, b.CreateSIToFP(x, t));
      return round_to(b, to, b.CreateSExtOrTrunc(x, t));
    }
    default: break;
  }
  return make_error(
      fmt::format("cpu codegen: {} {} (codegen/cpu/scalar_ops.cc has no case for it)", ir::op_name(op),
                  ir::op_kind(op) == ir::OpKind::Elementwise ? "cannot be computed here" : "is not an elementwise op"));
}

}  // namespace kiln::codegen::cpu
