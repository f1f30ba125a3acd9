// StmtKind::Span (ir/ops.h): a scan or a compress over n contiguous elements as a loop over
// 256-bit vectors (AVX2's width; LLVM splits them on narrower targets and scalarizes what a target
// lacks, so the code is right everywhere), then a scalar loop over the last n % lanes elements.
//
// Exclusive scan: per vector, an in-register inclusive scan by log2(lanes) steps (shifts within
// 128-bit groups, then broadcasts of a group's last lane, the identity shifted in), the exclusive
// values from the carry and the inclusive ones (add: less x; min / max: shifted by a lane), and the
// carry combined with the last lane. One combine per vector on the loop-carried path instead of
// one per element.
//
// Compress: per vector of flags, the mask of the set ones (one bit per lane) selects a table
// entry listing, for each output word, the input word it takes (the set lanes' words first, in
// order); the values are permuted by it (x86 with AVX2: one vpermd / vpermps) and stored at the
// output's end, which then moves on by the mask's popcount. A store of the whole vector writes past
// the selected values (the next vector's store overwrites them); where fewer than a vector's lanes
// of `room` are left, a masked store writes only the selected lanes. Values move as 32-bit words:
// a 64-bit element is two of them. On a cpu with AVX-512 (TargetFeatures::vector_bits 512) the
// compress takes 512-bit vectors and AVX-512's compress instruction (vpcompressd / vpcompressq:
// the set lanes first, in order) instead of the table and the permute.
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>

#include "codegen/llvm/codegen_llvm.h"

namespace qd {

using llvm::Value;

namespace {

constexpr int kWords = 8;  // 32-bit words per vector (256 bits)

// The identity of a scan op on integers of type t.
uint64_t identity_bits(BinaryOp op, DataType t) {
  int bits = bit_width(t);
  uint64_t all = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  if (op == BinaryOp::Add) return 0;
  if (op == BinaryOp::Min) return is_signed(t) ? all >> 1 : all;  // the largest value
  return is_signed(t) ? (all >> 1) + 1 : 0;                        // Max: the smallest value
}

}  // namespace

Value *LlvmCodegen::span(const Stmt &s) {
  return static_cast<SpanOp>(s.op) == SpanOp::ExclusiveScan ? span_scan(s) : span_compress(s);
}

Value *LlvmCodegen::span_scan(const Stmt &s) {
  Value *dst = value(s.operands[0]), *src = value(s.operands[1]), *n = value(s.operands[2]);
  Value *carry = value(s.operands[3]);
  const DataType t = s.dtype;
  const BinaryOp op = static_cast<BinaryOp>(s.ival);
  const int lanes = kWords * 32 / bit_width(t);
  llvm::Type *et = type(t);
  auto *vt = llvm::FixedVectorType::get(et, lanes);
  const llvm::Align align(byte_size(t));
  Value *ident = llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(lanes),
                                                llvm::ConstantInt::get(et, identity_bits(op, t)));
  // The inclusive scan's steps: lane i combined with lane i - shift of the same 128-bit group
  // (byte shifts within the group: cheap on x86), then, group by group, with the last lane of the
  // block below it (a broadcast); the identity where there is no such lane.
  const int group = 128 / bit_width(t);
  auto step = [&](Value *x, int shift) {
    std::vector<int> mask(lanes);
    for (int i = 0; i < lanes; i++) {
      int below = shift < group ? i - shift : i / (2 * shift) * (2 * shift) + shift - 1;
      bool has = shift < group ? i % group >= shift : i % (2 * shift) >= shift;
      mask[i] = has ? lanes + below : i;
    }
    return b_.CreateShuffleVector(ident, x, mask);
  };
  auto combine = [&](Value *a, Value *c) { return arith(op, t, a, c); };
  auto at = [&](Value *base, Value *k) { return b_.CreateGEP(et, base, b_.CreateSExt(k, b_.getInt64Ty())); };

