// A loss and its gradient on dense arrays (include/ddx/dense/program.h)
// against oracles of its own: the SQL statement's semantics computed row by
// row (the join pair by pair, the groups as a map), the gradient in closed
// form over those rows, and central differences; never the program's own
// output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "ddx/core/ir.h"
#include "ddx/core/ir_build.h"
#include "ddx/dense/program.h"

namespace {

using ddx::ExprP;
using ddx::JoinKind;
using ddx::kFloat8;
using ddx::kInt4;
using ddx::MakeAggregate;
using ddx::MakeCall;
using ddx::MakeCol;
using ddx::MakeConst;
using ddx::MakeFilter;
using ddx::MakeJoin;
using ddx::MakeOpaque;
using ddx::MakeProject;
using ddx::MakeScan;
using ddx::RelP;
using ddx::dense::Compile;
using ddx::dense::Fault;
using ddx::dense::Outcome;
using ddx::dense::Rows;

ExprP Eq(int a, int b) {
  return MakeOpaque("($1 OPERATOR(pg_catalog.=) $2)", "=", {MakeCol(a, 0, kInt4), MakeCol(b, 0, kInt4)}, ddx::kBool);
}

struct Matmul {
  RelP x, w, loss;
};

// z    = SELECT x.s, w.j, sum(x.val * w.val) FROM x JOIN w ON x.f = w.f GROUP BY x.s, w.j
// loss = SELECT sum(<f>(z)) FROM z, f = power(tanh(z), 2) (or exp(z))
// (by_cells: the product written x.val * w.val * 1.0, which is no
// matrix product: the join formed cell by cell)
Matmul MatmulLoss(bool use_exp = false, bool by_cells = false) {
  Matmul m;
  m.x = MakeScan("public.x", {"s", "f", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, -1});
  m.w = MakeScan("public.w", {"f", "j", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, 0});
  RelP j = MakeJoin(m.x, m.w, JoinKind::Inner, Eq(1, 3));
  ExprP prod = MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(5, 0, kFloat8)}, kFloat8);
  if (by_cells) prod = MakeCall("mul", {prod, MakeConst("'1.0'::pg_catalog.float8", kFloat8)}, kFloat8);
  RelP p = MakeProject(j, {MakeCol(0, 0, kInt4), MakeCol(4, 0, kInt4), prod});
  RelP z = MakeAggregate(p, 2, {{"sum", 2}}, {kInt4, kInt4, kFloat8});
  ExprP zc = MakeCol(2, 0, kFloat8);
  ExprP f = use_exp ? MakeCall("exp", {zc}, kFloat8)
                    : MakeCall("pow", {MakeCall("tanh", {zc}, kFloat8), MakeConst("('2'::integer)", kInt4)}, kFloat8);
  m.loss = MakeAggregate(MakeProject(z, {f}), 0, {{"sum", 0}}, {kFloat8});
  return m;
}

struct Row3 {
  int a, b;
  double v;
};

Rows ToRows(const std::vector<Row3> &rs) {
  Rows r;
  r.n = rs.size();
  r.val.assign(3, std::vector<double>(r.n));
  r.null.assign(3, std::vector<uint8_t>(r.n, 0));
  for (size_t i = 0; i < r.n; i++) {
    r.val[0][i] = rs[i].a;
    r.val[1][i] = rs[i].b;
    r.val[2][i] = rs[i].v;
  }
  return r;
}

// The statement row by row: its loss, and d loss / d w.val per row of w in
// closed form (d/dw(f,j) = sum over x rows (s, f) of x.val * f'(z(s, j))).
std::pair<double, std::vector<double>> Oracle(const std::vector<Row3> &x, const std::vector<Row3> &w, bool use_exp) {
  std::map<std::pair<int, int>, double> z;
  for (const Row3 &a : x)
    for (const Row3 &b : w)
      if (a.b == b.a) z[{a.a, b.b}] += a.v * b.v;
  double loss = 0.0;
  for (const auto &[k, v] : z) loss += use_exp ? std::exp(v) : std::pow(std::tanh(v), 2);
  std::vector<double> g(w.size(), 0.0);
  for (size_t i = 0; i < w.size(); i++)
    for (const Row3 &a : x) {
      if (a.b != w[i].a) continue;
      double v = z.at({a.a, w[i].b}), t = std::tanh(v);
      g[i] += a.v * (use_exp ? std::exp(v) : 2 * t * (1 - t * t));
    }
  return {loss, g};
}

Outcome RunOn(const Matmul &m, const std::vector<Row3> &x, const std::vector<Row3> &w, size_t limit = 1 << 26) {
  std::string why;
  auto p = Compile(m.loss, &why);
  EXPECT_TRUE(p) << why;
  if (!p) return {};
  Rows xr = ToRows(x), wr = ToRows(w);
  std::vector<const Rows *> in;
  for (const ddx::Rel *s : ddx::dense::Scans(*p)) in.push_back(s == m.x.get() ? &xr : &wr);
  return ddx::dense::Run(*p, in, limit);
}

