// The contraction transpose (ops/contraction.cpp) and the sides it saves.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "golden.h"
#include "models.h"
#include "sql_parses.h"

namespace ddx {
namespace {

// h = x ⋈ a ⋈ g ⋈ b (four leaves, one row per x row: LayerNorm's shape),
// then Σ_e h · w grouped by keys of both sides (a contraction: each h row
// meets every w row of its e) or by a key of h's only.
RelP FourLeafSideOf(bool contraction) {
  RelP x = MakeScan("public.x", {"s", "e", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, 0});
  RelP a = MakeScan("public.a", {"s", "val"}, {kInt4, kFloat8}, {-1, -1});
  RelP g = MakeScan("public.g", {"e", "val"}, {kInt4, kFloat8}, {-1, -1});
  RelP b = MakeScan("public.b", {"e", "val"}, {kInt4, kFloat8}, {-1, -1});
  auto eq = [](int l, int r) { return MakeOpaque("($1 = $2)", {MakeCol(l, 0, kInt4), MakeCol(r, 0, kInt4)}, kBool); };
  RelP j = MakeJoin(MakeJoin(MakeJoin(x, a, JoinKind::Inner, eq(0, 3)), g, JoinKind::Inner, eq(1, 5)), b,
                    JoinKind::Inner, eq(1, 7));
  RelP h = MakeProject(j, {MakeCol(0, 0, kInt4), MakeCol(1, 0, kInt4),
                           MakeCall("add",
                                    {MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8),
                                     MakeCall("mul", {MakeCol(6, 0, kFloat8), MakeCol(8, 0, kFloat8)}, kFloat8)},
                                    kFloat8)});
  RelP w = MakeScan("public.w", {"e", "c", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, 1});
  RelP hw = MakeJoin(h, w, JoinKind::Inner, eq(1, 3));
  ExprP prod = MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(5, 0, kFloat8)}, kFloat8);
  RelP agg = contraction
                 ? MakeAggregate(MakeProject(hw, {MakeCol(0, 0, kInt4), MakeCol(4, 0, kInt4), prod}), 2, {{"sum", 2}},
                                 {kInt4, kInt4, kFloat8})
                 : MakeAggregate(MakeProject(hw, {MakeCol(0, 0, kInt4), prod}), 1, {{"sum", 1}}, {kInt4, kFloat8});
  return SumOfSquares(agg, contraction ? 2 : 1);
}

TEST(Program, ACompoundSideOfAContractionIsSavedNotRecomputedPerJoinedRow) {
  Program c = Build(FourLeafSideOf(true));
  Program o = Build(FourLeafSideOf(false));
  EXPECT_EQ(ParseError(c.sql), "") << c.sql;
  EXPECT_EQ(ParseError(o.sql), "") << o.sql;
  // the contraction saves h (one more forward step, read by rid); grouped by
  // h's key alone, nothing repeats h's rows and h stays in the region
  EXPECT_EQ(c.forward_steps, o.forward_steps + 1) << c.sql;
}

// The contraction transpose: with only w receiving gradient, w's adjoint in
// sum(x.val * w.val) ... GROUP BY x.s is x joined with the cotangents on the
// key (x.s), summed by what w is compared with (x.f), and only then joined
// to w; x JOIN w is not recomputed. With x a parameter too, one pass over
// the region serves both (GROUPING SETS).
TEST(Program, OneParameterSideIsContractedBeforeItsJoin) {
  Program p = Build(LinearLoss());
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  // (the cotangents carry their groups' saved columns: no join with f5 on rid)
  EXPECT_NE(p.sql.find("FROM f1 a0 OFFSET 0) r JOIN (SELECT a.*, a.d1 AS bd1"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("FROM b5 a OFFSET 0) a"), std::string::npos) << p.sql;
  // (read by b2 alone: planned inside it, not stored)
  EXPECT_NE(p.sql.find("b5 AS NOT MATERIALIZED (SELECT q.rid, q.d1 AS d1, q.c0, q.c1 FROM"), std::string::npos)
      << p.sql;
  EXPECT_NE(p.sql.find("GROUP BY q.oa0_c1) t JOIN f2 a1 ON (t.oa0_c1 = a1.c0) GROUP BY 1"), std::string::npos) << p.sql;
  EXPECT_EQ(p.sql.find("GROUPING SETS"), std::string::npos) << p.sql;

  p = Build(SumOfSquares(SumBy(XJoinW(0, 1), MakeCol(0, 0, kInt4),
                               MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8)),
                         1));
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_NE(p.sql.find("GROUPING SETS"), std::string::npos) << p.sql;
}