  llvm::BasicBlock *pre = b_.GetInsertBlock();
  auto *vec = llvm::BasicBlock::Create(ctx_, "span.scan.vec", fn_);
  auto *tail_pre = llvm::BasicBlock::Create(ctx_, "span.scan.tail.pre", fn_);
  auto *tail = llvm::BasicBlock::Create(ctx_, "span.scan.tail", fn_);
  auto *done = llvm::BasicBlock::Create(ctx_, "span.scan.end", fn_);
  Value *whole = b_.CreateAnd(n, b_.getInt32(~(lanes - 1)));  // n >= 0: the elements of whole vectors
  Value *carry_v = b_.CreateVectorSplat(lanes, carry);
  b_.CreateCondBr(b_.CreateICmpSGT(whole, b_.getInt32(0)), vec, tail_pre);

  b_.SetInsertPoint(vec);
  auto *k = b_.CreatePHI(b_.getInt32Ty(), 2);
  auto *cv = b_.CreatePHI(vt, 2);
  k->addIncoming(b_.getInt32(0), pre);
  cv->addIncoming(carry_v, pre);
  Value *x = b_.CreateAlignedLoad(vt, at(src, k), align);
  Value *inclusive = x;
  for (int shift = 1; shift < lanes; shift *= 2) inclusive = combine(inclusive, step(inclusive, shift));
  // exclusive: add's is the inclusive one less x (no shuffle); min / max take the lane below
  Value *exclusive;
  if (op == BinaryOp::Add) {
    exclusive = b_.CreateSub(inclusive, x);
  } else {
    std::vector<int> mask(lanes);
    for (int i = 0; i < lanes; i++) mask[i] = i == 0 ? 0 : lanes + i - 1;
    exclusive = b_.CreateShuffleVector(ident, inclusive, mask);
  }
  b_.CreateAlignedStore(combine(cv, exclusive), at(dst, k), align);
  Value *next_cv = combine(cv, b_.CreateShuffleVector(inclusive, std::vector<int>(lanes, lanes - 1)));
  Value *next_k = b_.CreateAdd(k, b_.getInt32(lanes));
  k->addIncoming(next_k, vec);
  cv->addIncoming(next_cv, vec);
  b_.CreateCondBr(b_.CreateICmpSLT(next_k, whole), vec, tail_pre);

  b_.SetInsertPoint(tail_pre);
  auto *k0 = b_.CreatePHI(b_.getInt32Ty(), 2);
  auto *c0 = b_.CreatePHI(et, 2);
  k0->addIncoming(b_.getInt32(0), pre);
  c0->addIncoming(carry, pre);
  k0->addIncoming(next_k, vec);
  // (the extract is emitted in vec, where next_cv is)
  {
    llvm::IRBuilder<> vb(vec->getTerminator());
    c0->addIncoming(vb.CreateExtractElement(next_cv, uint64_t{0}), vec);
  }
  b_.CreateCondBr(b_.CreateICmpSLT(k0, n), tail, done);

  b_.SetInsertPoint(tail);
  auto *kt = b_.CreatePHI(b_.getInt32Ty(), 2);
  auto *ct = b_.CreatePHI(et, 2);
  kt->addIncoming(k0, tail_pre);
  ct->addIncoming(c0, tail_pre);
  Value *v = b_.CreateAlignedLoad(et, at(src, kt), align);
  b_.CreateAlignedStore(ct, at(dst, kt), align);
  Value *next_ct = combine(ct, v);
  Value *next_kt = b_.CreateAdd(kt, b_.getInt32(1));
  kt->addIncoming(next_kt, tail);
  ct->addIncoming(next_ct, tail);
  b_.CreateCondBr(b_.CreateICmpSLT(next_kt, n), tail, done);

  b_.SetInsertPoint(done);
  auto *result = b_.CreatePHI(et, 2);
  result->addIncoming(c0, tail_pre);
  result->addIncoming(next_ct, tail);
  return result;
}

