// The scalar derivative rules: one entry per differentiable operation.
//
// Adding an operation means adding a row to the table in rules.cpp: its SQL
// spelling and its partial derivatives, both as SQL text. Partials are written
// over float8 operands (arguments already cast to float8) and must not raise
// where the forward succeeded: PostgreSQL raises on float division by zero and
// on zero to a negative power, where PyTorch returns ±Infinity.
#pragma once

#include <string>
#include <vector>

#include "ddx/core/pure.h"

namespace ddx {

struct Rule {
  const char *name;
  int arity;  // -1: any number of arguments (GREATEST, LEAST)
  // The forward value. `a` are the arguments' SQL, `type` the result type.
  std::string (*emit)(const std::vector<std::string> &a, const std::string &type);
  // ∂result/∂a[i] as float8 SQL; "1" for the identity. `y` is the result as
  // float8 SQL. nullptr: the operation passes no gradient (stop_gradient).
  std::string (*partial)(size_t i, const std::vector<std::string> &a, const std::string &y);
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
