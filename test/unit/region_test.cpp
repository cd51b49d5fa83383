// A region's backward: product factors at their own grain, costly values
// below the join that repeats them, the only root's terms.
#include <gtest/gtest.h>

#include "golden.h"
#include "models.h"
#include "sql_parses.h"

namespace ddx {
namespace {

// In sum(f(x) * w) over x JOIN w, the factor f(x) is differentiated after its
// adjoint is summed per row of x (its own grouping set), not once per joined
// row. Where x also has a set of its own (a term of x at the joined rows'
// grain), the factor's set is told apart by a marker, g0.
TEST(Program, ProductFactorsAreDifferentiatedAtTheirOwnGrain) {
  ExprP tanh_w =
      MakeCall("mul", {MakeCall("tanh", {MakeCol(2, 0, kFloat8)}, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8);
  RelP pred = SumBy(XJoinW(0, 1), MakeCol(0, 0, kInt4), tanh_w);
  Program p = Build(SumOfSquares(pred, 1));
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_NE(p.sql.find("GROUPING SETS ((q.r1), (q.r0))"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("n.u0"), std::string::npos) << p.sql;  // the factor, at its grain
  // its values read again from its leaf by rid, not carried through the grouping sets by min()
  EXPECT_NE(p.sql.find("a0.rid = n.r0"), std::string::npos) << p.sql;
  EXPECT_EQ(p.sql.find("min(q.x"), std::string::npos) << p.sql;

  pred = SumBy(
      XJoinW(0, 1), MakeCol(0, 0, kInt4),
      MakeCall("add", {tanh_w, MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(2, 0, kFloat8)}, kFloat8)}, kFloat8));
  p = Build(SumOfSquares(pred, 1));
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_NE(p.sql.find("GROUPING SETS ((q.r0), (q.r1), (q.g0, q.r0))"), std::string::npos) << p.sql;
  // In place on Citus, which plans no GROUPING(): a plain GROUP BY per set,
  // each set its own step, read by its reader alone.
  RelP loss = SumOfSquares(pred, 1);
  MarkCitus(loss);
  p = BuildGradientProgram(loss, CitusPlacement::InPlace);
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_EQ(p.sql.find("GROUPING"), std::string::npos) << p.sql;
  for (const char *set :
       {"__3 AS NOT MATERIALIZED (SELECT 3 AS gs, q.r0, ", "__5 AS NOT MATERIALIZED (SELECT 5 AS gs, q.r1, ",
        "__2 AS NOT MATERIALIZED (SELECT 2 AS gs, q.g0, q.r0, "})
    EXPECT_NE(p.sql.find(set), std::string::npos) << set << "\n" << p.sql;
}

// A costly value that reads only x is computed once per row of x, below the
// join with w that repeats x's rows, forward and backward; a subquery keeps
// only the rows of x that w matches (the forward computes nothing else).
// Where the other leaves are determined by the value's (a saved aggregate
// joined on its key), nothing is repeated and the region stays whole.
TEST(Program, CostlyValuesAreComputedBelowTheJoinThatRepeatsThem) {
  RelP j = XJoinW(0, 1);
  RelP pred =
      SumBy(j, MakeCol(3, 0, kInt4),
            MakeCall("mul", {MakeCall("exp", {MakeCol(2, 0, kFloat8)}, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8));
  Program p = Build(SumOfSquares(pred, 1));
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  // forward: exp in the subquery over x, read above the join as s.h0
  EXPECT_NE(p.sql.find("exp(a0.c2) AS h0 FROM f1 a0 WHERE EXISTS (SELECT 1 FROM f2 a1 WHERE (a0.c1 = a1.c0))"),
            std::string::npos)
      << p.sql;
  EXPECT_NE(p.sql.find("sum((s.h0 * a1.c1))"), std::string::npos) << p.sql;
  // backward: the layer over x computes it, the pass over the join reads it
  EXPECT_NE(p.sql.find("(SELECT s.*, exp(s.a0_c2) AS h0 FROM (SELECT a0.rid AS a0_rid"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("s.h0 AS h0 FROM"), std::string::npos) << p.sql;
  EXPECT_EQ(p.sql.find("exp(r."), std::string::npos) << p.sql;

  // exp(y.val) over y JOIN pred ON pred.c0 = y.s: pred is determined by y
  RelP y = MakeScan("public.y", {"s", "val"}, {kInt4, kFloat8}, {-1, -1});
  pred = SumBy(j, MakeCol(3, 0, kInt4), MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8));
  RelP yj = MakeJoin(y, pred, JoinKind::Inner,
                     MakeOpaque("($1 OPERATOR(pg_catalog.=) $2)", {MakeCol(2, 0, kInt4), MakeCol(0, 0, kInt4)}, kBool));
  p = Build(MakeAggregate(
      MakeProject(
          yj, {MakeCall("mul", {MakeCall("exp", {MakeCol(1, 0, kFloat8)}, kFloat8), MakeCol(3, 0, kFloat8)}, kFloat8)}),
      0, {{"sum", 0}}, {kFloat8}));
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_EQ(p.sql.find("EXISTS"), std::string::npos) << p.sql;
}

// A region pass over x JOIN z (z = sum by x.s, joined on all its keys: x is
// the only root) sums no term of x: each row of x is one row of the pass.
// With terms for z too, the pass is stored as it is and z's terms alone are
// summed, not GROUPING SETS hashing a set of as many groups as rows.
TEST(Program, TheOnlyRootsTermsAreNotSummed) {
  auto eq = [](int a, int b) {
    return MakeOpaque("($1 OPERATOR(pg_catalog.=) $2)", {MakeCol(a, 0, kInt4), MakeCol(b, 0, kInt4)}, kBool);
  };
  RelP x = MakeScan("public.x", {"s", "f", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, 0});
  RelP z = MakeAggregate(MakeProject(x, {MakeCol(0, 0, kInt4), MakeCall("exp", {MakeCol(2, 0, kFloat8)}, kFloat8)}), 1,
                         {{"sum", 1}}, {kInt4, kFloat8});
  RelP p = MakeProject(
      MakeJoin(x, z, JoinKind::Inner, eq(0, 3)),
      {MakeCall("div", {MakeCall("exp", {MakeCol(2, 0, kFloat8)}, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8)});
  Program prog = Build(SumOfSquares(p, 0));
  EXPECT_EQ(ParseError(prog.sql), "") << prog.sql;
  EXPECT_EQ(prog.sql.find("GROUPING SETS"), std::string::npos) << prog.sql;
  EXPECT_NE(prog.sql.find("FROM m7 WHERE r0 IS NOT NULL)"), std::string::npos) << prog.sql;
  EXPECT_NE(prog.sql.find("FROM m7 WHERE r1 IS NOT NULL GROUP BY r1"), std::string::npos) << prog.sql;
}

}  // namespace
}  // namespace ddx