// Keys that are not positions (scattered, in no order), some (s, f) cells
// missing: the groups that exist are those with a pair.
std::pair<std::vector<Row3>, std::vector<Row3>> Data(std::mt19937_64 &rng, int ns, int nf, int nj, double missing) {
  std::normal_distribution<double> v(0.0, 0.7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<Row3> x, w;
  for (int s = 0; s < ns; s++)
    for (int f = 0; f < nf; f++)
      if (u(rng) >= missing) x.push_back({1000 + 7 * s, -3 + 5 * f, v(rng)});
  for (int f = 0; f < nf; f++)
    for (int j = 0; j < nj; j++) w.push_back({-3 + 5 * f, 40 - 2 * j, v(rng)});
  std::shuffle(x.begin(), x.end(), rng);
  std::shuffle(w.begin(), w.end(), rng);
  return {x, w};
}

TEST(DenseProgram, MatmulLossAndGradientAsTheStatement) {
  std::mt19937_64 rng(1);
  for (int run = 0; run < 6; run++) {
    bool by_cells = run == 2 || run == 3;
    auto [x, w] = Data(rng, 23, 5, 4, run % 2 ? 0.3 : 0.0);
    if (run >= 4)  // keys far apart: positions by a hash table, not a span's
      for (Row3 &r : x) r.a *= 1000003;
    Outcome o = RunOn(MatmulLoss(false, by_cells), x, w);
    ASSERT_TRUE(o.done) << o.why;
    EXPECT_EQ(o.products, by_cells ? 0 : 1);
    EXPECT_EQ(o.fault, Fault::kNone);
    auto [loss, g] = Oracle(x, w, false);
    EXPECT_NEAR(o.loss, loss, 1e-12 * std::fabs(loss));
    ASSERT_EQ(o.grads.size(), 1u);
    ASSERT_EQ(o.grads[0].val.size(), w.size());
    for (size_t i = 0; i < w.size(); i++) EXPECT_NEAR(o.grads[0].val[i], g[i], 1e-12 * (1 + std::fabs(g[i]))) << i;
  }
}

// Columns beside the model's (a text column, a float8 column with NULLs,
// projected and never read) and an aggregate no reader reads (a count beside
// the sum): none is computed or checked, and the loss and gradient are the
// matmul's. (The translator's scans carry every column of their table.)
TEST(DenseProgram, ColumnsTheLossDoesNotRead) {
  std::mt19937_64 rng(11);
  auto [x, w] = Data(rng, 13, 4, 3, 0.2);
  const ddx::Type text{"pg_catalog.text", false}, bigint{"bigint", false};
  RelP xs = MakeScan("public.x", {"s", "f", "val", "note", "extra"}, {kInt4, kInt4, kFloat8, text, kFloat8},
                     {-1, -1, -1, -1, -1});
  RelP ws = MakeScan("public.w", {"f", "j", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, 0});
  RelP j = MakeJoin(xs, ws, JoinKind::Inner, Eq(1, 5));
  ExprP prod = MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(7, 0, kFloat8)}, kFloat8);
  RelP p = MakeProject(j, {MakeCol(0, 0, kInt4), MakeCol(6, 0, kInt4), prod, MakeCol(4, 0, kFloat8)});
  RelP z = MakeAggregate(p, 2, {{"sum", 2}, {"count", -1}}, {kInt4, kInt4, kFloat8, bigint});
  ExprP f = MakeCall("pow", {MakeCall("tanh", {MakeCol(2, 0, kFloat8)}, kFloat8), MakeConst("('2'::integer)", kInt4)},
                     kFloat8);
  RelP loss = MakeAggregate(MakeProject(z, {f}), 0, {{"sum", 0}}, {kFloat8});
  std::string why;
  auto prog = Compile(loss, &why);
  ASSERT_TRUE(prog) << why;
  Rows xr = ToRows(x), wr = ToRows(w);
  xr.val.resize(5, std::vector<double>(xr.n, 0.0));
  xr.null.resize(5, std::vector<uint8_t>(xr.n, 0));
  for (size_t i = 0; i < xr.n; i++) xr.null[3][i] = xr.null[4][i] = i % 3 == 0;  // (NULLs where not read)
  std::vector<const Rows *> in;
  for (const ddx::Rel *s : ddx::dense::Scans(*prog)) in.push_back(s == xs.get() ? &xr : &wr);
  Outcome o = ddx::dense::Run(*prog, in, 1 << 26);
  ASSERT_TRUE(o.done) << o.why;
  auto [want, g] = Oracle(x, w, false);
  EXPECT_NEAR(o.loss, want, 1e-12 * std::fabs(want));
  ASSERT_EQ(o.grads.size(), 1u);
  for (size_t i = 0; i < w.size(); i++) EXPECT_NEAR(o.grads[0].val[i], g[i], 1e-12 * (1 + std::fabs(g[i]))) << i;
  // the same text column read (a key compared with it): refused, not ignored
  RelP read = MakeFilter(xs, MakeOpaque("($1 OPERATOR(pg_catalog.=) $2)", "=",
                                        {MakeCol(3, 0, text), MakeConst("'a'::text", text)}, ddx::kBool));
  RelP l2 = MakeAggregate(MakeProject(read, {MakeCol(2, 0, kFloat8)}), 0, {{"sum", 0}}, {kFloat8});
  EXPECT_FALSE(Compile(l2, &why));
}

// An interrupt asked for between steps stops the run (not done, no
// gradients); one never asked for changes nothing.
int asked_steps = 0;
bool AfterThreeSteps() { return ++asked_steps > 3; }
bool Never() { return false; }

TEST(DenseProgram, InterruptStopsTheRun) {
  std::mt19937_64 rng(9);
  auto [x, w] = Data(rng, 9, 3, 2, 0.0);
  Matmul m = MatmulLoss();
  std::string why;
  auto p = Compile(m.loss, &why);
  ASSERT_TRUE(p) << why;
  Rows xr = ToRows(x), wr = ToRows(w);
  std::vector<const Rows *> in;
  for (const ddx::Rel *s : ddx::dense::Scans(*p)) in.push_back(s == m.x.get() ? &xr : &wr);
  asked_steps = 0;
  Outcome o = ddx::dense::Run(*p, in, 1 << 26, AfterThreeSteps);
  EXPECT_FALSE(o.done);
  EXPECT_TRUE(o.interrupted);
  EXPECT_EQ(asked_steps, 4);
  EXPECT_TRUE(o.grads.empty());
  Outcome never = ddx::dense::Run(*p, in, 1 << 26, Never), none = ddx::dense::Run(*p, in, 1 << 26);
  ASSERT_TRUE(never.done && none.done);
  EXPECT_EQ(never.loss, none.loss);
  EXPECT_FALSE(never.interrupted);
  EXPECT_EQ(never.grads[0].val, none.grads[0].val);
}

TEST(DenseProgram, GradientAgainstCentralDifferences) {
  std::mt19937_64 rng(2);
  auto [x, w] = Data(rng, 9, 3, 2, 0.2);
  Matmul m = MatmulLoss();
  Outcome o = RunOn(m, x, w);
  ASSERT_TRUE(o.done) << o.why;
  for (size_t i = 0; i < w.size(); i++) {
    const double h = 1e-6;
    auto up = w, down = w;
    up[i].v += h;
    down[i].v -= h;
    double fd = (Oracle(x, up, false).first - Oracle(x, down, false).first) / (2 * h);
    EXPECT_NEAR(o.grads[0].val[i], fd, 1e-7 * (1 + std::fabs(fd))) << i;
  }
}

