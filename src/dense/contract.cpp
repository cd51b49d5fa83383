// The contraction of two dense relations (include/ddx/dense/contract.h).
//
// Why Eigen: header-only, one thread unless built with OpenMP (and
// EIGEN_DONT_PARALLELIZE says so anyway), its blocks on the stack below
// 128 kB. Debian's serial OpenBLAS multiplies faster (it picks its
// instruction set at run time; Eigen is compiled for ddx.so's baseline),
// but brings a 32 MB work buffer outside palloc and a library to choose
// among Debian's alternatives, and either is far below what reading a
// region's rows costs (../shared/NOTES-dense.md section 3; measured:
// bench/RESULTS.md, "Dense kernels").
#define EIGEN_DONT_PARALLELIZE
#include "ddx/dense/contract.h"

#include <Eigen/Core>
#include <cfloat>
#include <cmath>

namespace ddx::dense {

namespace {

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMajor>;
using Map = Eigen::Map<RowMajor>;

struct Stats {
  bool finite = true, all_present = true, any_null = false;
  double max_abs = 0.0, min_nonzero = INFINITY;
};

Stats Scan(const Matrix &m) {
  Stats s;
  for (size_t c = 0; c < m.val.size(); c++) {
    if (!m.present[c]) {
      s.all_present = false;
      continue;
    }
    if (m.null[c]) {
      s.any_null = true;
      continue;
    }
    double v = std::fabs(m.val[c]);
    if (!std::isfinite(v)) s.finite = false;
    if (v > s.max_abs) s.max_abs = v;
    if (v != 0.0 && v < s.min_nonzero) s.min_nonzero = v;
  }
  return s;
}

bool Holds(const Stats &a, const Stats &b, int64_t k) {
  if (!a.finite || !b.finite) return false;
  // (no two non-zero values: no product of non-zero values at all)
  if (std::isfinite(a.min_nonzero) && std::isfinite(b.min_nonzero) && a.min_nonzero * b.min_nonzero == 0.0)
    return false;
  double bound = a.max_abs * b.max_abs;
  if (!std::isfinite(bound)) return false;
  double kd = static_cast<double>(k);
  bound *= kd * (1.0 + 4.0 * kd * DBL_EPSILON);
  return bound < DBL_MAX;
}

// One cell in the order of k, as float8mul and float8pl compute it: the
// sum from the first non-NULL product. Returns whether some pair exists;
// sets *is_null, *sum, or *error.
bool Cell(const Matrix &a, const Matrix &b, int64_t i, int64_t j, bool *is_null, double *sum, FloatError *error) {
  bool pair = false, any = false;
  double s = 0.0;
  for (int64_t k = 0; k < a.cols; k++) {
    size_t ca = a.At(i, k), cb = b.At(k, j);
    if (!a.present[ca] || !b.present[cb]) continue;
    pair = true;
    if (a.null[ca] || b.null[cb]) continue;
    double x = a.val[ca], y = b.val[cb], p = x * y;
    if (std::isinf(p) && !std::isinf(x) && !std::isinf(y)) {
      *error = FloatError::kOverflow;
      return pair;
    }
    if (p == 0.0 && x != 0.0 && y != 0.0) {
      *error = FloatError::kUnderflow;
      return pair;
    }
    if (!any) {
      s = p;
      any = true;
      continue;
    }
    double t = s + p;
    if (std::isinf(t) && !std::isinf(s) && !std::isinf(p)) {
      *error = FloatError::kOverflow;
      return pair;
    }
    s = t;
  }
  *is_null = !any;
  *sum = any ? s : 0.0;
  return pair;
}

Contraction Scalar(const Matrix &a, const Matrix &b) {
  Contraction c{Matrix(a.rows, b.cols), Path::kScalar, FloatError::kNone};
  for (int64_t i = 0; i < a.rows; i++)
    for (int64_t j = 0; j < b.cols; j++) {
      bool is_null = false;
      double sum = 0.0;
      bool pair = Cell(a, b, i, j, &is_null, &sum, &c.error);
      if (c.error != FloatError::kNone) return c;
      if (!pair) continue;
      if (is_null)
        c.out.SetNull(i, j);
      else
        c.out.Set(i, j, sum);
    }
  return c;
}

// The indicator of a's cells that exist (with_null) or hold a value.
RowMajor Indicator(const Matrix &m, bool with_null) {
  RowMajor r(m.rows, m.cols);
  for (int64_t i = 0; i < m.rows; i++)
    for (int64_t j = 0; j < m.cols; j++) {
      size_t c = m.At(i, j);
      r(i, j) = m.present[c] && (with_null || !m.null[c]) ? 1.0 : 0.0;
    }
  return r;
}

}  // namespace

bool Guard(const Matrix &a, const Matrix &b) { return Holds(Scan(a), Scan(b), a.cols); }

Contraction Contract(const Matrix &a, const Matrix &b) {
  Stats sa = Scan(a), sb = Scan(b);
  if (!Holds(sa, sb, a.cols)) return Scalar(a, b);
  Contraction c{Matrix(a.rows, b.cols), Path::kGemm, FloatError::kNone};
  if (c.out.val.empty()) return c;
  // Absent and NULL cells hold +0.0: they add +0.0 products, which change no
  // sum but one of -0.0s only (fixed below), and no NaN (all finite).
  Map(c.out.val.data(), a.rows, b.cols).noalias() =
      ConstMap(a.val.data(), a.rows, a.cols) * ConstMap(b.val.data(), b.rows, b.cols);
  // Which groups exist and which hold a value: the products of the
  // indicators count each cell's pairs and non-NULL products exactly (counts
  // below 2^53).
  // (Where every row exists, every group has k pairs; where no value is
  // NULL, every pair is a product.)
  RowMajor pairs, values;
  bool dense = sa.all_present && sb.all_present, nulls = sa.any_null || sb.any_null;
  if (!dense) pairs = Indicator(a, true) * Indicator(b, true);
  if (nulls) values = Indicator(a, false) * Indicator(b, false);
  for (int64_t i = 0; i < a.rows; i++)
    for (int64_t j = 0; j < b.cols; j++) {
      size_t o = c.out.At(i, j);
      bool pair = dense ? a.cols > 0 : pairs(i, j) > 0.0;
      bool value = nulls ? values(i, j) > 0.0 : pair;
      if (!pair) {
        c.out.val[o] = 0.0;
        continue;
      }
      c.out.present[o] = 1;
      if (!value) {
        c.out.SetNull(i, j);
        continue;
      }
      // A zero sum: its sign is PostgreSQL's only when the sum starts from
      // the first product (a sum of -0.0s is -0.0, the product's seed +0.0
      // made it +0.0); its k terms again, in order.
      if (c.out.val[o] == 0.0) {
        bool is_null = false;
        double sum = 0.0;
        FloatError e = FloatError::kNone;
        Cell(a, b, i, j, &is_null, &sum, &e);
        c.out.val[o] = sum;
      }
    }
  return c;
}

}  // namespace ddx::dense
