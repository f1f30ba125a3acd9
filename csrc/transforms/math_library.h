#pragma once
// The math library legalization builds for targets without one (transforms/math_library.cpp).
#include "target/target.h"
#include "transforms/ir_emitter.h"

namespace qd {

// Whether `s` is sin cos tan exp log tanh asin acos atan (Unary) or pow / atan2 (Binary) on a
// float type the target has no instruction or library call for (Target::has_native_math).
bool needs_math_library(const Stmt &s, const Target &target);

// The value of such a statement, built before it from primitive arithmetic.
Stmt *expand_math_library(IrEmitter &e, const Stmt &s, const Target &target);

}  // namespace qd