// Cells missing on both sides, and an x key that w lacks: a group exists
// only where a pair does (exp(0) = 1 would count a group formed of absent
// cells).
TEST(DenseProgram, MissingRowsOnBothSides) {
  std::mt19937_64 rng(3);
  auto [x, w] = Data(rng, 17, 4, 3, 0.3);
  std::vector<Row3> kept;
  for (size_t i = 0; i < w.size(); i++)
    if (i % 3 != 0) kept.push_back(w[i]);
  x.push_back({5, 99, 0.25});  // (f = 99: no row of w)
  for (bool by_cells : {false, true}) {
    Outcome o = RunOn(MatmulLoss(true, by_cells), x, kept);
    ASSERT_TRUE(o.done) << o.why;
    auto [loss, g] = Oracle(x, kept, true);
    EXPECT_NEAR(o.loss, loss, 1e-12 * std::fabs(loss));
    for (size_t i = 0; i < kept.size(); i++) EXPECT_NEAR(o.grads[0].val[i], g[i], 1e-12 * (1 + std::fabs(g[i]))) << i;
  }
}

// A filter comparing a key with numbers, either way round (WHERE x.s <= 1050
// AND 1010 < x.s): the rows where it holds.
TEST(DenseProgram, KeysComparedWithNumbers) {
  std::mt19937_64 rng(6);
  auto [x, w] = Data(rng, 15, 4, 3, 0.2);
  Matmul m = MatmulLoss();
  ExprP le = MakeOpaque("($1 OPERATOR(pg_catalog.<=) $2)", "int4le",
                        {MakeCol(0, 0, kInt4), MakeConst("('1050'::integer)", kInt4)}, ddx::kBool);
  ExprP lt = MakeOpaque("($1 OPERATOR(pg_catalog.<) $2)", "int4lt",
                        {MakeConst("('1010'::integer)", kInt4), MakeCol(0, 0, kInt4)}, ddx::kBool);
  RelP xf = ddx::MakeFilter(m.x, MakeOpaque("($1 AND $2)", "AND", {le, lt}, ddx::kBool));
  RelP j = MakeJoin(xf, m.w, JoinKind::Inner, Eq(1, 3));
  RelP z = MakeAggregate(MakeProject(j, {MakeCol(0, 0, kInt4), MakeCol(4, 0, kInt4),
                                         MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(5, 0, kFloat8)}, kFloat8)}),
                         2, {{"sum", 2}}, {kInt4, kInt4, kFloat8});
  ExprP f = MakeCall("pow", {MakeCall("tanh", {MakeCol(2, 0, kFloat8)}, kFloat8), MakeConst("('2'::integer)", kInt4)},
                     kFloat8);
  RelP loss = MakeAggregate(MakeProject(z, {f}), 0, {{"sum", 0}}, {kFloat8});
  std::string why;
  auto p = Compile(loss, &why);
  ASSERT_TRUE(p) << why;
  Rows xr = ToRows(x), wr = ToRows(w);
  std::vector<const Rows *> in;
  for (const ddx::Rel *s : ddx::dense::Scans(*p)) in.push_back(s == m.x.get() ? &xr : &wr);
  Outcome o = ddx::dense::Run(*p, in, 1 << 26);
  ASSERT_TRUE(o.done) << o.why;
  EXPECT_EQ(o.products, 1);
  std::vector<Row3> kept;
  for (const Row3 &r : x)
    if (r.a <= 1050 && 1010 < r.a) kept.push_back(r);
  ASSERT_FALSE(kept.empty());
  ASSERT_LT(kept.size(), x.size());
  auto [l, g] = Oracle(kept, w, false);
  EXPECT_NEAR(o.loss, l, 1e-12 * std::fabs(l));
  for (size_t i = 0; i < w.size(); i++) EXPECT_NEAR(o.grads[0].val[i], g[i], 1e-12 * (1 + std::fabs(g[i]))) << i;
}

// A row of w that no row of x joins: its gradient is 0, as the SQL program's.
TEST(DenseProgram, RowsTheLossDoesNotReadGetZero) {
  std::vector<Row3> x = {{1, 1, 0.5}, {2, 1, -0.25}}, w = {{1, 7, 0.125}, {9, 7, 3.0}};
  Outcome o = RunOn(MatmulLoss(), x, w);
  ASSERT_TRUE(o.done) << o.why;
  EXPECT_EQ(o.grads[0].val[1], 0.0);
  EXPECT_NE(o.grads[0].val[0], 0.0);
}

TEST(DenseProgram, FloatErrorsAsPostgreSQLRaisesThem) {
  std::vector<Row3> x = {{1, 1, 1000.0}}, w = {{1, 1, 1.0}};
  for (bool by_cells : {false, true}) {
    Outcome o = RunOn(MatmulLoss(true, by_cells), x, w);  // exp(1000): 22003
    EXPECT_FALSE(o.done);                                 // (the SQL program's to raise)
    EXPECT_EQ(o.fault, Fault::kOverflow);
    std::vector<Row3> x2 = {{1, 1, 1e200}, {2, 1, 1.0}}, w2 = {{1, 1, 1e200}};
    o = RunOn(MatmulLoss(true, by_cells), x2, w2);  // the product overflows
    EXPECT_EQ(o.fault, Fault::kOverflow);
    x2 = {{1, 1, 1e-200}};
    w2 = {{1, 1, 1e-200}};
    o = RunOn(MatmulLoss(true, by_cells), x2, w2);  // the product underflows
    EXPECT_EQ(o.fault, Fault::kUnderflow);
  }
}

