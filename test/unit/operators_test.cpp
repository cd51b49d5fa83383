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
  RelP w = MakeScan("public.w", {"f", "val"}, {kInt4, kFloat8}, {-1, 0});
  RelP x = MakeScan("public.x", {"f"}, {kInt4}, {-1});
  auto ex = std::make_shared<Expr>();
  ex->kind = ExprKind::Sublink;
  ex->type = kBool;
  ex->sub = x;
  ex->corr = MakeOpaque("($1 = $2)", {MakeCol(0, 1, kInt4), MakeCol(0, 0, kInt4)}, kBool);
  RelP filt = MakeFilter(w, ex);
  ExprP cs = MakeCase({MakeOpaque("($1 > 0)", {MakeCol(1, 0, kFloat8)}, kBool),
                       MakeCall("exp", {MakeCol(1, 0, kFloat8)}, kFloat8), MakeCol(1, 0, kFloat8)},
                      kFloat8);
  RelP p = MakeProject(filt, {cs});
  RelP u = NewRel(RelKind::UnionAll);
  u->cols = {kFloat8};
  u->inputs = {p, MakeProject(w, {MakeCall("tanh", {MakeCol(1, 0, kFloat8)}, kFloat8)})};
  RelP lim = NewRel(RelKind::Limit);
  lim->cols = u->cols;
  lim->inputs = {u};
  lim->order = {{0, true, false}};
  lim->limit = "3";
  RelP loss = MakeAggregate(lim, 0, {{"sum", 0}, {"max", 0}}, {kFloat8, kFloat8});
  RelP one = MakeProject(loss, {MakeCall("add", {MakeCol(0, 0, kFloat8), MakeCol(1, 0, kFloat8)}, kFloat8)});
  Program prog = Build(one);
  EXPECT_EQ(ParseError(prog.sql), "") << prog.sql;
  EXPECT_NE(prog.sql.find("EXISTS (SELECT 1 FROM"), std::string::npos);
}

// Broke once: with no gradient reaching any parameter, the final UNION had
// only the loss-row count, whose columns were unnamed ("z.toid does not exist").
TEST(Program, NoParameterReachedStillNamesTheResultColumns) {
  RelP w = MakeScan("public.w", {"f", "val"}, {kInt4, kFloat8}, {-1, 0});
  RelP pre = MakeProject(w, {MakeCol(1, 0, kFloat8), MakeCol(1, 0, kFloat8)});
  RelP g = MakeAggregate(pre, 1, {{"count", 1}}, {kFloat8, kInt8});
  RelP use = MakeProject(g, {MakeCall("cast", {MakeCol(1, 0, kInt8)}, kFloat8)});
  RelP loss = MakeAggregate(use, 0, {{"sum", 0}}, {kFloat8});
  Program prog = Build(loss);
  EXPECT_EQ(ParseError(prog.sql), "");
  EXPECT_NE(prog.sql.find("NULL::oid AS toid, NULL::tid AS tid, -1 AS pidx"), std::string::npos);
}

// A relation read twice (a CTE) gets one cotangent: the sum of both readers.
TEST(Program, SharedRelationSumsItsReaders) {
  RelP w = MakeScan("public.w", {"f", "val"}, {kInt4, kFloat8}, {-1, 0});
  RelP sq = MakeProject(
      w, {MakeCol(0, 0, kInt4), MakeCall("mul", {MakeCol(1, 0, kFloat8), MakeCol(1, 0, kFloat8)}, kFloat8)});
  RelP j =
      MakeJoin(sq, sq, JoinKind::Inner, MakeOpaque("($1 = $2)", {MakeCol(0, 0, kInt4), MakeCol(2, 0, kInt4)}, kBool));
  RelP p = MakeProject(j, {MakeCall("mul", {MakeCol(1, 0, kFloat8), MakeCol(3, 0, kFloat8)}, kFloat8)});
  RelP loss = MakeAggregate(p, 0, {{"sum", 0}}, {kFloat8});
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
