// The scalar derivative rules: one entry per differentiable operation.
//
// Adding an operation means adding a row to the table in rules.cpp: its SQL
// spelling and its partial derivatives, both as SQL text, and what each
// partial reads (the engine decides from that, never from the text).
// Partials are written over float8 operands (arguments already cast to
// float8) and must not raise where the forward succeeded: PostgreSQL raises
// on float division by zero and on zero to a negative power, where PyTorch
// returns ±Infinity.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ddx/core/pure.h"

namespace ddx {

// The result y, among what a partial reads (Rule::reads).
inline constexpr size_t kResult = static_cast<size_t>(-1);

struct Rule {
  const char *name;
  int arity;  // -1: any number of arguments (GREATEST, LEAST)
  // The forward value. `a` are the arguments' SQL, `type` the result type.
  std::string (*emit)(const std::vector<std::string> &a, const std::string &type);
  // ∂result/∂a[i] as float8 SQL; "1" for the identity. `y` is the result as
  // float8 SQL, which the reverse mode computes only for the partials that
  // read it (and passes empty to the others). nullptr: the operation passes
  // no gradient (stop_gradient).
  std::string (*partial)(size_t i, const std::vector<std::string> &a, const std::string &y);
  // Whether partial(i, a, y) reads a[j], or y where j is kResult; nullptr
  // where partial is. What a derivative reads is decided from this: whether
  // y is computed (backprop.cpp), whether a leaf's adjoint reads a value of
  // the leaf (the contraction transpose, ops/contraction.cpp).
  bool (*reads)(size_t i, size_t j) = nullptr;
  // The value ignores NULL arguments (GREATEST, LEAST): a NULL argument's
  // partial is 0, and its tangent, NULL, must not reach the result's (0 ·
  // NULL is NULL in SQL). Other rules are strict: a NULL argument makes the
  // value, and rightly its tangent, NULL.
  bool skips_nulls = false;
};

// The rule named `name`, or nullptr.
const Rule *FindRule(const std::string &name);

// All rules, for tests and documentation.
const std::vector<const Rule *> &AllRules();

}  // namespace ddx