TEST(DenseProgram, RefusesWhatItDoesNotComputeAsSQLDoes) {
  std::vector<Row3> x = {{1, 1, 0.5}, {1, 1, 0.25}}, w = {{1, 1, 1.0}};
  Outcome o = RunOn(MatmulLoss(), x, w);  // two rows of x with the same keys
  EXPECT_FALSE(o.done);
  EXPECT_NE(o.why.find("same keys"), std::string::npos) << o.why;
  x = {{1, 1, 0.5}};
  Rows xr = ToRows(x), wr = ToRows(w);
  xr.null[2][0] = 1;
  Matmul m = MatmulLoss();
  std::string why;
  auto p = Compile(m.loss, &why);
  ASSERT_TRUE(p);
  std::vector<const Rows *> in;
  for (const ddx::Rel *s : ddx::dense::Scans(*p)) in.push_back(s == m.x.get() ? &xr : &wr);
  o = ddx::dense::Run(*p, in, 1 << 26);  // a NULL value
  EXPECT_FALSE(o.done);
  o = RunOn(MatmulLoss(), {{1, 1, 0.5}}, {{1, 1, 1.0}}, 16);  // past the memory limit
  EXPECT_FALSE(o.done);
  EXPECT_NE(o.why.find("memory"), std::string::npos) << o.why;
}

// loss = SELECT avg(exp(m.m)) FROM (SELECT z.s, max(z.z) AS m FROM z GROUP BY z.s) m
// (min for max where `min`), z the matmul's product.
RelP ExtremumLoss(const Matmul &m, const char *fn) {
  RelP j = MakeJoin(m.x, m.w, JoinKind::Inner, Eq(1, 3));
  RelP z = MakeAggregate(MakeProject(j, {MakeCol(0, 0, kInt4), MakeCol(4, 0, kInt4),
                                         MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(5, 0, kFloat8)}, kFloat8)}),
                         2, {{"sum", 2}}, {kInt4, kInt4, kFloat8});
  RelP ext =
      MakeAggregate(MakeProject(z, {MakeCol(0, 0, kInt4), MakeCol(2, 0, kFloat8)}), 1, {{fn, 1}}, {kInt4, kFloat8});
  return MakeAggregate(MakeProject(ext, {MakeCall("exp", {MakeCol(1, 0, kFloat8)}, kFloat8)}), 0, {{"avg", 0}},
                       {kFloat8});
}

// The statement row by row: each s's extremum over its groups, the mean of
// their exps, and d/dw(f, j): each s whose extremum z(s, j) attains shares
// exp(m) / count among its ties, times x(s, f).
std::pair<double, std::vector<double>> ExtremumOracle(const std::vector<Row3> &x, const std::vector<Row3> &w,
                                                      bool max) {
  std::map<std::pair<int, int>, double> z;
  for (const Row3 &a : x)
    for (const Row3 &b : w)
      if (a.b == b.a) z[{a.a, b.b}] += a.v * b.v;
  std::map<int, double> m;
  for (const auto &[k, v] : z) {
    auto it = m.find(k.first);
    if (it == m.end() || (max ? v > it->second : v < it->second)) m[k.first] = v;
  }
  std::map<int, int> ties;
  for (const auto &[k, v] : z)
    if (v == m[k.first]) ties[k.first]++;
  double loss = 0.0;
  for (const auto &[s, v] : m) loss += std::exp(v);
  loss /= static_cast<double>(m.size());
  std::vector<double> g(w.size(), 0.0);
  for (size_t i = 0; i < w.size(); i++)
    for (const Row3 &a : x) {
      if (a.b != w[i].a) continue;
      double v = z.at({a.a, w[i].b});
      if (v == m[a.a]) g[i] += a.v * std::exp(v) / static_cast<double>(m.size()) / ties[a.a];
    }
  return {loss, g};
}

TEST(DenseProgram, MaxMinAndAvgAsTheStatement) {
  std::mt19937_64 rng(4);
  for (const char *fn : {"max", "min"}) {
    for (bool tie : {false, true}) {
      auto [x, w] = Data(rng, 19, 4, 5, 0.25);
      if (tie)  // j = 40 and j = 38 the same column of w: every s ties
        for (Row3 &b : w)
          if (b.b == 38)
            for (const Row3 &o : w)
              if (o.b == 40 && o.a == b.a) b.v = o.v;
      Matmul m = MatmulLoss();
      RelP loss = ExtremumLoss(m, fn);
      std::string why;
      auto p = Compile(loss, &why);
      ASSERT_TRUE(p) << why;
      Rows xr = ToRows(x), wr = ToRows(w);
      std::vector<const Rows *> in;
      for (const ddx::Rel *s : ddx::dense::Scans(*p)) in.push_back(s == m.x.get() ? &xr : &wr);
      Outcome o = ddx::dense::Run(*p, in, 1 << 26);
      ASSERT_TRUE(o.done) << o.why;
      auto [l, g] = ExtremumOracle(x, w, std::string(fn) == "max");
      EXPECT_NEAR(o.loss, l, 1e-12 * std::fabs(l)) << fn;
      for (size_t i = 0; i < w.size(); i++)
        EXPECT_NEAR(o.grads[0].val[i], g[i], 1e-12 * (1 + std::fabs(g[i]))) << fn << " tie " << tie << " row " << i;
    }
  }
}

// avg's running sum of squares overflows where PostgreSQL's float8_accum
// raises, though the mean itself would not.
TEST(DenseProgram, AvgRaisesAsFloat8AccumDoes) {
  RelP x = MakeScan("public.x", {"i", "val"}, {kInt4, kFloat8}, {-1, 0});
  RelP loss = MakeAggregate(MakeProject(x, {MakeCol(1, 0, kFloat8)}), 0, {{"avg", 0}}, {kFloat8});
  std::string why;
  auto p = Compile(loss, &why);
  ASSERT_TRUE(p) << why;
  Rows r;
  r.n = 2;
  r.val = {{1, 2}, {1e160, -1e160}};
  r.null = {{0, 0}, {0, 0}};
  Outcome o = ddx::dense::Run(*p, {&r}, 1 << 20);
  EXPECT_FALSE(o.done);
  EXPECT_EQ(o.fault, Fault::kOverflow);
  r.val[1] = {3.0, 5.0};
  o = ddx::dense::Run(*p, {&r}, 1 << 20);
  ASSERT_TRUE(o.done) << o.why;
  EXPECT_EQ(o.loss, 4.0);
  EXPECT_EQ(o.grads[0].val, (std::vector<double>{0.5, 0.5}));
}