// Both sides parameters (attention's q·k): each side is transposed on its
// own, and a condition that reads a side only through its group key (k.j <=
// q.i, both keys) is checked on the cotangent's key instead, so that the
// sum is by (i, c) and (j, c), not by every (i, j, c). Where it reads
// nothing but integer group keys, every group passed it: not tested again.
TEST(Program, EachParameterSideIsTransposedOnItsOwn) {
  auto attention = [](const Type &t) {
    RelP q = MakeScan("public.q", {"i", "c", "val"}, {t, kInt4, kFloat8}, {-1, -1, 0});
    RelP k = MakeScan("public.k", {"j", "c", "val"}, {t, kInt4, kFloat8}, {-1, -1, 1});
    RelP j = MakeJoin(
        q, k, JoinKind::Inner,
        MakeOpaque("($1 AND $2)", "AND",
                   {MakeOpaque("($1 OPERATOR(pg_catalog.=) $2)", {MakeCol(1, 0, kInt4), MakeCol(4, 0, kInt4)}, kBool),
                    MakeOpaque("($1 OPERATOR(pg_catalog.<=) $2)", {MakeCol(3, 0, t), MakeCol(0, 0, t)}, kBool)},
                   kBool));
    RelP s = MakeAggregate(MakeProject(j, {MakeCol(0, 0, t), MakeCol(3, 0, t),
                                           MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(5, 0, kFloat8)}, kFloat8)}),
                           2, {{"sum", 2}}, {t, t, kFloat8});
    return Build(SumOfSquares(s, 2));
  };
  Program p = attention(kInt4);
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_EQ(p.sql.find("GROUPING SETS"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("GROUP BY q.g0, q.oa1_c1) t JOIN f1 a0"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("GROUP BY q.g1, q.oa0_c1) t JOIN f2 a1"), std::string::npos) << p.sql;
  EXPECT_EQ(p.sql.find("<="), p.sql.rfind("<=")) << p.sql;  // in the forward only
  // a step read by two later steps is stored, one read by one step is not;
  // forward steps are stored (the backward reads them again)
  EXPECT_NE(p.sql.find("\nb5 AS MATERIALIZED ("), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("\nb2 AS NOT MATERIALIZED ("), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("\nb1 AS NOT MATERIALIZED ("), std::string::npos) << p.sql;
  for (size_t at = p.sql.find(" AS NOT MATERIALIZED"); at != std::string::npos;
       at = p.sql.find(" AS NOT MATERIALIZED", at + 1))
    EXPECT_EQ(p.sql[p.sql.rfind('\n', at) + 1], 'b') << p.sql;
  // numeric keys: 1.0 and 1.00 are one group, a condition could tell them
  // apart (the region is recomputed, its condition with it)
  p = attention(Type{"pg_catalog.numeric", false});
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  size_t fwd = p.sql.find("<=");
  EXPECT_NE(p.sql.find("(a1.c0 OPERATOR(pg_catalog.<=) a0.c0)", fwd + 1), std::string::npos) << p.sql;
}

// GROUP BY w.f, x.f over x JOIN w ON x.f = w.f: the condition reads only
// keys, but it is also what joins x's rows to the sums by w.f (x.f is a key
// found through w): it stays (soak seed 20261130, case 147, caught it gone:
// every row of x took every group's gradient).
TEST(Program, AConditionOnKeysThatLinksTheParameterStays) {
  RelP x = MakeScan("public.x", {"s", "f", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, 0});
  RelP w = MakeScan("public.w", {"f", "val"}, {kInt4, kFloat8}, {-1, -1});
  RelP j = MakeJoin(x, w, JoinKind::Inner,
                    MakeOpaque("($1 OPERATOR(pg_catalog.=) $2)", {MakeCol(1, 0, kInt4), MakeCol(3, 0, kInt4)}, kBool));
  RelP s = MakeAggregate(MakeProject(j, {MakeCol(3, 0, kInt4), MakeCol(1, 0, kInt4),
                                         MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8)}),
                         2, {{"sum", 2}}, {kInt4, kInt4, kFloat8});
  Program p = Build(SumOfSquares(s, 2));
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  size_t b = p.sql.find("\nb");
  EXPECT_NE(p.sql.find("OPERATOR(pg_catalog.=)", b), std::string::npos) << p.sql;
}

