// An aggregate's backward: its NULL tests and how it pairs rows with their group.
#include <gtest/gtest.h>

#include "golden.h"
#include "models.h"
#include "sql_parses.h"

namespace ddx {
namespace {

// A sum's adjoint is NULL where its argument is: tested on the columns the
// argument is strict in, not on its value (nothing to test where they cannot
// be NULL), and a value that no derivative reads is not computed
// (power(tanh(z), 2): tanh(z), not its square).
TEST(Program, ASumTestsItsArgumentsColumnsAndComputesOnlyWhatDerivativesRead) {
  ExprP two = MakeConst("2::float8", kFloat8);
  RelP pred = SumBy(XJoinW(-1, 0), MakeCol(0, 0, kInt4),
                    MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8));
  RelP loss = MakeAggregate(
      MakeProject(pred, {MakeCall("pow", {MakeCall("tanh", {MakeCol(1, 0, kFloat8)}, kFloat8), two}, kFloat8)}), 0,
      {{"sum", 0}}, {kFloat8});
  Program p = Build(loss);
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_NE(p.sql.find("CASE WHEN r.a0_c1 IS NULL THEN NULL ELSE a.bd0 END"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("tanh(r.a0_c1) AS v0"), std::string::npos) << p.sql;
  EXPECT_EQ(p.sql.find(" AS v1"), std::string::npos) << p.sql;
  RelP w = MakeScan("public.w", {"f", "val"}, {kInt4, kFloat8}, {-1, 0});
  w->notnull = {true, true};
  p = Build(MakeAggregate(MakeProject(w, {MakeCall("mul", {MakeCol(1, 0, kFloat8), MakeCol(1, 0, kFloat8)}, kFloat8)}),
                          0, {{"sum", 0}}, {kFloat8}));
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_EQ(p.sql.find("IS NULL THEN NULL"), std::string::npos) << p.sql;
}

// An aggregate's backward pairs rows with their group by the group keys:
// NULL-safely in general, by plain equality where the key cannot be NULL
// (a NOT NULL column, or one a join compared with a strict operator).
TEST(Program, KeysThatCannotBeNullJoinByPlainEquality) {
  RelP loss = LinearLoss();
  Program p = Build(loss);
  // (an integer key widened to bigint, NULL a bigint no integer equals,
  // computed once per row on each side: one column to hash and compare)
  EXPECT_NE(p.sql.find("ON r.k0 = a.h0)"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("COALESCE(CAST(a.c0 AS pg_catalog.int8), 4294967296) AS h0"), std::string::npos) << p.sql;
  // (a float key: the stand-in value and the NULL flag)
  p = Build(SumOfSquares(SumBy(XJoinW(-1, 0), MakeCol(2, 0, kFloat8),
                               MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8)),
                         1));
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_NE(p.sql.find("ON r.k0 = a.h0 AND r.k0n = a.h0n"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("COALESCE(a.c0, CAST(0 AS pg_catalog.float8)) AS h0, (a.c0) IS NULL AS h0n"), std::string::npos)
      << p.sql;
  RelP j = XJoinW(-1, 0, {true, false, false});
  p = Build(SumOfSquares(
      SumBy(j, MakeCol(0, 0, kInt4), MakeCall("mul", {MakeCol(2, 0, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8)), 1));
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_NE(p.sql.find("ON r.k0 = a.c0"), std::string::npos) << p.sql;
  EXPECT_EQ(p.sql.find("a.h0"), std::string::npos) << p.sql;
}

}  // namespace
}  // namespace ddx