ExprP Le(int a, int b) {
  return MakeOpaque("($1 OPERATOR(pg_catalog.<=) $2)", "int4le", {MakeCol(a, 0, kInt4), MakeCol(b, 0, kInt4)},
                    ddx::kBool);
}
ExprP And(ExprP a, ExprP b) { return MakeOpaque("($1 AND $2)", "AND", {std::move(a), std::move(b)}, ddx::kBool); }
ExprP F(int c) { return MakeCol(c, 0, kFloat8); }
ExprP K(int c) { return MakeCol(c, 0, kInt4); }
RelP Mm(const RelP &x, const RelP &w) {  // SELECT x.i, w.j, sum(x.val * w.val) ... ON x.j = w.i GROUP BY x.i, w.j
  return MakeAggregate(
      MakeProject(MakeJoin(x, w, JoinKind::Inner, Eq(1, 3)), {K(0), K(4), MakeCall("mul", {F(2), F(5)}, kFloat8)}), 2,
      {{"sum", 2}}, {kInt4, kInt4, kFloat8});
}

// test/torch/test_models.py's ATTN_SQL: causal attention (k.t <= q.t) with
// its softmax by max, exp, sum and division, and loss sum(o * tg); q, k and
// v from one table x where `shared`, else each from a table of its own (xq,
// xk, xv) with the same rows.
struct Attention {
  RelP x, xk, xv, wq, wk, wv, tg, loss;
};
Attention AttentionLoss(int d, bool shared) {
  Attention a;
  a.x = MakeScan("public.x", {"i", "j", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, -1});
  a.xk = shared ? a.x : MakeScan("public.xk", {"i", "j", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, -1});
  a.xv = shared ? a.x : MakeScan("public.xv", {"i", "j", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, -1});
  a.wq = MakeScan("public.wq", {"i", "j", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, 0});
  a.wk = MakeScan("public.wk", {"i", "j", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, 1});
  a.wv = MakeScan("public.wv", {"i", "j", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, 2});
  a.tg = MakeScan("public.tg", {"i", "j", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, -1});
  RelP q = Mm(a.x, a.wq), k = Mm(a.xk, a.wk), v = Mm(a.xv, a.wv);
  RelP raw = MakeAggregate(MakeProject(MakeJoin(q, k, JoinKind::Inner, And(Eq(4, 1), Le(3, 0))),
                                       {K(0), K(3), MakeCall("mul", {F(2), F(5)}, kFloat8)}),
                           2, {{"sum", 2}}, {kInt4, kInt4, kFloat8});
  ExprP root = MakeCall("sqrt", {MakeConst("('" + std::to_string(d) + "'::integer)", kInt4)}, kFloat8);
  RelP sc = MakeProject(raw, {K(0), K(1), MakeCall("div", {F(2), root}, kFloat8)});
  RelP mx = MakeAggregate(MakeProject(sc, {K(0), F(2)}), 1, {{"max", 1}}, {kInt4, kFloat8});
  RelP e = MakeProject(MakeJoin(sc, mx, JoinKind::Inner, Eq(3, 0)),
                       {K(0), K(1), MakeCall("exp", {MakeCall("sub", {F(2), F(4)}, kFloat8)}, kFloat8)});
  RelP z = MakeAggregate(MakeProject(e, {K(0), F(2)}), 1, {{"sum", 1}}, {kInt4, kFloat8});
  RelP p = MakeProject(MakeJoin(e, z, JoinKind::Inner, Eq(3, 0)), {K(0), K(1), MakeCall("div", {F(2), F(4)}, kFloat8)});
  RelP o = MakeAggregate(
      MakeProject(MakeJoin(p, v, JoinKind::Inner, Eq(3, 1)), {K(0), K(4), MakeCall("mul", {F(2), F(5)}, kFloat8)}), 2,
      {{"sum", 2}}, {kInt4, kInt4, kFloat8});
  a.loss = MakeAggregate(MakeProject(MakeJoin(o, a.tg, JoinKind::Inner, And(Eq(3, 0), Eq(4, 1))),
                                     {MakeCall("mul", {F(2), F(5)}, kFloat8)}),
                         0, {{"sum", 0}}, {kFloat8});
  return a;
}

using Mat = std::vector<std::vector<double>>;
// The statement's loss, relation by relation, in loops.
double AttentionOracle(const Mat &x, const Mat &wq, const Mat &wk, const Mat &wv, const Mat &tg) {
  size_t t = x.size(), din = wq.size(), d = wq[0].size();
  auto mm = [&](const Mat &w) {
    Mat r(t, std::vector<double>(d, 0.0));
    for (size_t i = 0; i < t; i++)
      for (size_t j = 0; j < d; j++)
        for (size_t f = 0; f < din; f++) r[i][j] += x[i][f] * w[f][j];
    return r;
  };
  Mat q = mm(wq), k = mm(wk), v = mm(wv);
  double loss = 0.0;
  for (size_t i = 0; i < t; i++) {
    std::vector<double> sc(i + 1, 0.0);
    for (size_t j = 0; j <= i; j++) {
      for (size_t c = 0; c < d; c++) sc[j] += q[i][c] * k[j][c];
      sc[j] /= std::sqrt(static_cast<double>(d));
    }
    double m = *std::max_element(sc.begin(), sc.end()), z = 0.0;
    for (double s : sc) z += std::exp(s - m);
    for (size_t c = 0; c < d; c++) {
      double o = 0.0;
      for (size_t j = 0; j <= i; j++) o += std::exp(sc[j] - m) / z * v[j][c];
      loss += o * tg[i][c];
    }
  }
  return loss;
}

