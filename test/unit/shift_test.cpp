// Held maxima (shift.h): a softmax's max held constant only where the loss
// cannot see it.
#include <gtest/gtest.h>

#include "golden.h"
#include "models.h"
#include "sql_parses.h"

namespace ddx {
namespace {

// A softmax's max is held constant (shift.h) where the loss is provably
// invariant under shifting it, and only there. The max's reverse rule shares
// ties by a window of counts (FILTER): its absence shows the max is held.
TEST(Program, SoftmaxMaxIsHeldConstantOnlyWhereTheLossCannotSeeIt) {
  auto eq = [](int a, int b) {
    return MakeOpaque("($1 OPERATOR(pg_catalog.=) $2)", {MakeCol(a, 0, kInt4), MakeCol(b, 0, kInt4)}, kBool);
  };
  RelP x = MakeScan("public.x", {"s", "f", "val"}, {kInt4, kInt4, kFloat8}, {-1, -1, 0});
  // mx = max(val) by s; e = exp(val - m); z = sum(e) by s; p = e / z
  RelP mx =
      MakeAggregate(MakeProject(x, {MakeCol(0, 0, kInt4), MakeCol(2, 0, kFloat8)}), 1, {{"max", 1}}, {kInt4, kFloat8});
  RelP e = MakeProject(
      MakeJoin(x, mx, JoinKind::Inner, eq(0, 3)),
      {MakeCol(0, 0, kInt4), MakeCol(1, 0, kInt4),
       MakeCall("exp", {MakeCall("sub", {MakeCol(2, 0, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8)}, kFloat8)});
  RelP z =
      MakeAggregate(MakeProject(e, {MakeCol(0, 0, kInt4), MakeCol(2, 0, kFloat8)}), 1, {{"sum", 1}}, {kInt4, kFloat8});
  auto held = [](const RelP &loss) {
    Program p = Build(loss);
    EXPECT_EQ(ParseError(p.sql), "") << p.sql;
    return p.sql.find("FILTER (WHERE") == std::string::npos;
  };
  RelP p = MakeProject(MakeJoin(e, z, JoinKind::Inner, eq(0, 3)),
                       {MakeCol(0, 0, kInt4), MakeCol(1, 0, kInt4),
                        MakeCall("div", {MakeCol(2, 0, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8)});
  EXPECT_TRUE(held(SumOfSquares(p, 2)));
  // log-sum-exp: m + ln(z), joined on the group
  RelP lse = MakeProject(
      MakeJoin(mx, z, JoinKind::Inner, eq(0, 2)),
      {MakeCol(0, 0, kInt4),
       MakeCall("add", {MakeCol(1, 0, kFloat8), MakeCall("ln", {MakeCol(3, 0, kFloat8)}, kFloat8)}, kFloat8)});
  EXPECT_TRUE(held(SumOfSquares(lse, 1)));
  // exp(val - m) not normalized: the loss moves with m
  EXPECT_FALSE(held(SumOfSquares(e, 2)));
  // m + ln(z) of different groups (a cross join): the shifts do not cancel
  RelP cross = MakeProject(
      MakeJoin(mx, z, JoinKind::Inner, nullptr),
      {MakeCall("add", {MakeCol(1, 0, kFloat8), MakeCall("ln", {MakeCol(3, 0, kFloat8)}, kFloat8)}, kFloat8)});
  EXPECT_FALSE(held(SumOfSquares(cross, 0)));
  // normalized by a sum over all groups: each group's shift differs
  RelP zall = MakeAggregate(MakeProject(e, {MakeCol(2, 0, kFloat8)}), 0, {{"sum", 0}}, {kFloat8});
  RelP pall = MakeProject(MakeJoin(e, zall, JoinKind::Inner, nullptr),
                          {MakeCall("div", {MakeCol(2, 0, kFloat8), MakeCol(3, 0, kFloat8)}, kFloat8)});
  EXPECT_FALSE(held(SumOfSquares(pall, 0)));
  // a probability compared in a filter: the rows kept depend on the scale
  RelP f = MakeFilter(e, MakeOpaque("($1 > 0.5)", {MakeCol(2, 0, kFloat8)}, kBool));
  EXPECT_FALSE(
      held(MakeAggregate(MakeProject(MakeJoin(f, z, JoinKind::Inner, eq(0, 3)),
                                     {MakeCall("div", {MakeCol(2, 0, kFloat8), MakeCol(4, 0, kFloat8)}, kFloat8)}),
                         0, {{"sum", 0}}, {kFloat8})));
}

}  // namespace
}  // namespace ddx
