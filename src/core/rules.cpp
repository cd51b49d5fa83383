// The scalar derivative rules (see rules.h). Each row: name, arity, forward
// SQL, partial derivatives. Forward SQL keeps PostgreSQL's own operator
// resolution (the operands carry their original types); the program runs with
// pg_catalog first on its search_path so that these names resolve to the
// built-ins whatever the user's search_path holds.
#include "ddx/core/rules.h"

#include <cstring>

namespace ddx {
namespace {

using Args = std::vector<std::string>;

std::string P(const std::string &s) { return "(" + s + ")"; }

std::string EmitBinary(const Args &a, const char *op) { return P(a[0] + " " + op + " " + a[1]); }
std::string EmitCall(const char *fn, const Args &a) {
  std::string s = std::string(fn) + "(";
  for (size_t i = 0; i < a.size(); i++) s += (i ? ", " : "") + a[i];
  return s + ")";
}

// What partial i reads (Rule::reads): nothing (a constant), its own
// argument, the result, the other argument of two.
bool Nothing(size_t, size_t) { return false; }
bool Own(size_t i, size_t j) { return j == i; }
bool Result(size_t, size_t j) { return j == kResult; }
bool Other(size_t i, size_t j) { return j != kResult && j == 1 - i; }

// Division that yields ±Infinity or NaN where PostgreSQL would raise.
std::string SafeDiv(const std::string &num, const std::string &den) {
  return "(CASE WHEN " + den + " = 0 THEN (CASE WHEN " + num + " > 0 THEN 'Infinity'::float8 WHEN " + num +
         " < 0 THEN '-Infinity'::float8 ELSE 'NaN'::float8 END) ELSE " + num + " / " + den + " END)";
}

const Rule kAdd{"add", 2, [](const Args &a, const std::string &) { return EmitBinary(a, "+"); },
                [](size_t, const Args &, const std::string &) { return std::string("1"); }, Nothing};
const Rule kSub{"sub", 2, [](const Args &a, const std::string &) { return EmitBinary(a, "-"); },
                [](size_t i, const Args &, const std::string &) { return std::string(i == 0 ? "1" : "-1"); }, Nothing};
const Rule kMul{"mul", 2, [](const Args &a, const std::string &) { return EmitBinary(a, "*"); },
                [](size_t i, const Args &a, const std::string &) { return a[1 - i]; }, Other};
// d(a/b)/db = -(a/b)/b reads the quotient, the forward's value y (a Lets
// value where it is costly), not a / b written again: SafeDiv(a, b) written
// inside SafeDiv(., b) wrote the numerator nine times, and a LayerNorm's
// numerator is a sum of five terms (the GPT's LayerNorm backward passes,
// bench/RESULTS.md).
const Rule kDiv{"div", 2, [](const Args &a, const std::string &) { return EmitBinary(a, "/"); },
                [](size_t i, const Args &a, const std::string &y) {
                  // The forward succeeded, so a[1] <> 0.
                  return i == 0 ? SafeDiv("1::float8", a[1]) : "-" + P(SafeDiv(y, a[1]));
                },
                [](size_t i, size_t j) { return j == 1 || (i == 1 && j == kResult); }};
const Rule kNeg{"neg", 1, [](const Args &a, const std::string &) { return P("- " + a[0]); },
                [](size_t, const Args &, const std::string &) { return std::string("-1"); }, Nothing};
const Rule kPos{"pos", 1, [](const Args &a, const std::string &) { return P("+ " + a[0]); },
                [](size_t, const Args &, const std::string &) { return std::string("1"); }, Nothing};
const Rule kExp{"exp", 1, [](const Args &a, const std::string &) { return EmitCall("exp", a); },
                [](size_t, const Args &, const std::string &y) { return y; }, Result};
const Rule kLn{"ln", 1, [](const Args &a, const std::string &) { return EmitCall("ln", a); },
               [](size_t, const Args &a, const std::string &) { return SafeDiv("1::float8", a[0]); }, Own};
const Rule kLog10{
    "log10", 1, [](const Args &a, const std::string &) { return EmitCall("log", a); },
    [](size_t, const Args &a, const std::string &) { return SafeDiv("1::float8", P(a[0] + " * ln(10::float8)")); },
    Own};
const Rule kSqrt{"sqrt", 1, [](const Args &a, const std::string &) { return EmitCall("sqrt", a); },
                 [](size_t, const Args &, const std::string &y) { return SafeDiv("0.5::float8", y); }, Result};
const Rule kPow{"pow", 2, [](const Args &a, const std::string &) { return EmitCall("power", a); },
                [](size_t i, const Args &a, const std::string &y) {
                  const std::string &x = a[0], &e = a[1];
                  if (i == 0)  // d/dx x^e = e x^(e-1); at x = 0 PostgreSQL raises for e-1 < 0.
                    return "(CASE WHEN " + e + " = 0 THEN 0::float8 WHEN " + x + " = 0 AND " + e +
                           " < 1 THEN 'Infinity'::float8 ELSE " + e + " * power(" + x + ", " + e + " - 1) END)";
                  // d/de x^e = x^e ln x; 0 at x = 0 (PyTorch's convention), NaN below.
                  return "(CASE WHEN " + x + " = 0 THEN 0::float8 WHEN " + x + " < 0 THEN 'NaN'::float8 ELSE " + y +
                         " * ln(" + x + ") END)";
                },
                [](size_t i, size_t j) { return i == 0 ? j == 0 || j == 1 : j == kResult || j == 0; }};
const Rule kAbs{"abs", 1, [](const Args &a, const std::string &) { return EmitCall("abs", a); },
                [](size_t, const Args &a, const std::string &) { return "sign(" + a[0] + ")"; }, Own};
const Rule kSin{"sin", 1, [](const Args &a, const std::string &) { return EmitCall("sin", a); },
                [](size_t, const Args &a, const std::string &) { return "cos(" + a[0] + ")"; }, Own};
const Rule kCos{"cos", 1, [](const Args &a, const std::string &) { return EmitCall("cos", a); },
                [](size_t, const Args &a, const std::string &) { return "(- sin(" + a[0] + "))"; }, Own};
const Rule kTan{"tan", 1, [](const Args &a, const std::string &) { return EmitCall("tan", a); },
                [](size_t, const Args &, const std::string &y) { return "(1 + " + y + " * " + y + ")"; }, Result};
const Rule kAsin{"asin", 1, [](const Args &a, const std::string &) { return EmitCall("asin", a); },
                 [](size_t, const Args &a, const std::string &) {
                   return SafeDiv("1::float8", "sqrt(1 - " + a[0] + " * " + a[0] + ")");
                 },
                 Own};
const Rule kAcos{"acos", 1, [](const Args &a, const std::string &) { return EmitCall("acos", a); },
                 [](size_t, const Args &a, const std::string &) {
                   return SafeDiv("-1::float8", "sqrt(1 - " + a[0] + " * " + a[0] + ")");
                 },
                 Own};
const Rule kAtan{"atan", 1, [](const Args &a, const std::string &) { return EmitCall("atan", a); },
                 [](size_t, const Args &a, const std::string &) { return "(1 / (1 + " + a[0] + " * " + a[0] + "))"; },
                 Own};
const Rule kSinh{"sinh", 1, [](const Args &a, const std::string &) { return EmitCall("sinh", a); },
                 [](size_t, const Args &a, const std::string &) { return "cosh(" + a[0] + ")"; }, Own};
const Rule kCosh{"cosh", 1, [](const Args &a, const std::string &) { return EmitCall("cosh", a); },
                 [](size_t, const Args &a, const std::string &) { return "sinh(" + a[0] + ")"; }, Own};
const Rule kTanh{"tanh", 1, [](const Args &a, const std::string &) { return EmitCall("tanh", a); },
                 [](size_t, const Args &, const std::string &y) { return "(1 - " + y + " * " + y + ")"; }, Result};
const Rule kCast{"cast", 1, [](const Args &a, const std::string &type) { return "CAST(" + a[0] + " AS " + type + ")"; },
                 [](size_t, const Args &, const std::string &) { return std::string("1"); }, Nothing};
const Rule kStop{"stop_gradient", 1, [](const Args &a, const std::string &) { return a[0]; }, nullptr};
// sign(x) is piecewise constant: its derivative is 0 wherever it is defined
// (PyTorch's and JAX's sign pass no gradient either). abs's partial is
// sign(x), so the gradient of abs differentiated again (hvp) reads it.
const Rule kSign{"sign", 1, [](const Args &a, const std::string &) { return EmitCall("sign", a); }, nullptr};

// GREATEST/LEAST ignore NULLs. At a tie the last argument that attains the
// value takes the derivative (GREATEST(a, b): a's only where a > b, b's at
// a = b), as the reference system does: ReLU written GREATEST(x, 0) has
// derivative 0 at 0, as PyTorch's and JAX's relu. (MIN and MAX aggregates
// still share ties evenly.) Both modes read this partial.
std::string ExtremumPartial(size_t i, const Args &a, const std::string &y) {
  std::string later;
  for (size_t k = i + 1; k < a.size(); k++) later += " AND (" + a[k] + " = " + y + ") IS NOT TRUE";
  return "(CASE WHEN " + a[i] + " = " + y + later + " THEN 1::float8 ELSE 0::float8 END)";
}
bool ExtremumReads(size_t i, size_t j) { return j == kResult || j >= i; }
std::string EmitGreatest(const Args &a, const std::string &) { return EmitCall("GREATEST", a); }
std::string EmitLeast(const Args &a, const std::string &) { return EmitCall("LEAST", a); }
const Rule kGreatest{"greatest", -1, EmitGreatest, ExtremumPartial, ExtremumReads, true};
const Rule kLeast{"least", -1, EmitLeast, ExtremumPartial, ExtremumReads, true};

const Rule *const kRules[] = {&kAdd,  &kSub,  &kMul,  &kDiv,  &kNeg,  &kPos,  &kExp,      &kLn,   &kLog10,
                              &kSqrt, &kPow,  &kAbs,  &kSin,  &kCos,  &kTan,  &kAsin,     &kAcos, &kAtan,
                              &kSinh, &kCosh, &kTanh, &kCast, &kStop, &kSign, &kGreatest, &kLeast};

}  // namespace

const Rule *FindRule(const std::string &name) {
  for (const Rule *r : kRules)
    if (name == r->name) return r;
  return nullptr;
}

const std::vector<const Rule *> &AllRules() {
  static const std::vector<const Rule *> all(std::begin(kRules), std::end(kRules));
  return all;
}

}  // namespace ddx