// Written as the bench writes it (q, k and v all from x: the scores' join
// pairs q's t with k's, each its own copy of x's i) and with three tables.
TEST(DenseProgram, CausalAttentionAgainstCentralDifferences) {
  for (bool shared : {true, false}) {
    const int t = 6, din = 3, d = 2;
    std::mt19937_64 rng(5);
    std::normal_distribution<double> nd(0.0, 0.8);
    auto rand = [&](int r, int c) {
      Mat m(r, std::vector<double>(c));
      for (auto &row : m)
        for (double &v : row) v = nd(rng);
      return m;
    };
    Mat x = rand(t, din), wq = rand(din, d), wk = rand(din, d), wv = rand(din, d), tg = rand(t, d);
    auto rows = [](const Mat &m) {
      std::vector<Row3> r;
      for (size_t i = 0; i < m.size(); i++)
        for (size_t j = 0; j < m[i].size(); j++) r.push_back({static_cast<int>(i), static_cast<int>(j), m[i][j]});
      return ToRows(r);
    };
    Attention a = AttentionLoss(d, shared);
    std::string why;
    auto p = Compile(a.loss, &why);
    ASSERT_TRUE(p) << why;
    Rows xr = rows(x), qr = rows(wq), kr = rows(wk), vr = rows(wv), tr = rows(tg);
    std::map<const ddx::Rel *, const Rows *> by = {{a.x.get(), &xr},  {a.xk.get(), &xr}, {a.xv.get(), &xr},
                                                   {a.wq.get(), &qr}, {a.wk.get(), &kr}, {a.wv.get(), &vr},
                                                   {a.tg.get(), &tr}};
    std::vector<const Rows *> in;
    for (const ddx::Rel *s : ddx::dense::Scans(*p)) in.push_back(by.at(s));
    Outcome o = ddx::dense::Run(*p, in, 1 << 26);
    ASSERT_TRUE(o.done) << o.why;
    EXPECT_EQ(o.products, 6);  // q, k, v, the masked scores, p . v, the loss's sum
    double loss = AttentionOracle(x, wq, wk, wv, tg);
    EXPECT_NEAR(o.loss, loss, 1e-12 * (1 + std::fabs(loss)));
    ASSERT_EQ(o.grads.size(), 3u);
    for (const auto &g : o.grads) {
      Mat *w = g.scan == a.wq.get() ? &wq : g.scan == a.wk.get() ? &wk : &wv;
      for (int f = 0; f < din; f++)
        for (int j = 0; j < d; j++) {
          const double h = 1e-6, keep = (*w)[f][j];
          (*w)[f][j] = keep + h;
          double up = AttentionOracle(x, wq, wk, wv, tg);
          (*w)[f][j] = keep - h;
          double down = AttentionOracle(x, wq, wk, wv, tg);
          (*w)[f][j] = keep;
          double fd = (up - down) / (2 * h);
          EXPECT_NEAR(g.val[static_cast<size_t>(f * d + j)], fd, 1e-7 * (1 + std::fabs(fd)))
              << g.scan->table << " " << f << "," << j;
        }
    }
  }
}

// test_models.py's MLP's loss over the matmul's logits: softmax cross
// entropy, the label a float8 column joined with the class key (lab.val =
// l.c, the key cast to float8), by max, exp, sum, ln and avg.
TEST(DenseProgram, CrossEntropyWithALabelColumn) {
  std::mt19937_64 rng(7);
  auto [x, w] = Data(rng, 13, 4, 3, 0.0);
  std::vector<int> cls = {40, 38, 36};  // (Data's j keys)
  std::vector<std::pair<int, double>> lab;
  for (int s = 0; s < 13; s++) lab.push_back({1000 + 7 * s, static_cast<double>(cls[static_cast<size_t>(s) % 3])});
  Matmul m = MatmulLoss();
  RelP lb = MakeScan("public.lab", {"j", "val"}, {kInt4, kFloat8}, {-1, -1});
  RelP z = MakeAggregate(
      MakeProject(MakeJoin(m.x, m.w, JoinKind::Inner, Eq(1, 3)), {K(0), K(4), MakeCall("mul", {F(2), F(5)}, kFloat8)}),
      2, {{"sum", 2}}, {kInt4, kInt4, kFloat8});
  RelP mx = MakeAggregate(MakeProject(z, {K(0), F(2)}), 1, {{"max", 1}}, {kInt4, kFloat8});
  RelP se = MakeAggregate(MakeProject(MakeJoin(z, mx, JoinKind::Inner, Eq(3, 0)),
                                      {K(0), MakeCall("exp", {MakeCall("sub", {F(2), F(4)}, kFloat8)}, kFloat8)}),
                          1, {{"sum", 1}}, {kInt4, kFloat8});
  // z (s0 c1 z2) . mx (s3 m4) . se (s5 se6) . lab (j7 val8)
  RelP j3 =
      MakeJoin(MakeJoin(MakeJoin(z, mx, JoinKind::Inner, Eq(3, 0)), se, JoinKind::Inner, Eq(5, 0)), lb, JoinKind::Inner,
               And(Eq(7, 0), MakeOpaque("($1 OPERATOR(pg_catalog.=) $2)", "float8eq",
                                        {F(8), MakeCall("cast", {K(1)}, kFloat8)}, ddx::kBool)));
  ExprP ce = MakeCall("sub", {MakeCall("add", {F(4), MakeCall("ln", {F(6)}, kFloat8)}, kFloat8), F(2)}, kFloat8);
  RelP loss = MakeAggregate(MakeProject(j3, {ce}), 0, {{"avg", 0}}, {kFloat8});
  std::string why;
  auto p = Compile(loss, &why);
  ASSERT_TRUE(p) << why;
  Rows lr;
  lr.n = lab.size();
  lr.val.assign(2, std::vector<double>(lr.n));
  lr.null.assign(2, std::vector<uint8_t>(lr.n, 0));
  for (size_t i = 0; i < lr.n; i++) {
    lr.val[0][i] = lab[i].first;
    lr.val[1][i] = lab[i].second;
  }
  auto oracle = [&](const std::vector<Row3> &ww) {
    std::map<std::pair<int, int>, double> zz;
    for (const Row3 &a : x)
      for (const Row3 &b : ww)
        if (a.b == b.a) zz[{a.a, b.b}] += a.v * b.v;
    double total = 0.0;
    for (const auto &[s2, c2] : lab) {
      double mm = -INFINITY, sum = 0.0;
      for (const auto &[k, v] : zz)
        if (k.first == s2) mm = std::max(mm, v);
      for (const auto &[k, v] : zz)
        if (k.first == s2) sum += std::exp(v - mm);
      total += mm + std::log(sum) - zz.at({s2, static_cast<int>(c2)});
    }
    return total / static_cast<double>(lab.size());
  };
  Rows xr = ToRows(x), wr = ToRows(w);
  std::map<const ddx::Rel *, const Rows *> by = {{m.x.get(), &xr}, {m.w.get(), &wr}, {lb.get(), &lr}};
  std::vector<const Rows *> in;
  for (const ddx::Rel *sc : ddx::dense::Scans(*p)) in.push_back(by.at(sc));
  Outcome o = ddx::dense::Run(*p, in, 1 << 26);
  ASSERT_TRUE(o.done) << o.why;
  double l = oracle(w);
  EXPECT_NEAR(o.loss, l, 1e-12 * (1 + std::fabs(l)));
  for (size_t i = 0; i < w.size(); i++) {
    const double h = 1e-6;
    auto up = w, down = w;
    up[i].v += h;
    down[i].v -= h;
    double fd = (oracle(up) - oracle(down)) / (2 * h);
    EXPECT_NEAR(o.grads[0].val[i], fd, 1e-7 * (1 + std::fabs(fd))) << i;
  }
}

