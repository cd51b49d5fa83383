// The dense contraction (include/ddx/dense/contract.h) against its oracle:
// the SQL statement's semantics computed row by row — the two relations as
// lists of rows, joined pair by pair in a shuffled order (a hash join's order
// is its own), grouped, summed as float8 sum does (from the first non-NULL
// product, float8mul's and float8pl's range checks) — never against the
// kernel's own output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "ddx/dense/contract.h"

namespace {

using ddx::dense::Contract;
using ddx::dense::Contraction;
using ddx::dense::FloatError;
using ddx::dense::Matrix;
using ddx::dense::Path;

struct Row {
  int64_t r, c;
  std::optional<double> v;
};

std::vector<Row> Rows(const Matrix &m) {
  std::vector<Row> out;
  for (int64_t i = 0; i < m.rows; i++)
    for (int64_t j = 0; j < m.cols; j++)
      if (m.present[m.At(i, j)])
        out.push_back({i, j, m.null[m.At(i, j)] ? std::nullopt : std::optional<double>(m.val[m.At(i, j)])});
  return out;
}

struct Group {
  bool any = false;
  double sum = 0.0;
};

struct Oracle {
  std::map<std::pair<int64_t, int64_t>, Group> groups;
  FloatError error = FloatError::kNone;
};

// SELECT a.r, b.c, sum(a.v * b.v) FROM a JOIN b ON a.c = b.r GROUP BY a.r, b.c
Oracle Sql(const Matrix &a, const Matrix &b, std::mt19937_64 &rng) {
  std::map<int64_t, std::vector<Row>> by_key;  // the join: b's rows by a.c = b.r
  for (const Row &y : Rows(b)) by_key[y.r].push_back(y);
  std::vector<std::pair<Row, Row>> pairs;
  for (const Row &x : Rows(a))
    for (const Row &y : by_key[x.c]) pairs.push_back({x, y});
  std::shuffle(pairs.begin(), pairs.end(), rng);
  Oracle o;
  for (const auto &[x, y] : pairs) {
    Group &g = o.groups[{x.r, y.c}];
    if (!x.v || !y.v) continue;
    double p = *x.v * *y.v;
    if (std::isinf(p) && !std::isinf(*x.v) && !std::isinf(*y.v)) o.error = FloatError::kOverflow;
    if (p == 0.0 && *x.v != 0.0 && *y.v != 0.0) o.error = FloatError::kUnderflow;
    if (!g.any) {
      g.any = true;
      g.sum = p;
      continue;
    }
    double t = g.sum + p;
    if (std::isinf(t) && !std::isinf(g.sum) && !std::isinf(p)) o.error = FloatError::kOverflow;
    g.sum = t;
  }
  return o;
}

bool SameBits(double x, double y) {
  if (std::isnan(x) && std::isnan(y)) return true;
  return std::memcmp(&x, &y, sizeof x) == 0;
}

// Every group of the oracle, and no other, with its NULL or value: bit for
// bit (exact), or within the rounding of a reordered sum of k terms.
void ExpectMatches(const Contraction &c, const Oracle &o, const Matrix &a, const Matrix &b, bool exact) {
  ASSERT_EQ(c.error, FloatError::kNone);
  ASSERT_EQ(c.out.rows, a.rows);
  ASSERT_EQ(c.out.cols, b.cols);
  int64_t found = 0;
  for (int64_t i = 0; i < a.rows; i++)
    for (int64_t j = 0; j < b.cols; j++) {
      size_t at = c.out.At(i, j);
      auto g = o.groups.find({i, j});
      ASSERT_EQ(c.out.present[at] != 0, g != o.groups.end()) << i << "," << j;
      if (g == o.groups.end()) continue;
      found++;
      ASSERT_EQ(c.out.null[at] != 0, !g->second.any) << i << "," << j;
      if (!g->second.any) continue;
      double got = c.out.val[at], want = g->second.sum;
      if (exact) {
        EXPECT_TRUE(SameBits(got, want)) << i << "," << j << ": " << got << " vs " << want;
      } else {
        // |reordered - sql| <= 2 (k - 1) eps * sum |terms|
        double mag = 0.0;
        for (int64_t k = 0; k < a.cols; k++)
          if (a.present[a.At(i, k)] && b.present[b.At(k, j)])
            mag += std::fabs(a.val[a.At(i, k)] * b.val[b.At(k, j)]);
        EXPECT_LE(std::fabs(got - want), 2.0 * static_cast<double>(a.cols) * DBL_EPSILON * mag + DBL_MIN)
            << i << "," << j;
        EXPECT_EQ(std::signbit(got), std::signbit(want)) << i << "," << j;
      }
    }
  EXPECT_EQ(found, static_cast<int64_t>(o.groups.size()));
}

// A relation of r x c keys: each row there with probability p_present,
// its value NULL with p_null; values from gen.
template <class Gen>
Matrix Random(int64_t r, int64_t c, double p_present, double p_null, Gen gen, std::mt19937_64 &rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  Matrix m(r, c);
  for (int64_t i = 0; i < r; i++)
    for (int64_t j = 0; j < c; j++) {
      if (u(rng) >= p_present) continue;
      if (u(rng) < p_null)
        m.SetNull(i, j);
      else
        m.Set(i, j, gen());
    }
  return m;
}

// A random pair of relations i x k and k x j: the matrix product's path,
// and the oracle's groups (exactly, or within the reordered rounding).
template <class Gen>
void ExpectRandom(int64_t i, int64_t k, int64_t j, double p_present, double p_null, Gen gen, std::mt19937_64 &rng,
                  bool exact) {
  Matrix a = Random(i, k, p_present, p_null, gen, rng);
  Matrix b = Random(k, j, p_present, p_null, gen, rng);
  Contraction c = Contract(a, b);
  EXPECT_EQ(c.path, Path::kGemm);
  ExpectMatches(c, Sql(a, b, rng), a, b, exact);
}

// Multiples of 1/8 in [-4, 4], a fifth of them zeros of either sign: every
// product and every partial sum of up to 64 terms is exact in any order,
// so the kernel must give the oracle's bits (the sign of a zero sum too).
TEST(DenseContract, EighthsAreExactInAnyOrder) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> n(-32, 32), z(0, 9);
  auto eighth = [&] {
    int k = z(rng);
    if (k == 0) return -0.0;
    if (k == 1) return 0.0;
    return n(rng) / 8.0;
  };
  struct Shape {
    int64_t i, k, j;
    double p_present, p_null;
  } shapes[] = {{1, 1, 1, 1, 0}, {7, 5, 3, 1, 0},    {16, 16, 8, 1, 0},   {16, 16, 8, 0.8, 0.15},
                {33, 64, 9, 0.8, 0}, {9, 64, 33, 1, 0.15}, {5, 3, 4, 0.3, 0.5}, {0, 4, 3, 1, 0},
                {4, 0, 3, 1, 0},   {4, 3, 0, 1, 0},    {3, 4, 2, 0, 0},     {6, 6, 6, 1, 1}};
  for (const Shape &s : shapes)
    for (int round = 0; round < 8; round++) ExpectRandom(s.i, s.k, s.j, s.p_present, s.p_null, eighth, rng, true);
}

