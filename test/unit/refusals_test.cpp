// What the core refuses, and the near cases it accepts.
#include <gtest/gtest.h>

#include "golden.h"
#include "models.h"
#include "sql_parses.h"

namespace ddx {
namespace {

TEST(Program, LossMustBeOneNumericColumn) {
  RelP w = MakeScan("public.w", {"f", "val"}, {kInt4, kFloat8}, {-1, 0});
  try {
    Build(w);
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_EQ(e.code, "22023");
  }
}

TEST(Program, GroupKeyThatCarriesGradientIsRefused) {
  RelP w = MakeScan("public.w", {"f", "val"}, {kInt4, kFloat8}, {-1, 0});
  RelP pre = MakeProject(w, {MakeCol(1, 0, kFloat8), MakeCol(1, 0, kFloat8)});
  RelP g = MakeAggregate(pre, 1, {{"sum", 1}}, {kFloat8, kFloat8});
  RelP use = MakeProject(g, {MakeCall("mul", {MakeCol(0, 0, kFloat8), MakeCol(1, 0, kFloat8)}, kFloat8)});
  RelP loss = MakeAggregate(use, 0, {{"sum", 0}}, {kFloat8});
  try {
    Build(loss);
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_EQ(e.code, "0A000");
  }
}

TEST(Program, GroupKeyThatCarriesNoGradientIsAccepted) {
  RelP w = MakeScan("public.w", {"f", "val"}, {kInt4, kFloat8}, {-1, 0});
  RelP pre = MakeProject(w, {MakeCol(1, 0, kFloat8), MakeCol(1, 0, kFloat8)});
  RelP g = MakeAggregate(pre, 1, {{"sum", 1}}, {kFloat8, kFloat8});
  RelP use = MakeProject(g, {MakeCol(1, 0, kFloat8)});
  RelP loss = MakeAggregate(use, 0, {{"sum", 0}}, {kFloat8});
  EXPECT_EQ(ParseError(Build(loss).sql), "");
}

TEST(Program, FunctionWithoutRuleOnTheGradientPathIsRefused) {
  RelP w = MakeScan("public.w", {"f", "val"}, {kInt4, kFloat8}, {-1, 0});
  RelP p = MakeProject(w, {MakeOpaque("pg_catalog.round($1)", "round", {MakeCol(1, 0, kFloat8)}, kFloat8)});
  RelP loss = MakeAggregate(p, 0, {{"sum", 0}}, {kFloat8});
  try {
    Build(loss);
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_EQ(e.code, "42883");
    EXPECT_NE(e.message.find("round"), std::string::npos);
  }
}

TEST(Program, VolatileFunctionOnTheGradientPathIsRefused) {
  RelP w = MakeScan("public.w", {"f", "val"}, {kInt4, kFloat8}, {-1, 0});
  ExprP rnd = MakeOpaque("pg_catalog.random()", "random", {}, kFloat8, true);
  RelP p = MakeProject(w, {MakeCall("mul", {MakeCol(1, 0, kFloat8), rnd}, kFloat8)});
  RelP loss = MakeAggregate(p, 0, {{"sum", 0}}, {kFloat8});
  try {
    Build(loss);
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_EQ(e.code, "0A000");
  }
}

}  // namespace
}  // namespace ddx
