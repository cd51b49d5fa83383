// The scalar rules of src/core/rules.cpp as numbers (issue 38): what a
// dense region computes per cell where the SQL program computes per row.
// Pure C++ (no PostgreSQL headers), like src/core; the adapter raises a
// Fault as the ereport PostgreSQL's own function would make.
//
// "As numbers" means exactly as the SQL text runs in PostgreSQL:
//   - value: the rule's forward (its `emit`) over float8 arguments, as
//     PostgreSQL's float8 functions compute it (utils/adt/float.c: dexp,
//     dlog1, dpow, ...; float8_pl, float8_mul, ... of utils/float.h),
//     raising where they raise, with their SQLSTATE;
//   - partial: the rule's `partial` SQL text, operation for operation in
//     the same order (so bit for bit), each `*`, `/`, `+`, `-` and call with
//     PostgreSQL's checks: a partial raises where its SQL raises (tanh's
//     1 - y * y underflows for 0 < |y| < 1e-162, as the SQL program does).
// test/fixtures/scalar_cases.tsv holds the oracle both sides are tested
// against: PostgreSQL's own results, checked on every run by
// test/soak/scalar_cases.py through ddx's SQL program, and by the
// unit tests against these functions.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ddx::dense {

// PostgreSQL's errors of float8 arithmetic, by what it reports.
enum class Fault {
  kNone,
  kOverflow,              // 22003 value out of range: overflow
  kUnderflow,             // 22003 value out of range: underflow
  kDivisionByZero,        // 22012 division by zero
  kLogOfZero,             // 2201E cannot take logarithm of zero
  kLogOfNegative,         // 2201E cannot take logarithm of a negative number
  kSqrtOfNegative,        // 2201F cannot take square root of a negative number
  kZeroToNegativePower,   // 2201F zero raised to a negative power is undefined
  kNegativeToNonInteger,  // 2201F a negative number raised to a non-integer power yields a complex result
  kInputOutOfRange,       // 22003 input is out of range
};

// The SQLSTATE ("22003") and the message of a fault, as PostgreSQL's.
const char *Sqlstate(Fault f);
const char *Message(Fault f);

// PostgreSQL's float8 arithmetic (float8_pl, float8_mi, float8_mul,
// float8_div of utils/float.h), a fault where it raises; and its comparison
// (float8_cmp_internal: NaN equals NaN and is greater than every number).
double Float8Pl(double a, double b, Fault *f);
double Float8Mi(double a, double b, Fault *f);
double Float8Mul(double a, double b, Fault *f);
double Float8Div(double a, double b, Fault *f);
int Float8Cmp(double a, double b);

// A rule's arguments: values, and which are NULL (a strict rule is never
// called with a NULL argument: its value and partials are NULL; GREATEST
// and LEAST skip NULLs, and a NULL argument's partial is 0).
struct Args {
  const double *v;
  const bool *null;
  size_t n;
};

struct ScalarRule {
  const char *name;  // the rule's name in src/core/rules.cpp
  int arity;         // -1: any number (GREATEST, LEAST)
  bool skips_nulls;
  // The value; *is_null where every argument of a rule that skips NULLs
  // is. A fault is reported in *fault (the first one: once set, kept).
  double (*value)(const Args &a, bool *is_null, Fault *fault);
  // ∂value/∂a[i] at the arguments a and the value y; nullptr where the rule
  // passes no gradient (stop_gradient, sign), as in rules.cpp.
  double (*partial)(size_t i, const Args &a, double y, Fault *fault);
};

// The rule named `name`, or nullptr (rules with no numeric form: none of
// rules.cpp's; a unit test keeps the two tables in step).
const ScalarRule *FindScalarRule(const std::string &name);
const std::vector<const ScalarRule *> &AllScalarRules();

}  // namespace ddx::dense
