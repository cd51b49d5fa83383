// What the core refuses, and the near cases it accepts.
#include <gtest/gtest.h>

#include "golden.h"
#include "models.h"
#include "sql_parses.h"

namespace ddx {
namespace {

TEST(Program, LossMustBeOneNumericColumn) {
  RelP w = Scan("public.w", {"f", "val"}, {kI4, kF8}, {-1, 0});
  try {
    Build(w);
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_EQ(e.code, "22023");
  }
}

TEST(Program, GroupKeyThatCarriesGradientIsRefused) {
  RelP w = Scan("public.w", {"f", "val"}, {kI4, kF8}, {-1, 0});
  RelP pre = Project(w, {Col(1, kF8), Col(1, kF8)});
  RelP g = Aggregate(pre, 1, {{"sum", 1}}, {kF8, kF8});
  RelP use = Project(g, {Call("mul", {Col(0, kF8), Col(1, kF8)})});
  RelP loss = Aggregate(use, 0, {{"sum", 0}}, {kF8});
  try {
    Build(loss);
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_EQ(e.code, "0A000");
  }
}

TEST(Program, GroupKeyThatCarriesNoGradientIsAccepted) {
  RelP w = Scan("public.w", {"f", "val"}, {kI4, kF8}, {-1, 0});
  RelP pre = Project(w, {Col(1, kF8), Col(1, kF8)});
  RelP g = Aggregate(pre, 1, {{"sum", 1}}, {kF8, kF8});
  RelP use = Project(g, {Col(1, kF8)});
  RelP loss = Aggregate(use, 0, {{"sum", 0}}, {kF8});
  EXPECT_EQ(ParseError(Build(loss).sql), "");
}

TEST(Program, FunctionWithoutRuleOnTheGradientPathIsRefused) {
  RelP w = Scan("public.w", {"f", "val"}, {kI4, kF8}, {-1, 0});
  RelP p = Project(w, {Opaque("pg_catalog.round($1)", {Col(1, kF8)}, kF8, "round")});
  RelP loss = Aggregate(p, 0, {{"sum", 0}}, {kF8});
  try {
    Build(loss);
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_EQ(e.code, "42883");
    EXPECT_NE(e.message.find("round"), std::string::npos);
  }
}

TEST(Program, VolatileFunctionOnTheGradientPathIsRefused) {
  RelP w = Scan("public.w", {"f", "val"}, {kI4, kF8}, {-1, 0});
  auto rnd = Opaque("pg_catalog.random()", {}, kF8, "random");
  std::const_pointer_cast<Expr>(rnd)->is_volatile = true;
  RelP p = Project(w, {Call("mul", {Col(1, kF8), rnd})});
  RelP loss = Aggregate(p, 0, {{"sum", 0}}, {kF8});
  try {
    Build(loss);
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_EQ(e.code, "0A000");
  }
}

}  // namespace
}  // namespace ddx