// A join whose equalities make two dims of one side one (ON l.i = r.k AND
// l.j = r.k): the left's cells on their diagonal, by cells and as a product
// (which forms the join then).
TEST(DenseProgram, TwoDimsOfOneSideMadeOne) {
  RelP l = MakeScan("public.l", {"i", "j", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, 0});
  RelP r = MakeScan("public.r", {"k", "val"}, {kInt4, kFloat8}, {-1, 1});
  std::vector<Row3> ls;
  std::mt19937_64 rng(8);
  std::normal_distribution<double> nd(0.0, 1.0);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) ls.push_back({i, j, nd(rng)});
  std::vector<double> rv = {nd(rng), nd(rng), nd(rng)};
  for (bool by_cells : {false, true}) {
    ExprP prod = MakeCall("mul", {F(2), F(4)}, kFloat8);
    if (by_cells) prod = MakeCall("mul", {prod, MakeConst("'1.0'::pg_catalog.float8", kFloat8)}, kFloat8);
    RelP loss = MakeAggregate(MakeProject(MakeJoin(l, r, JoinKind::Inner, And(Eq(0, 3), Eq(1, 3))), {prod}), 0,
                              {{"sum", 0}}, {kFloat8});
    std::string why;
    auto p = Compile(loss, &why);
    ASSERT_TRUE(p) << why;
    Rows lr = ToRows(ls), rr;
    rr.n = 3;
    rr.val = {{0, 1, 2}, rv};
    rr.null = {{0, 0, 0}, {0, 0, 0}};
    std::map<const ddx::Rel *, const Rows *> by = {{l.get(), &lr}, {r.get(), &rr}};
    std::vector<const Rows *> in;
    for (const ddx::Rel *sc : ddx::dense::Scans(*p)) in.push_back(by.at(sc));
    Outcome o = ddx::dense::Run(*p, in, 1 << 20);
    ASSERT_TRUE(o.done) << o.why;
    EXPECT_EQ(o.products, 0);
    double loss_v = 0.0;  // row by row: l's rows with i = j = k
    std::vector<double> gl(ls.size(), 0.0), gr(3, 0.0);
    for (size_t a = 0; a < ls.size(); a++)
      for (int k = 0; k < 3; k++)
        if (ls[a].a == k && ls[a].b == k) {
          loss_v += ls[a].v * rv[static_cast<size_t>(k)];
          gl[a] += rv[static_cast<size_t>(k)];
          gr[static_cast<size_t>(k)] += ls[a].v;
        }
    EXPECT_NEAR(o.loss, loss_v, 1e-12 * (1 + std::fabs(loss_v))) << by_cells;
    for (const auto &g : o.grads) {
      const std::vector<double> &want = g.scan == l.get() ? gl : gr;
      ASSERT_EQ(g.val.size(), want.size());
      for (size_t i = 0; i < want.size(); i++) EXPECT_NEAR(g.val[i], want[i], 1e-12) << by_cells << " " << i;
    }
  }
}

// Comparisons it cannot make as PostgreSQL does are refused: a key cast to
// float4 (rounded: 16777217::real is 16777216) against a float8 value, and
// a key against a numeric constant (compared as numeric).
TEST(DenseProgram, RefusesComparisonsItCannotMakeExactly) {
  RelP t = MakeScan("public.t", {"c", "lab", "v"}, {kInt4, kFloat8, kFloat8}, {-1, -1, 0});
  ddx::Type float4{"pg_catalog.float4", true};
  std::string why;
  for (int form = 0; form < 2; form++) {
    ExprP cond = form == 0 ? MakeOpaque("($1 OPERATOR(pg_catalog.=) $2)", "float48eq",
                                        {F(1), MakeCall("cast", {K(0)}, float4)}, ddx::kBool)
                           : MakeOpaque("($1 OPERATOR(pg_catalog.>=) $2)", "ge",
                                        {K(0), MakeConst("('2.00000000000000000001'::numeric)", kInt4)}, ddx::kBool);
    RelP loss = MakeAggregate(MakeProject(ddx::MakeFilter(t, cond), {F(2)}), 0, {{"sum", 0}}, {kFloat8});
    EXPECT_FALSE(Compile(loss, &why)) << form;
  }
  ExprP ok =
      MakeOpaque("($1 OPERATOR(pg_catalog.=) $2)", "float8eq", {F(1), MakeCall("cast", {K(0)}, kFloat8)}, ddx::kBool);
  EXPECT_TRUE(Compile(MakeAggregate(MakeProject(ddx::MakeFilter(t, ok), {F(2)}), 0, {{"sum", 0}}, {kFloat8}), &why))
      << why;
}

