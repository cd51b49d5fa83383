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
  auto eq = [](int a, int b) { return Opaque("($1 OPERATOR(pg_catalog.=) $2)", {Col(a, kI4), Col(b, kI4)}, kBool); };
  RelP x = Scan("public.x", {"s", "f", "val"}, {kI4, kI4, kF8}, {-1, -1, 0});
  // mx = max(val) by s; e = exp(val - m); z = sum(e) by s; p = e / z
  RelP mx = Aggregate(Project(x, {Col(0, kI4), Col(2, kF8)}), 1, {{"max", 1}}, {kI4, kF8});
  RelP e = Project(Join(x, mx, eq(0, 3)),
                   {Col(0, kI4), Col(1, kI4), Call("exp", {Call("sub", {Col(2, kF8), Col(4, kF8)})})});
  RelP z = Aggregate(Project(e, {Col(0, kI4), Col(2, kF8)}), 1, {{"sum", 1}}, {kI4, kF8});
  auto held = [](const RelP &loss) {
    Program p = Build(loss);
    EXPECT_EQ(ParseError(p.sql), "") << p.sql;
    return p.sql.find("FILTER (WHERE") == std::string::npos;
  };
  RelP p = Project(Join(e, z, eq(0, 3)), {Col(0, kI4), Col(1, kI4), Call("div", {Col(2, kF8), Col(4, kF8)})});
  EXPECT_TRUE(held(SumOfSquares(p, 2)));
  // log-sum-exp: m + ln(z), joined on the group
  RelP lse = Project(Join(mx, z, eq(0, 2)), {Col(0, kI4), Call("add", {Col(1, kF8), Call("ln", {Col(3, kF8)})})});
  EXPECT_TRUE(held(SumOfSquares(lse, 1)));
  // exp(val - m) not normalized: the loss moves with m
  EXPECT_FALSE(held(SumOfSquares(e, 2)));
  // m + ln(z) of different groups (a cross join): the shifts do not cancel
  RelP cross = Project(Join(mx, z, nullptr), {Call("add", {Col(1, kF8), Call("ln", {Col(3, kF8)})})});
  EXPECT_FALSE(held(SumOfSquares(cross, 0)));
  // normalized by a sum over all groups: each group's shift differs
  RelP zall = Aggregate(Project(e, {Col(2, kF8)}), 0, {{"sum", 0}}, {kF8});
  RelP pall = Project(Join(e, zall, nullptr), {Call("div", {Col(2, kF8), Col(3, kF8)})});
  EXPECT_FALSE(held(SumOfSquares(pall, 0)));
  // a probability compared in a filter: the rows kept depend on the scale
  auto f = std::make_shared<Rel>(*p);
  f->kind = RelKind::Filter;
  f->exprs.clear();
  f->inputs = {e};
  f->cols = e->cols;
  f->cond = Opaque("($1 > 0.5)", {Col(2, kF8)}, kBool);
  EXPECT_FALSE(held(
      Aggregate(Project(Join(f, z, eq(0, 3)), {Call("div", {Col(2, kF8), Col(4, kF8)})}), 0, {{"sum", 0}}, {kF8})));
}

}  // namespace
}  // namespace ddx
