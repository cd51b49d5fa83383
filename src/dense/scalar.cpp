// The scalar rules as numbers (include/ddx/dense/scalar.h): each function
// below follows the PostgreSQL function the rule's SQL calls (float.c of
// PostgreSQL 15 and 18 agree on all of them), and each partial the SQL
// text of its rule in src/core/rules.cpp, operation for operation.
#include "ddx/dense/scalar.h"

#include <cerrno>
#include <cmath>
#include <string>
#include <vector>

namespace ddx::dense {

namespace {

void Raise(Fault *f, Fault e) {
  if (*f == Fault::kNone) *f = e;
}

// float8 comparisons as PostgreSQL's (float8_cmp_internal): NaN equals NaN
// and is greater than every other value. `x = 0`, `x < 1` and `a = y` in a
// partial's SQL compare so.
int Cmp(double a, double b) {
  if (std::isnan(a)) return std::isnan(b) ? 0 : 1;
  if (std::isnan(b)) return -1;
  return a > b ? 1 : (a < b ? -1 : 0);
}
bool Eq(double a, double b) { return Cmp(a, b) == 0; }
bool Gt(double a, double b) { return Cmp(a, b) > 0; }
bool Lt(double a, double b) { return Cmp(a, b) < 0; }

// float8_pl, float8_mi, float8_mul, float8_div (utils/float.h)
double Pl(double a, double b, Fault *f) {
  double r = a + b;
  if (std::isinf(r) && !std::isinf(a) && !std::isinf(b)) Raise(f, Fault::kOverflow);
  return r;
}
double Mi(double a, double b, Fault *f) {
  double r = a - b;
  if (std::isinf(r) && !std::isinf(a) && !std::isinf(b)) Raise(f, Fault::kOverflow);
  return r;
}
double Mul(double a, double b, Fault *f) {
  double r = a * b;
  if (std::isinf(r) && !std::isinf(a) && !std::isinf(b)) Raise(f, Fault::kOverflow);
  if (r == 0.0 && a != 0.0 && b != 0.0) Raise(f, Fault::kUnderflow);
  return r;
}
double Div(double a, double b, Fault *f) {
  if (b == 0.0 && !std::isnan(a)) {
    Raise(f, Fault::kDivisionByZero);
    return 0.0;
  }
  double r = a / b;
  if (std::isinf(r) && !std::isinf(a)) Raise(f, Fault::kOverflow);
  if (r == 0.0 && a != 0.0 && !std::isinf(b)) Raise(f, Fault::kUnderflow);
  return r;
}

// dexp
double Exp(double x, Fault *f) {
  if (std::isnan(x)) return x;
  if (std::isinf(x)) return x > 0.0 ? x : 0.0;
  errno = 0;
  double r = std::exp(x);
  if (errno == ERANGE)
    Raise(f, r != 0.0 ? Fault::kOverflow : Fault::kUnderflow);
  else if (std::isinf(r))
    Raise(f, Fault::kOverflow);
  else if (r == 0.0)
    Raise(f, Fault::kUnderflow);
  return r;
}

// dlog1 and dlog10
double Log(double x, double (*fn)(double), Fault *f) {
  if (x == 0.0) {
    Raise(f, Fault::kLogOfZero);
    return 0.0;
  }
  if (x < 0) {
    Raise(f, Fault::kLogOfNegative);
    return 0.0;
  }
  double r = fn(x);
  if (std::isinf(r) && !std::isinf(x)) Raise(f, Fault::kOverflow);
  if (r == 0.0 && x != 1.0) Raise(f, Fault::kUnderflow);
  return r;
}
double Ln(double x, Fault *f) {
  return Log(
      x, [](double v) { return std::log(v); }, f);
}
double Log10(double x, Fault *f) {
  return Log(
      x, [](double v) { return std::log10(v); }, f);
}

// dsqrt
double Sqrt(double x, Fault *f) {
  if (x < 0) {
    Raise(f, Fault::kSqrtOfNegative);
    return 0.0;
  }
  double r = std::sqrt(x);
  if (std::isinf(r) && !std::isinf(x)) Raise(f, Fault::kOverflow);
  if (r == 0.0 && x != 0.0) Raise(f, Fault::kUnderflow);
  return r;
}

// dpow
double Pow(double x, double y, Fault *f) {
  if (std::isnan(x)) return std::isnan(y) || y != 0.0 ? x : 1.0;
  if (std::isnan(y)) return x != 1.0 ? y : 1.0;
  if (x == 0 && y < 0) {
    Raise(f, Fault::kZeroToNegativePower);
    return 0.0;
  }
  if (x < 0 && std::floor(y) != y) {
    Raise(f, Fault::kNegativeToNonInteger);
    return 0.0;
  }
  if (std::isinf(y)) {
    double ax = std::fabs(x);
    if (ax == 1.0) return 1.0;
    if (y > 0.0) return ax > 1.0 ? y : 0.0;
    return ax > 1.0 ? 0.0 : -y;
  }
  if (std::isinf(x)) {
    if (y == 0.0) return 1.0;
    if (x > 0.0) return y > 0.0 ? x : 0.0;
    double half = y / 2;
    bool odd = std::floor(half) != half;
    if (y > 0.0) return odd ? x : -x;
    return odd ? -0.0 : 0.0;
  }
  errno = 0;
  double r = std::pow(x, y);
  if (errno == EDOM || std::isnan(r)) {
    if (x == 0.0) return 0.0;
    double ax = std::fabs(x);
    if (ax == 1.0) return 1.0;
    Raise(f, (y >= 0.0 ? ax > 1.0 : ax < 1.0) ? Fault::kOverflow : Fault::kUnderflow);
    return 0.0;
  }
  if (errno == ERANGE) {
    Raise(f, r != 0.0 ? Fault::kOverflow : Fault::kUnderflow);
  } else {
    if (std::isinf(r)) Raise(f, Fault::kOverflow);
    if (r == 0.0 && x != 0.0) Raise(f, Fault::kUnderflow);
  }
  return r;
}

// dsin, dcos, dtan: out of range for infinite input (and wherever libm sets
// errno); sin and cos never overflow, tan is not checked (tan(pi/2)).
double Trig(double x, double (*fn)(double), bool check_inf, Fault *f) {
  if (std::isnan(x)) return x;
  errno = 0;
  double r = fn(x);
  if (errno != 0 || std::isinf(x)) Raise(f, Fault::kInputOutOfRange);
  if (check_inf && std::isinf(r)) Raise(f, Fault::kOverflow);
  return r;
}
double Sin(double x, Fault *f) {
  return Trig(
      x, [](double v) { return std::sin(v); }, true, f);
}
double Cos(double x, Fault *f) {
  return Trig(
      x, [](double v) { return std::cos(v); }, true, f);
}
double Tan(double x, Fault *f) {
  return Trig(
      x, [](double v) { return std::tan(v); }, false, f);
}

// dasin, dacos
double Arc(double x, double (*fn)(double), Fault *f) {
  if (std::isnan(x)) return x;
  if (x < -1.0 || x > 1.0) {
    Raise(f, Fault::kInputOutOfRange);
    return 0.0;
  }
  double r = fn(x);
  if (std::isinf(r)) Raise(f, Fault::kOverflow);
  return r;
}

// datan
double Atan(double x, Fault *f) {
  if (std::isnan(x)) return x;
  double r = std::atan(x);
  if (std::isinf(r)) Raise(f, Fault::kOverflow);
  return r;
}

// dsinh: an overflow is ±Infinity, not an error
double Sinh(double x, Fault *) {
  errno = 0;
  double r = std::sinh(x);
  if (errno == ERANGE) r = x < 0 ? -INFINITY : INFINITY;
  return r;
}

// dcosh: an overflow is Infinity; 0 (impossible) would underflow
double Cosh(double x, Fault *f) {
  errno = 0;
  double r = std::cosh(x);
  if (errno == ERANGE) r = INFINITY;
  if (r == 0.0) Raise(f, Fault::kUnderflow);
  return r;
}

// dtanh
double Tanh(double x, Fault *f) {
  double r = std::tanh(x);
  if (std::isinf(r)) Raise(f, Fault::kOverflow);
  return r;
}

// dsign: C's comparisons (sign(NaN) = 0)
double Sign(double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }

// rules.cpp's SafeDiv: ±Infinity or NaN where the denominator is 0, by the
// numerator's sign as float8 compares it (NaN > 0); else num / den, checked.
double SafeDiv(double num, double den, Fault *f) {
  if (Eq(den, 0.0)) return Gt(num, 0.0) ? INFINITY : (Lt(num, 0.0) ? -INFINITY : NAN);
  return Div(num, den, f);
}

using V = double (*)(const Args &, bool *, Fault *);
using P = double (*)(size_t, const Args &, double, Fault *);

// GREATEST and LEAST (ExecEvalMinMax): the first non-NULL argument, replaced
// by each later one that compares greater (less); NULL where all are NULL.
template <int kSign>
double Extremum(const Args &a, bool *is_null, Fault *) {
  bool any = false;
  double r = 0.0;
  for (size_t k = 0; k < a.n; k++) {
    if (a.null && a.null[k]) continue;
    if (!any || Cmp(a.v[k], r) * kSign > 0) r = a.v[k];
    any = true;
  }
  *is_null = !any;
  return r;
}
// rules.cpp's ExtremumPartial: 1 where a[i] = y and no later argument is.
double ExtremumPartial(size_t i, const Args &a, double y, Fault *) {
  if ((a.null && a.null[i]) || !Eq(a.v[i], y)) return 0.0;
  for (size_t k = i + 1; k < a.n; k++)
    if (!(a.null && a.null[k]) && Eq(a.v[k], y)) return 0.0;
  return 1.0;
}

double One(size_t, const Args &, double, Fault *) { return 1.0; }

const ScalarRule kAdd{"add", 2, false, [](const Args &a, bool *, Fault *f) { return Pl(a.v[0], a.v[1], f); }, One};
const ScalarRule kSub{"sub", 2, false, [](const Args &a, bool *, Fault *f) { return Mi(a.v[0], a.v[1], f); },
                      [](size_t i, const Args &, double, Fault *) { return i == 0 ? 1.0 : -1.0; }};
const ScalarRule kMul{"mul", 2, false, [](const Args &a, bool *, Fault *f) { return Mul(a.v[0], a.v[1], f); },
                      [](size_t i, const Args &a, double, Fault *) { return a.v[1 - i]; }};
const ScalarRule kDiv{"div", 2, false, [](const Args &a, bool *, Fault *f) { return Div(a.v[0], a.v[1], f); },
                      [](size_t i, const Args &a, double y, Fault *f) {
                        return i == 0 ? SafeDiv(1.0, a.v[1], f) : -SafeDiv(y, a.v[1], f);
                      }};
const ScalarRule kNeg{"neg", 1, false, [](const Args &a, bool *, Fault *) { return -a.v[0]; },
                      [](size_t, const Args &, double, Fault *) { return -1.0; }};
const ScalarRule kPos{"pos", 1, false, [](const Args &a, bool *, Fault *) { return a.v[0]; }, One};
const ScalarRule kExp{"exp", 1, false, [](const Args &a, bool *, Fault *f) { return Exp(a.v[0], f); },
                      [](size_t, const Args &, double y, Fault *) { return y; }};
const ScalarRule kLn{"ln", 1, false, [](const Args &a, bool *, Fault *f) { return Ln(a.v[0], f); },
                     [](size_t, const Args &a, double, Fault *f) { return SafeDiv(1.0, a.v[0], f); }};
const ScalarRule kLog10{
    "log10", 1, false, [](const Args &a, bool *, Fault *f) { return Log10(a.v[0], f); },
    [](size_t, const Args &a, double, Fault *f) { return SafeDiv(1.0, Mul(a.v[0], Ln(10.0, f), f), f); }};
const ScalarRule kSqrt{"sqrt", 1, false, [](const Args &a, bool *, Fault *f) { return Sqrt(a.v[0], f); },
                       [](size_t, const Args &, double y, Fault *f) { return SafeDiv(0.5, y, f); }};
const ScalarRule kPow{"pow", 2, false, [](const Args &a, bool *, Fault *f) { return Pow(a.v[0], a.v[1], f); },
                      [](size_t i, const Args &a, double y, Fault *f) {
                        double x = a.v[0], e = a.v[1];
                        if (i == 0) {
                          if (Eq(e, 0.0)) return 0.0;
                          if (Eq(x, 0.0) && Lt(e, 1.0)) return static_cast<double>(INFINITY);
                          return Mul(e, Pow(x, Mi(e, 1.0, f), f), f);
                        }
                        if (Eq(x, 0.0)) return 0.0;
                        if (Lt(x, 0.0)) return static_cast<double>(NAN);
                        return Mul(y, Ln(x, f), f);
                      }};
const ScalarRule kAbs{"abs", 1, false, [](const Args &a, bool *, Fault *) { return std::fabs(a.v[0]); },
                      [](size_t, const Args &a, double, Fault *) { return Sign(a.v[0]); }};
const ScalarRule kSin{"sin", 1, false, [](const Args &a, bool *, Fault *f) { return Sin(a.v[0], f); },
                      [](size_t, const Args &a, double, Fault *f) { return Cos(a.v[0], f); }};
const ScalarRule kCos{"cos", 1, false, [](const Args &a, bool *, Fault *f) { return Cos(a.v[0], f); },
                      [](size_t, const Args &a, double, Fault *f) { return -Sin(a.v[0], f); }};
const ScalarRule kTan{"tan", 1, false, [](const Args &a, bool *, Fault *f) { return Tan(a.v[0], f); },
                      [](size_t, const Args &, double y, Fault *f) { return Pl(1.0, Mul(y, y, f), f); }};
double ArcPartial(double num, double x, Fault *f) { return SafeDiv(num, Sqrt(Mi(1.0, Mul(x, x, f), f), f), f); }
const ScalarRule kAsin{"asin", 1, false,
                       [](const Args &a, bool *, Fault *f) {
                         return Arc(
                             a.v[0], [](double v) { return std::asin(v); }, f);
                       },
                       [](size_t, const Args &a, double, Fault *f) { return ArcPartial(1.0, a.v[0], f); }};
const ScalarRule kAcos{"acos", 1, false,
                       [](const Args &a, bool *, Fault *f) {
                         return Arc(
                             a.v[0], [](double v) { return std::acos(v); }, f);
                       },
                       [](size_t, const Args &a, double, Fault *f) { return ArcPartial(-1.0, a.v[0], f); }};
const ScalarRule kAtan{
    "atan", 1, false, [](const Args &a, bool *, Fault *f) { return Atan(a.v[0], f); },
    [](size_t, const Args &a, double, Fault *f) { return Div(1.0, Pl(1.0, Mul(a.v[0], a.v[0], f), f), f); }};
const ScalarRule kSinh{"sinh", 1, false, [](const Args &a, bool *, Fault *f) { return Sinh(a.v[0], f); },
                       [](size_t, const Args &a, double, Fault *f) { return Cosh(a.v[0], f); }};
const ScalarRule kCosh{"cosh", 1, false, [](const Args &a, bool *, Fault *f) { return Cosh(a.v[0], f); },
                       [](size_t, const Args &a, double, Fault *f) { return Sinh(a.v[0], f); }};
const ScalarRule kTanh{"tanh", 1, false, [](const Args &a, bool *, Fault *f) { return Tanh(a.v[0], f); },
                       [](size_t, const Args &, double y, Fault *f) { return Mi(1.0, Mul(y, y, f), f); }};
// (a cast of float8 to float8 only: a region takes no other)
const ScalarRule kCast{"cast", 1, false, [](const Args &a, bool *, Fault *) { return a.v[0]; }, One};
const ScalarRule kStop{"stop_gradient", 1, false, [](const Args &a, bool *, Fault *) { return a.v[0]; }, nullptr};
const ScalarRule kSign{"sign", 1, false, [](const Args &a, bool *, Fault *) { return Sign(a.v[0]); }, nullptr};
const ScalarRule kGreatest{"greatest", -1, true, Extremum<1>, ExtremumPartial};
const ScalarRule kLeast{"least", -1, true, Extremum<-1>, ExtremumPartial};

const std::vector<const ScalarRule *> kRules = {
    &kAdd, &kSub, &kMul,  &kDiv,  &kNeg,  &kPos,  &kExp,  &kLn,   &kLog10, &kSqrt, &kPow,  &kAbs,      &kSin,
    &kCos, &kTan, &kAsin, &kAcos, &kAtan, &kSinh, &kCosh, &kTanh, &kCast,  &kStop, &kSign, &kGreatest, &kLeast};

}  // namespace

double Float8Pl(double a, double b, Fault *f) { return Pl(a, b, f); }
double Float8Mi(double a, double b, Fault *f) { return Mi(a, b, f); }
double Float8Mul(double a, double b, Fault *f) { return Mul(a, b, f); }
double Float8Div(double a, double b, Fault *f) { return Div(a, b, f); }
int Float8Cmp(double a, double b) { return Cmp(a, b); }

const char *Sqlstate(Fault f) {
  switch (f) {
    case Fault::kNone:
      return "00000";
    case Fault::kOverflow:
    case Fault::kUnderflow:
    case Fault::kInputOutOfRange:
      return "22003";
    case Fault::kDivisionByZero:
      return "22012";
    case Fault::kLogOfZero:
    case Fault::kLogOfNegative:
      return "2201E";
    case Fault::kSqrtOfNegative:
    case Fault::kZeroToNegativePower:
    case Fault::kNegativeToNonInteger:
      return "2201F";
  }
  return "XX000";
}

const char *Message(Fault f) {
  switch (f) {
    case Fault::kNone:
      return "";
    case Fault::kOverflow:
      return "value out of range: overflow";
    case Fault::kUnderflow:
      return "value out of range: underflow";
    case Fault::kDivisionByZero:
      return "division by zero";
    case Fault::kLogOfZero:
      return "cannot take logarithm of zero";
    case Fault::kLogOfNegative:
      return "cannot take logarithm of a negative number";
    case Fault::kSqrtOfNegative:
      return "cannot take square root of a negative number";
    case Fault::kZeroToNegativePower:
      return "zero raised to a negative power is undefined";
    case Fault::kNegativeToNonInteger:
      return "a negative number raised to a non-integer power yields a complex result";
    case Fault::kInputOutOfRange:
      return "input is out of range";
  }
  return "";
}

const ScalarRule *FindScalarRule(const std::string &name) {
  for (const ScalarRule *r : kRules)
    if (name == r->name) return r;
  return nullptr;
}

const std::vector<const ScalarRule *> &AllScalarRules() { return kRules; }

}  // namespace ddx::dense
