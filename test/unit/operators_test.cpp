// Each operator family's forward and reverse steps: programs that parse,
// with one step per saved relation, read in place where they can.
#include <gtest/gtest.h>

#include <functional>

#include "golden.h"
#include "models.h"
#include "sql_parses.h"

namespace ddx {
namespace {

TEST(Program, LinearModelProgramParsesAndHasOneStepPerRelation) {
  Program p = Build(LinearLoss());
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  // forward: the scans x and w and the two aggregates; the join and the
  // projections are recomputed inside the aggregates' regions
  EXPECT_EQ(p.forward_steps, 4);
  // backward: the loss, pred (through its region, by its keys) and w; none to x
  EXPECT_EQ(p.backward_steps, 3);
  EXPECT_NE(p.sql.find("t.tableoid AS toid, t.ctid AS tid"), std::string::npos);
  EXPECT_EQ(p.sql.find("IS NOT DISTINCT FROM"), std::string::npos);
}

TEST(Program, ForwardSqlParses) { EXPECT_EQ(ParseError(BuildForwardSql(LinearLoss())), ""); }

TEST(Program, CaseSublinkUnionAndLimitEmitValidSql) {
  RelP w = Scan("public.w", {"f", "val"}, {kI4, kF8}, {-1, 0});
  RelP x = Scan("public.x", {"f"}, {kI4}, {-1});
  auto ex = std::make_shared<Expr>();
  ex->kind = ExprKind::Sublink;
  ex->type = kBool;
  ex->sub = x;
  ex->corr = Opaque("($1 = $2)", {Col(0, kI4, 1), Col(0, kI4)}, kBool);
  auto filt = std::make_shared<Rel>();
  filt->kind = RelKind::Filter;
  filt->cols = w->cols;
  filt->inputs = {w};
  filt->cond = ex;
  auto cs = std::make_shared<Expr>();
  cs->kind = ExprKind::Case;
  cs->type = kF8;
  cs->args = {Opaque("($1 > 0)", {Col(1, kF8)}, kBool), Call("exp", {Col(1, kF8)}), Col(1, kF8)};
  RelP p = Project(filt, {cs});
  auto u = std::make_shared<Rel>();
  u->kind = RelKind::UnionAll;
  u->cols = {kF8};
  u->inputs = {p, Project(w, {Call("tanh", {Col(1, kF8)})})};
  auto lim = std::make_shared<Rel>();
  lim->kind = RelKind::Limit;
  lim->cols = u->cols;
  lim->inputs = {u};
  lim->order = {{0, true, false}};
  lim->limit = "3";
  RelP loss = Aggregate(lim, 0, {{"sum", 0}, {"max", 0}}, {kF8, kF8});
  RelP one = Project(loss, {Call("add", {Col(0, kF8), Col(1, kF8)})});
  Program prog = Build(one);
  EXPECT_EQ(ParseError(prog.sql), "") << prog.sql;
  EXPECT_NE(prog.sql.find("EXISTS (SELECT 1 FROM"), std::string::npos);
}

// Broke once: with no gradient reaching any parameter, the final UNION had
// only the loss-row count, whose columns were unnamed ("z.toid does not exist").
TEST(Program, NoParameterReachedStillNamesTheResultColumns) {
  RelP w = Scan("public.w", {"f", "val"}, {kI4, kF8}, {-1, 0});
  RelP pre = Project(w, {Col(1, kF8), Col(1, kF8)});
  RelP g = Aggregate(pre, 1, {{"count", 1}}, {kF8, {"pg_catalog.int8", false}});
  RelP use = Project(g, {Call("cast", {Col(1, {"pg_catalog.int8", false})})});
  RelP loss = Aggregate(use, 0, {{"sum", 0}}, {kF8});
  Program prog = Build(loss);
  EXPECT_EQ(ParseError(prog.sql), "");
  EXPECT_NE(prog.sql.find("NULL::oid AS toid, NULL::tid AS tid, -1 AS pidx"), std::string::npos);
}

// A relation read twice (a CTE) gets one cotangent: the sum of both readers.
TEST(Program, SharedRelationSumsItsReaders) {
  RelP w = Scan("public.w", {"f", "val"}, {kI4, kF8}, {-1, 0});
  RelP sq = Project(w, {Col(0, kI4), Call("mul", {Col(1, kF8), Col(1, kF8)})});
  RelP j = Join(sq, sq, Opaque("($1 = $2)", {Col(0, kI4), Col(2, kI4)}, kBool));
  RelP p = Project(j, {Call("mul", {Col(1, kF8), Col(3, kF8)})});
  RelP loss = Aggregate(p, 0, {{"sum", 0}}, {kF8});
  Program prog = Build(loss);
  EXPECT_EQ(ParseError(prog.sql), "");
  EXPECT_NE(prog.sql.find("UNION ALL SELECT q.rid"), std::string::npos) << prog.sql;
}

// A plain table read only by regions is read in place: no copy, ctid as the
// rid, its OID by name in the result.
TEST(Program, ScansReadInPlaceUseTheCtid) {
  RelP loss = LinearLoss();
  std::function<void(const RelP &)> mark = [&](const RelP &r) {
    if (r->kind == RelKind::Scan) r->single = true;
    for (auto &in : r->inputs) mark(in);
  };
  mark(loss);
  Program p = Build(loss);
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_EQ(p.forward_steps, 2);  // the two aggregates
  EXPECT_EQ(p.sql.find("row_number() OVER () AS rid, t."), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("(public.x a0 JOIN public.w a1"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("a1.ctid AS rid"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("CAST('public.w' AS pg_catalog.regclass)"), std::string::npos) << p.sql;
}

}  // namespace
}  // namespace ddx