// One relation read twice (a CTE is one node of the IR), each reader with
// dims of its own: a cross join of s with itself pairs every row with every
// row (loss (sum of val)^2, not the sum of squares one dim per column of s
// would give), and a join of s's i in one reader with s's j in another
// leaves s whole for both.
TEST(DenseProgram, EachReaderHasItsOwnDims) {
  RelP s = MakeScan("public.s", {"i", "j", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, 0});
  std::vector<Row3> rs = {{0, 0, 1.0}, {1, 0, 2.0}, {1, 2, -0.5}, {2, 1, 0.25}};
  Rows rows = ToRows(rs);
  std::string why;
  RelP cross =
      MakeAggregate(MakeProject(MakeJoin(s, s, JoinKind::Inner, nullptr), {MakeCall("mul", {F(2), F(5)}, kFloat8)}), 0,
                    {{"sum", 0}}, {kFloat8});
  auto p = Compile(cross, &why);
  ASSERT_TRUE(p) << why;
  Outcome o = ddx::dense::Run(*p, {&rows}, 1 << 20);
  ASSERT_TRUE(o.done) << o.why;
  double sum = 1.0 + 2.0 - 0.5 + 0.25;
  EXPECT_EQ(o.loss, sum * sum);
  for (double g : o.grads[0].val) EXPECT_EQ(g, 2 * sum);
  RelP l = MakeProject(s, {K(0), F(2)}), r = MakeProject(s, {K(1), F(2)});
  RelP diag =
      MakeAggregate(MakeProject(MakeJoin(l, r, JoinKind::Inner, Eq(0, 2)), {MakeCall("mul", {F(1), F(3)}, kFloat8)}), 0,
                    {{"sum", 0}}, {kFloat8});
  p = Compile(diag, &why);
  ASSERT_TRUE(p) << why;
  o = ddx::dense::Run(*p, {&rows}, 1 << 20);
  ASSERT_TRUE(o.done) << o.why;
  double loss = 0.0;  // the statement row by row: pairs (a, b) of rows of s with a.i = b.j
  std::vector<double> g(rs.size(), 0.0);
  for (size_t a = 0; a < rs.size(); a++)
    for (size_t b = 0; b < rs.size(); b++)
      if (rs[a].a == rs[b].b) {
        loss += rs[a].v * rs[b].v;
        g[a] += rs[b].v;
        g[b] += rs[a].v;
      }
  EXPECT_EQ(o.loss, loss);
  EXPECT_EQ(o.grads[0].val, g);
}

// A filter's equality of two keys of one relation keeps the cells where
// they are equal, and leaves the relation's dims apart for its other
// reader: loss = (sum of val where i = j) + (sum of val * val over s).
TEST(DenseProgram, AnEqualityWithinOneRelationIsAMask) {
  RelP s = MakeScan("public.s", {"i", "j", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, 0});
  RelP a = MakeAggregate(MakeProject(MakeFilter(s, Eq(0, 1)), {F(2)}), 0, {{"sum", 0}}, {kFloat8});
  RelP b = MakeAggregate(MakeProject(s, {MakeCall("mul", {F(2), F(2)}, kFloat8)}), 0, {{"sum", 0}}, {kFloat8});
  RelP loss = MakeProject(MakeJoin(a, b, JoinKind::Inner, nullptr), {MakeCall("add", {F(0), F(1)}, kFloat8)});
  std::string why;
  auto p = Compile(loss, &why);
  ASSERT_TRUE(p) << why;
  std::vector<Row3> rs = {{0, 0, 0.5}, {0, 1, 1.5}, {1, 1, -2.0}, {2, 0, 3.0}};
  Rows r = ToRows(rs);
  Outcome o = ddx::dense::Run(*p, {&r}, 1 << 20);
  ASSERT_TRUE(o.done) << o.why;
  EXPECT_EQ(o.loss, (0.5 - 2.0) + (0.25 + 2.25 + 4.0 + 9.0));
  EXPECT_EQ(o.grads[0].val, (std::vector<double>{1 + 1.0, 3.0, 1 - 4.0, 6.0}));
}

TEST(DenseProgram, RefusesKeysAndConstantsItCannotReadExactly) {
  Rows x = ToRows({{1, 1, 0.5}}), w = ToRows({{1, 1, 1.0}});
  x.val[0][0] = 9007199254740993.0;  // (2^53 + 1 as a double: 2^53, another key)
  Matmul m = MatmulLoss();
  std::string why;
  auto p = Compile(m.loss, &why);
  ASSERT_TRUE(p);
  std::vector<const Rows *> in;
  for (const ddx::Rel *sc : ddx::dense::Scans(*p)) in.push_back(sc == m.x.get() ? &x : &w);
  Outcome o = ddx::dense::Run(*p, in, 1 << 20);
  EXPECT_FALSE(o.done);
  EXPECT_NE(o.why.find("2^53"), std::string::npos) << o.why;
  RelP s = MakeScan("public.s", {"i", "val"}, {kInt4, kFloat8}, {-1, 0});
  for (const char *lit : {"('0x10'::integer)", "('1e-400'::numeric)", "('abc'::text)"}) {
    RelP bad = MakeAggregate(MakeProject(s, {MakeCall("mul", {F(1), MakeConst(lit, kInt4)}, kFloat8)}), 0, {{"sum", 0}},
                             {kFloat8});
    EXPECT_FALSE(Compile(bad, &why)) << lit;
  }
}

TEST(DenseProgram, CompileSaysWhyNot) {
  Matmul m = MatmulLoss();
  std::string why;
  RelP count = MakeAggregate(MakeProject(m.x, {MakeCol(2, 0, kFloat8)}), 0, {{"count", 0}}, {kFloat8});
  EXPECT_FALSE(Compile(count, &why));
  EXPECT_NE(why.find("count"), std::string::npos) << why;
  RelP left = MakeAggregate(MakeProject(MakeJoin(m.x, m.w, JoinKind::Left, Eq(1, 3)), {MakeCol(2, 0, kFloat8)}), 0,
                            {{"sum", 0}}, {kFloat8});
  EXPECT_FALSE(Compile(left, &why));
  EXPECT_NE(why.find("outer join"), std::string::npos) << why;
  RelP perrow = MakeProject(m.x, {MakeCol(2, 0, kFloat8)});
  EXPECT_FALSE(Compile(perrow, &why));
  EXPECT_NE(why.find("more than one row"), std::string::npos) << why;
}

}  // namespace