// Sums of -0.0 products are -0.0 (float8 sum starts from its first value),
// where the matrix product's accumulators start from +0.0.
TEST(DenseContract, SumOfNegativeZerosIsNegativeZero) {
  std::mt19937_64 rng(1);
  Matrix a(2, 3), b(3, 2);
  for (int k = 0; k < 3; k++) {
    a.Set(0, k, -0.0);  // row 0: -0.0 * x
    a.Set(1, k, 1.0);
    b.Set(k, 0, 2.0);
    b.Set(k, 1, 0.0);
  }
  Contraction c = Contract(a, b);
  EXPECT_EQ(c.path, Path::kGemm);
  EXPECT_TRUE(std::signbit(c.out.val[c.out.At(0, 0)]));   // -0 * 2 three times
  EXPECT_TRUE(std::signbit(c.out.val[c.out.At(0, 1)]));   // -0 * +0 three times
  EXPECT_FALSE(std::signbit(c.out.val[c.out.At(1, 1)]));  // 1 * +0
  ExpectMatches(c, Sql(a, b, rng), a, b, true);
}

// General values: within the rounding of a reordered sum.
TEST(DenseContract, NormalValuesWithinReorderedRounding) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> g(0.0, 1.0);
  auto normal = [&] { return g(rng) * std::exp(3.0 * g(rng)); };
  for (double p_present : {1.0, 0.8})
    for (double p_null : {0.0, 0.15}) ExpectRandom(40, 32, 24, p_present, p_null, normal, rng, false);
}

