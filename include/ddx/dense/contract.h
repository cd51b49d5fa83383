// Dense kernels for model regions (issue 38): a contraction of two relations
// keyed by small dense integer keys, on arrays, with exactly PostgreSQL's
// answer. Pure C++ (no PostgreSQL headers), like src/core: the executor node
// that will feed it (scattering its children's rows into Matrix) and raise
// its errors lives in the adapter.
//
// What "exactly PostgreSQL's answer" means for
//
//   SELECT a.i, b.j, sum(a.v * b.v) FROM a JOIN b ON a.k = b.k GROUP BY a.i, b.j
//
// (with (i, k) unique in a and (k, j) unique in b, which is what makes them
// matrices):
//   - a group (i, j) exists iff some k has both rows (a row with a NULL value
//     is a row: it makes the pair, not a product);
//   - its sum is NULL iff every product is (float8 sum skips NULLs), else the
//     sum of the non-NULL products in some order (float8pl from the first
//     one: a sum of -0.0s is -0.0);
//   - float8mul raises 22003 where a product of finite values overflows to
//     inf or underflows to 0, float8pl where a sum of finite values
//     overflows: reported here as FloatError, for the caller to raise.
// Only the order of the additions may differ from PostgreSQL's (its hash join
// has an order of its own too): values within the rounding of a reordered
// sum, bit for bit where every partial sum is exact (multiples of 1/8 of
// moderate size: the unit tests' first tier).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ddx::dense {

// A relation of two dense integer keys as a matrix: cell (i, j) is its row
// with keys (i, j), if there is one (present), and that row's value, NULL or
// not. The value of a cell that is absent or NULL is +0.0 (Set keeps it so).
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<double> val;       // rows x cols, row-major
  std::vector<uint8_t> present;  // 1 where the row exists
  std::vector<uint8_t> null;     // 1 where it exists with a NULL value

  Matrix() = default;
  Matrix(int64_t r, int64_t c)
      : rows(r), cols(c), val(static_cast<std::size_t>(r * c), 0.0), present(val.size(), 0), null(val.size(), 0) {}
  std::size_t At(int64_t i, int64_t j) const { return static_cast<std::size_t>(i * cols + j); }
  void Set(int64_t i, int64_t j, double v) {
    val[At(i, j)] = v;
    present[At(i, j)] = 1;
    null[At(i, j)] = 0;
  }
  void SetNull(int64_t i, int64_t j) {
    val[At(i, j)] = 0.0;
    present[At(i, j)] = 1;
    null[At(i, j)] = 1;
  }
};

// PostgreSQL's float errors (SQLSTATE 22003, "value out of range").
enum class FloatError { kNone, kOverflow, kUnderflow };

// How a contraction was computed: by the kernel library's matrix product
// (when Guard holds), or by scalar loops that check every product and every
// addition as float8mul and float8pl do.
enum class Path { kGemm, kScalar };

struct Contraction {
  Matrix out;  // rows of a x cols of b; undefined where error is set
  Path path = Path::kScalar;
  FloatError error = FloatError::kNone;
};

// Whether any order of the additions gives PostgreSQL's answer without a
// float error, so that the matrix product may compute it: every value
// finite, no product of non-zero values that rounds to 0
// (min |a| * min |b| over non-zero values > 0), and no partial sum that can
// overflow (k * max |a| * max |b| * (1 + 4 k eps) < DBL_MAX, k = a.cols).
bool Guard(const Matrix &a, const Matrix &b);

// a (i x k) times b (k x j) as SUM(a.v * b.v) ... GROUP BY i, j (above).
// Requires a.cols == b.rows.
Contraction Contract(const Matrix &a, const Matrix &b);

}  // namespace ddx::dense