Value *LlvmCodegen::span_compress(const Stmt &s) {
  Value *out = value(s.operands[0]), *flags = value(s.operands[1]), *n = value(s.operands[2]);
  Value *room = value(s.operands[3]);
  const bool indices = s.operands[4]->kind != StmtKind::GlobalPtr;  // out[k] = base + j
  Value *values = value(s.operands[4]);
  const bool avx512 = target_.features().vector_bits >= 512;
  const int bits = bit_width(s.operands[0]->dtype), per = bits / 32, lanes = (avx512 ? 16 : kWords) / per;
  llvm::Type *et = b_.getIntNTy(bits), *ft = type(s.operands[1]->dtype), *i32 = b_.getInt32Ty();
  auto *wordv = llvm::FixedVectorType::get(i32, kWords);
  auto *ev = llvm::FixedVectorType::get(et, lanes);
  const llvm::Align align(bits / 8), falign(byte_size(s.operands[1]->dtype));

  // Table entry m: nibble q is the input word of output word q (the set bits of m in order).
  std::string name = "qd_compress_words_" + std::to_string(lanes);
  llvm::GlobalVariable *table = avx512 ? nullptr : module_->getNamedGlobal(name);
  if (!table && !avx512) {
    std::vector<uint32_t> entries(size_t{1} << lanes, 0);
    for (uint32_t m = 0; m < entries.size(); m++) {
      int r = 0;
      for (int l = 0; l < lanes; l++)
        if (m >> l & 1) {
          for (int q = 0; q < per; q++) entries[m] |= uint32_t(l * per + q) << (4 * (r * per + q));
          r++;
        }
    }
    auto *init = llvm::ConstantDataArray::get(ctx_, entries);
    table = new llvm::GlobalVariable(*module_, init->getType(), true, llvm::GlobalValue::PrivateLinkage, init, name);
  }
  auto at = [&](llvm::Type *t, Value *base, Value *k) { return b_.CreateGEP(t, base, b_.CreateSExt(k, b_.getInt64Ty())); };
  std::vector<uint32_t> nibble_shifts, lane_ids;
  for (int q = 0; q < kWords; q++) nibble_shifts.push_back(4 * q);
  for (int l = 0; l < lanes; l++) lane_ids.push_back(l);
  Value *shifts = llvm::ConstantDataVector::get(ctx_, nibble_shifts);
  Value *ids = llvm::ConstantDataVector::get(ctx_, lane_ids);

  llvm::BasicBlock *pre = b_.GetInsertBlock();
  auto *vec = llvm::BasicBlock::Create(ctx_, "span.compress.vec", fn_);
  auto *full = llvm::BasicBlock::Create(ctx_, "span.compress.store", fn_);
  auto *partial = llvm::BasicBlock::Create(ctx_, "span.compress.masked", fn_);
  auto *next = llvm::BasicBlock::Create(ctx_, "span.compress.next", fn_);
  auto *tail_pre = llvm::BasicBlock::Create(ctx_, "span.compress.tail.pre", fn_);
  auto *tail = llvm::BasicBlock::Create(ctx_, "span.compress.tail", fn_);
  auto *tail_store = llvm::BasicBlock::Create(ctx_, "span.compress.tail.store", fn_);
  auto *tail_next = llvm::BasicBlock::Create(ctx_, "span.compress.tail.next", fn_);
  auto *done = llvm::BasicBlock::Create(ctx_, "span.compress.end", fn_);
  Value *whole = b_.CreateAnd(n, b_.getInt32(~(lanes - 1)));
  b_.CreateCondBr(b_.CreateICmpSGT(whole, b_.getInt32(0)), vec, tail_pre);

  b_.SetInsertPoint(vec);
  auto *j = b_.CreatePHI(i32, 2);
  auto *k = b_.CreatePHI(i32, 2);
  j->addIncoming(b_.getInt32(0), pre);
  k->addIncoming(b_.getInt32(0), pre);
  Value *f = b_.CreateAlignedLoad(llvm::FixedVectorType::get(ft, lanes), at(ft, flags, j), falign);
  Value *set = b_.CreateICmpNE(f, llvm::Constant::getNullValue(f->getType()));
  Value *mask = b_.CreateZExt(b_.CreateBitCast(set, b_.getIntNTy(lanes)), i32);
  Value *count = b_.CreateUnaryIntrinsic(llvm::Intrinsic::ctpop, mask);
  Value *result;
  if (avx512) {
    Value *in = indices ? b_.CreateAdd(b_.CreateVectorSplat(lanes, b_.CreateAdd(values, j)), ids)
                        : b_.CreateAlignedLoad(ev, at(et, values, j), align);
    result = b_.CreateIntrinsic(llvm::Intrinsic::x86_avx512_mask_compress, {ev},
                                {in, llvm::PoisonValue::get(ev), set});
  } else {
    Value *entry = b_.CreateAlignedLoad(i32, b_.CreateGEP(i32, table, mask), llvm::Align(4));
    Value *words = b_.CreateAnd(b_.CreateLShr(b_.CreateVectorSplat(kWords, entry), shifts), uint64_t{15});
    Value *packed;
    if (indices) {  // 32-bit: the word indices are the lanes
      packed = b_.CreateAdd(b_.CreateVectorSplat(kWords, b_.CreateAdd(values, j)), words);
    } else {
      // out word q = in word words[q]: a build of variable extracts, which x86 (AVX2) makes one vpermd
      Value *in = b_.CreateBitCast(b_.CreateAlignedLoad(ev, at(et, values, j), align), wordv);
      packed = llvm::PoisonValue::get(wordv);
      for (int q = 0; q < kWords; q++)
        packed = b_.CreateInsertElement(packed, b_.CreateExtractElement(in, b_.CreateExtractElement(words, q)), q);
    }
    result = b_.CreateBitCast(packed, ev);
  }
  Value *dst = at(et, out, k);
  Value *left = b_.CreateSub(room, k);
  b_.CreateCondBr(b_.CreateICmpSGE(left, b_.getInt32(lanes)), full, partial);
  b_.SetInsertPoint(full);
  b_.CreateAlignedStore(result, dst, align);
  b_.CreateBr(next);
  b_.SetInsertPoint(partial);
  Value *keep = b_.CreateSelect(b_.CreateICmpSLT(left, count), left, count);
  b_.CreateMaskedStore(result, dst, align, b_.CreateICmpSLT(ids, b_.CreateVectorSplat(lanes, keep)));
  b_.CreateBr(next);
  b_.SetInsertPoint(next);
  Value *next_j = b_.CreateAdd(j, b_.getInt32(lanes));
  Value *next_k = b_.CreateAdd(k, count);
  j->addIncoming(next_j, next);
  k->addIncoming(next_k, next);
  b_.CreateCondBr(b_.CreateICmpSLT(next_j, whole), vec, tail_pre);

  b_.SetInsertPoint(tail_pre);
  auto *j0 = b_.CreatePHI(i32, 2);
  auto *k0 = b_.CreatePHI(i32, 2);
  j0->addIncoming(b_.getInt32(0), pre);
  k0->addIncoming(b_.getInt32(0), pre);
  j0->addIncoming(next_j, next);
  k0->addIncoming(next_k, next);
  b_.CreateCondBr(b_.CreateICmpSLT(j0, n), tail, done);

  // the last n % lanes elements, one by one
  b_.SetInsertPoint(tail);
  auto *jt = b_.CreatePHI(i32, 2);
  auto *kt = b_.CreatePHI(i32, 2);
  jt->addIncoming(j0, tail_pre);
  kt->addIncoming(k0, tail_pre);
  Value *ft_set = b_.CreateICmpNE(b_.CreateAlignedLoad(ft, at(ft, flags, jt), falign), llvm::ConstantInt::get(ft, 0));
  b_.CreateCondBr(b_.CreateAnd(ft_set, b_.CreateICmpSLT(kt, room)), tail_store, tail_next);
  b_.SetInsertPoint(tail_store);
  Value *one = indices ? b_.CreateAdd(values, jt) : b_.CreateAlignedLoad(et, at(et, values, jt), align);
  b_.CreateAlignedStore(one, at(et, out, kt), align);
  b_.CreateBr(tail_next);
  b_.SetInsertPoint(tail_next);
  Value *next_jt = b_.CreateAdd(jt, b_.getInt32(1));
  Value *next_kt = b_.CreateAdd(kt, b_.CreateZExt(ft_set, i32));
  jt->addIncoming(next_jt, tail_next);
  kt->addIncoming(next_kt, tail_next);
  b_.CreateCondBr(b_.CreateICmpSLT(next_jt, n), tail, done);

  b_.SetInsertPoint(done);
  auto *total = b_.CreatePHI(i32, 2);
  total->addIncoming(k0, tail_pre);
  total->addIncoming(next_kt, tail_next);
  return total;
}

}  // namespace qd