// A key of w that the join equates with a column of x is joined with the
// cotangents as that column (inside, with x), not grouped and matched with w
// afterwards. Where every key comes from w and nothing equates it with x, x
// joined with the cotangents would be a cross product: the region is
// recomputed instead.
TEST(Program, ContractionKeysOfTheParameterSide) {
  auto loss_by = [](std::vector<int> keys, const std::string &cond) {
    RelP x = MakeScan("public.x", {"s", "f", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, -1});
    RelP w = MakeScan("public.w", {"f", "val"}, {kInt4, kFloat8}, {-1, 0});
    RelP j = MakeJoin(x, w, JoinKind::Inner, MakeOpaque(cond, {MakeCol(1, 0, kInt4), MakeCol(3, 0, kInt4)}, kBool));
    std::vector<ExprP> cols;
    std::vector<Type> types;
    for (int k : keys) cols.push_back(MakeCol(k, 0, kInt4)), types.push_back(kInt4);
    cols.push_back(MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8));
    types.push_back(kFloat8);
    int n = static_cast<int>(keys.size());
    RelP pred = MakeAggregate(MakeProject(j, cols), n, {{"sum", n}}, types);
    return SumOfSquares(pred, n);
  };
  // GROUP BY x.s, w.f ON x.f = w.f: w.f is joined with the cotangents as x.f
  Program p = Build(loss_by({0, 3}, "($1 OPERATOR(pg_catalog.=) $2)"));
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_NE(p.sql.find("COALESCE(CAST(a0.c1 AS pg_catalog.int8), 4294967296) AS k1"), std::string::npos) << p.sql;
  EXPECT_EQ(p.sql.find("AS g1"), std::string::npos) << p.sql;
  // GROUP BY x.s, w.f ON x.f < w.f: w.f is grouped, then matched with w
  p = Build(loss_by({0, 3}, "($1 < $2)"));
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_NE(p.sql.find("a.c1 AS g1"), std::string::npos) << p.sql;
  // GROUP BY w.f ON x.f < w.f: no key of x; the region x JOIN w is recomputed
  p = Build(loss_by({3}, "($1 < $2)"));
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_EQ(p.sql.find("AS g0"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("GROUP BY q.rid"), std::string::npos) << p.sql;
}

// A leaf's transpose joins the other leaves with the cotangents, where no
// value of the leaf is: refused where the leaf's terms read one (tanh(w)'s
// partial reads tanh(w)), or where the values computed for them do (exp of
// stop_gradient(w), which no term reads, though computed), and decided on
// the expressions, before any SQL of the transpose is assembled. (Built
// without a golden snapshot: these programs are not otherwise tested.)
TEST(Program, ALeafIsTransposedOnlyWhereNothingReadsItsValues) {
  auto transposed = [](const ExprP &w_side) {
    RelP x = MakeScan("public.x", {"s", "f", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, -1});
    RelP w = MakeScan("public.w", {"f", "val"}, {kInt4, kFloat8}, {-1, 0});
    RelP j =
        MakeJoin(x, w, JoinKind::Inner, MakeOpaque("($1 = $2)", {MakeCol(1, 0, kInt4), MakeCol(3, 0, kInt4)}, kBool));
    RelP pred = SumBy(j, MakeCol(0, 0, kInt4), MakeCall("mul", {MakeCol(2, 0, kFloat8), w_side}, kFloat8));
    Program p = BuildGradientProgram(SumOfSquares(pred, 1));
    EXPECT_EQ(ParseError(p.sql), "") << p.sql;
    return p.sql.find(") t JOIN f2 a1 ON ") != std::string::npos;
  };
  ExprP w = MakeCol(4, 0, kFloat8);
  EXPECT_TRUE(transposed(w));
  EXPECT_FALSE(transposed(MakeCall("tanh", {w}, kFloat8)));
  ExprP held = MakeCall("exp", {MakeCall("stop_gradient", {w}, kFloat8)}, kFloat8);
  EXPECT_FALSE(transposed(MakeCall("add", {w, held}, kFloat8)));
}

}  // namespace
}  // namespace ddx