// A row that exists with a NULL value makes its groups exist; a group whose
// every product is NULL is NULL; a missing row is no pair at all.
TEST(DenseContract, NullsAndMissingRows) {
  std::mt19937_64 rng(3);
  Matrix a(2, 2), b(2, 2);
  a.SetNull(0, 0);  // (0, *): only NULL products -> NULL groups
  a.Set(1, 0, 2.0);
  a.Set(1, 1, 3.0);
  b.Set(0, 0, 5.0);
  b.SetNull(1, 0);
  b.Set(1, 1, 7.0);  // (1, 1): 3 * 7; (0, 1): a(0,0) NULL meets no b(0, 1): no pair
  Contraction c = Contract(a, b);
  EXPECT_TRUE(c.out.present[c.out.At(0, 0)] && c.out.null[c.out.At(0, 0)]);
  EXPECT_FALSE(c.out.present[c.out.At(0, 1)]);
  EXPECT_EQ(c.out.val[c.out.At(1, 0)], 10.0);  // 2 * 5 (+ 3 * NULL)
  EXPECT_EQ(c.out.val[c.out.At(1, 1)], 21.0);
  ExpectMatches(c, Sql(a, b, rng), a, b, true);
}

// Non-finite values: the guard refuses the product (NaN and infinities in
// a reordered sum are another matter), the scalar path gives the oracle's
// answer (inf + finite, inf - inf = NaN, NaN: the same in any order).
TEST(DenseContract, NonFiniteValuesTakeTheScalarPath) {
  std::mt19937_64 rng(5);
  Matrix a(2, 3), b(3, 2);
  double av[2][3] = {{INFINITY, 1.0, 2.0}, {NAN, 1.0, -INFINITY}};
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 3; k++) a.Set(i, k, av[i][k]);
  for (int k = 0; k < 3; k++) {
    b.Set(k, 0, 1.0);
    b.Set(k, 1, k == 0 ? -1.0 : 0.5);
  }
  Contraction c = Contract(a, b);
  EXPECT_EQ(c.path, Path::kScalar);
  ExpectMatches(c, Sql(a, b, rng), a, b, true);
}

// PostgreSQL's errors: a product that overflows, one that underflows to 0,
// a sum that overflows though no product does.
TEST(DenseContract, FloatErrorsAsPostgreSQLRaisesThem) {
  std::mt19937_64 rng(9);
  struct Case {
    double x, y;
    int64_t k;
    FloatError want;
  } cases[] = {{1e200, 1e200, 1, FloatError::kOverflow},
               {1e-200, 1e-200, 1, FloatError::kUnderflow},
               {1e154, 1e154, 4, FloatError::kOverflow}};  // each 1e308, their sum inf
  for (const Case &cs : cases) {
    Matrix a(1, cs.k), b(cs.k, 1);
    for (int64_t k = 0; k < cs.k; k++) {
      a.Set(0, k, cs.x);
      b.Set(k, 0, cs.y);
    }
    EXPECT_FALSE(ddx::dense::Guard(a, b));
    Contraction c = Contract(a, b);
    EXPECT_EQ(c.path, Path::kScalar);
    EXPECT_EQ(c.error, cs.want);
    EXPECT_EQ(Sql(a, b, rng).error, cs.want);  // (the oracle agrees)
  }
}

// Near the guard's bounds: large and small values whose products and sums
// stay in range take the matrix product and give the oracle's answer.
TEST(DenseContract, LargeAndSmallValuesInRange) {
  std::mt19937_64 rng(13);
  Matrix a(3, 4), b(4, 3);
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 4; k++) a.Set(i, k, (i + 1) * 1e150 * (k % 2 ? -1 : 1));
  for (int k = 0; k < 4; k++)
    for (int j = 0; j < 3; j++) b.Set(k, j, (j + 1) * 1e150);
  Contraction c = Contract(a, b);
  EXPECT_EQ(c.path, Path::kGemm);
  ExpectMatches(c, Sql(a, b, rng), a, b, false);
  Matrix s(2, 2), t(2, 2);
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 2; k++) {
      s.Set(i, k, 1e-150 * (i + k + 1));
      t.Set(k, i, 1e-150);
    }
  c = Contract(s, t);
  EXPECT_EQ(c.path, Path::kGemm);
  ExpectMatches(c, Sql(s, t, rng), s, t, false);
}

}  // namespace
