// The program builder: IR built by hand, programs checked for shape, for
// valid SQL (libpg_query) and for the refusals the core owns.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>

#include "ddx/core/program.h"
#include "sql_parses.h"

namespace ddx {
namespace {

const Type kF8{"pg_catalog.float8", true};
const Type kI4{"pg_catalog.int4", false};
const Type kBool{"pg_catalog.bool", false};

// Every program a test builds is also a golden snapshot: compared with
// test/golden/unit/<Suite>.<Test>.<n>.sql (DDX_UPDATE_GOLDEN=1 writes them),
// so that a reorganization of the core is proven to emit the same bytes.
Program Build(const RelP &loss) {
  Program p = BuildGradientProgram(loss);
  const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
  static std::string last;
  static int n = 0;
  std::string key = std::string(info->test_suite_name()) + "." + info->name();
  if (key != last) last = key, n = 0;
  std::string path = std::string(DDX_GOLDEN_DIR) + "/" + key + "." + std::to_string(n++) + ".sql";
  if (std::getenv("DDX_UPDATE_GOLDEN")) {
    std::ofstream(path) << p.sql;
    return p;
  }
  std::ifstream f(path);
  std::stringstream want;
  want << f.rdbuf();
  if (!f.good() || want.str() != p.sql)
    ADD_FAILURE() << "the program differs from its golden snapshot " << path
                  << " (if the change is meant, DDX_UPDATE_GOLDEN=1 rewrites it)";
  return p;
}

RelP Scan(const std::string &table, std::vector<std::string> names, std::vector<Type> types, std::vector<int> param) {
  auto r = std::make_shared<Rel>();
  r->kind = RelKind::Scan;
  r->table = table;
  r->names = std::move(names);
  r->cols = std::move(types);
  r->param = std::move(param);
  return r;
}

ExprP Col(int c, Type t, int side = 0) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Col;
  e->col = c;
  e->side = side;
  e->type = t;
  return e;
}

ExprP Call(const std::string &rule, std::vector<ExprP> args, Type t = kF8) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Call;
  e->text = rule;
  e->args = std::move(args);
  e->type = t;
  return e;
}

ExprP Opaque(const std::string &tmpl, std::vector<ExprP> args, Type t, const std::string &name = "op") {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Opaque;
  e->text = tmpl;
  e->name = name;
  e->args = std::move(args);
  e->type = t;
  return e;
}

RelP Join(RelP l, RelP r, ExprP cond) {
  auto j = std::make_shared<Rel>();
  j->kind = RelKind::Join;
  j->cols = l->cols;
  j->cols.insert(j->cols.end(), r->cols.begin(), r->cols.end());
  j->inputs = {l, r};
  j->cond = cond;
  return j;
}

RelP Project(RelP in, std::vector<ExprP> exprs) {
  auto p = std::make_shared<Rel>();
  p->kind = RelKind::Project;
  for (auto &e : exprs) p->cols.push_back(e->type);
  p->inputs = {in};
  p->exprs = std::move(exprs);
  return p;
}

RelP Aggregate(RelP in, int nkeys, std::vector<AggCall> aggs, std::vector<Type> types) {
  auto a = std::make_shared<Rel>();
  a->kind = RelKind::Aggregate;
  a->inputs = {in};
  a->nkeys = nkeys;
  a->aggs = std::move(aggs);
  a->cols = std::move(types);
  return a;
}

// x(s, f, val) JOIN w(f, val) ON x.f = w.f; xparam, wparam: the val
// columns' parameter indexes (-1: none).
RelP XJoinW(int xparam, int wparam, std::vector<bool> x_notnull = {}) {
  RelP x = Scan("public.x", {"s", "f", "val"}, {kI4, kI4, kF8}, {-1, -1, xparam});
  x->notnull = std::move(x_notnull);
  RelP w = Scan("public.w", {"f", "val"}, {kI4, kF8}, {-1, wparam});
  return Join(x, w, Opaque("($1 = $2)", {Col(1, kI4), Col(3, kI4)}, kBool));
}

// SELECT key, sum(value) FROM in GROUP BY key
RelP SumBy(const RelP &in, ExprP key, ExprP value) {
  Type kt = key->type;
  return Aggregate(Project(in, {std::move(key), std::move(value)}), 1, {{"sum", 1}}, {kt, kF8});
}

// SELECT sum(c * c) FROM in
RelP SumOfSquares(const RelP &in, int c) {
  return Aggregate(Project(in, {Call("mul", {Col(c, kF8), Col(c, kF8)})}), 0, {{"sum", 0}}, {kF8});
}

// pred = SELECT x.s, sum(x.val * w.val) FROM x JOIN w ON x.f = w.f GROUP BY x.s
// loss = SELECT sum(pred.z * pred.z) FROM pred
RelP LinearLoss() {
  return SumOfSquares(SumBy(XJoinW(-1, 0), Col(0, kI4), Call("mul", {Col(2, kF8), Col(4, kF8)})), 1);
}

// h = x ⋈ a ⋈ g ⋈ b (four leaves, one row per x row: LayerNorm's shape),
// then Σ_e h · w grouped by keys of both sides (a contraction: each h row
// meets every w row of its e) or by a key of h's only.
RelP FourLeafSideOf(bool contraction) {
  RelP x = Scan("public.x", {"s", "e", "val"}, {kI4, kI4, kF8}, {-1, -1, 0});
  RelP a = Scan("public.a", {"s", "val"}, {kI4, kF8}, {-1, -1});
  RelP g = Scan("public.g", {"e", "val"}, {kI4, kF8}, {-1, -1});
  RelP b = Scan("public.b", {"e", "val"}, {kI4, kF8}, {-1, -1});
  auto eq = [](int l, int r) { return Opaque("($1 = $2)", {Col(l, kI4), Col(r, kI4)}, kBool); };
  RelP j = Join(Join(Join(x, a, eq(0, 3)), g, eq(1, 5)), b, eq(1, 7));
  RelP h =
      Project(j, {Col(0, kI4), Col(1, kI4),
                  Call("add", {Call("mul", {Col(2, kF8), Col(4, kF8)}), Call("mul", {Col(6, kF8), Col(8, kF8)})})});
  RelP w = Scan("public.w", {"e", "c", "val"}, {kI4, kI4, kF8}, {-1, -1, 1});
  RelP hw = Join(h, w, eq(1, 3));
  ExprP prod = Call("mul", {Col(2, kF8), Col(5, kF8)});
  RelP agg = contraction ? Aggregate(Project(hw, {Col(0, kI4), Col(4, kI4), prod}), 2, {{"sum", 2}}, {kI4, kI4, kF8})
                         : Aggregate(Project(hw, {Col(0, kI4), prod}), 1, {{"sum", 1}}, {kI4, kF8});
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

// w = SELECT f, val, <call> OVER (ORDER BY f <frame>) FROM w
RelP WindowOver(WinCall call, Frame frame, Type out = kF8) {
  RelP w = Scan("public.w", {"f", "val"}, {kI4, kF8}, {-1, 0});
  auto win = std::make_shared<Rel>();
  win->kind = RelKind::Window;
  win->inputs = {Project(w, {Col(0, kI4), Col(1, kF8)})};
  win->cols = {kI4, kF8, out};
  win->order = {SortKey{0, false, false}};
  win->frame = frame;
  win->wins = {call};
  return win;
}

Frame Rows(BoundKind s, std::string so, BoundKind e, std::string eo) {
  Frame f;
  f.mode = FrameMode::Rows;
  f.start = {s, so};
  f.end = {e, eo};
  return f;
}

// The backward of a sliding sum is a sliding sum of the cotangents over the
// mirrored frame: [j-2, j+1] forward, [k-1, k+2] backward.
TEST(Program, WindowSumRunsTheTransposedFrame) {
  RelP win = WindowOver({"sum", 1, -1, "1"}, Rows(BoundKind::Preceding, "2", BoundKind::Following, "1"));
  RelP loss = SumOfSquares(win, 2);
  Program prog = Build(loss);
  EXPECT_EQ(ParseError(prog.sql), "") << prog.sql;
  EXPECT_NE(prog.sql.find("OVER (w ROWS BETWEEN 2 PRECEDING AND 1 FOLLOWING)"), std::string::npos) << prog.sql;
  EXPECT_NE(prog.sql.find("OVER (wt ROWS BETWEEN 1 PRECEDING AND 2 FOLLOWING)"), std::string::npos) << prog.sql;
  // a ROWS frame depends on the order of ties: the program counts them
  EXPECT_NE(prog.sql.find("-3, count(*)::float8, NULL::text FROM"), std::string::npos);
}

// lag's transpose is lead by the same offset; its default gets the cotangent
// of the rows without a predecessor.
TEST(Program, LagIsTransposedToLead) {
  RelP win = WindowOver({"lag", 1, 1, "2"}, Frame{});
  RelP loss = Aggregate(Project(win, {Col(2, kF8)}), 0, {{"sum", 0}}, {kF8});
  Program prog = Build(loss);
  EXPECT_EQ(ParseError(prog.sql), "") << prog.sql;
  EXPECT_NE(prog.sql.find("lead(b.d2, 2) OVER wp"), std::string::npos) << prog.sql;
  EXPECT_NE(prog.sql.find("lag(true, 2, false) OVER wp"), std::string::npos) << prog.sql;
}

TEST(Program, RankAsAValueIsRefusedAndAsAFilterAccepted) {
  const Type kI8{"pg_catalog.int8", false};
  RelP win = WindowOver({"row_number", -1, -1, "1"}, Frame{}, kI8);
  RelP value =
      Aggregate(Project(win, {Call("mul", {Col(1, kF8), Call("cast", {Col(2, kI8)})})}), 0, {{"sum", 0}}, {kF8});
  try {
    Build(value);
    FAIL() << "rank used as a value was accepted";
  } catch (const Error &e) {
    EXPECT_EQ(e.code, "0A000");
    EXPECT_NE(e.message.find("rank used as a value"), std::string::npos);
  }
  auto f = std::make_shared<Rel>();
  f->kind = RelKind::Filter;
  f->inputs = {win};
  f->cols = win->cols;
  f->cond = Opaque("($1 <= 3)", {Col(2, kI8)}, kBool);
  RelP topk = Aggregate(Project(f, {Col(1, kF8)}), 0, {{"sum", 0}}, {kF8});
  Program prog = Build(topk);
  EXPECT_EQ(ParseError(prog.sql), "") << prog.sql;
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

// Every scan a Citus table, as the translator marks one: a parameter table's
// rows keyed by its first column.
void MarkCitus(const RelP &r) {
  if (r->kind == RelKind::Scan) {
    r->citus = true;
    bool param = false;
    for (int k : r->param) param = param || k >= 0;
    if (param) r->identity = {r->names.at(0)};
  }
  for (auto &in : r->inputs) MarkCitus(in);
}

// A Citus table is read through a saved copy (its rid computed once, not a
// shard's ctid), and a parameter row in one is identified by its primary
// key: the program's key column, tid NULL. Forward mode refuses it.
TEST(Program, CitusTablesAreSavedAndTheirParameterRowsKeyed) {
  RelP loss = LinearLoss();
  MarkCitus(loss);
  Program p = Build(loss);
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_EQ(p.sql.find(".ctid"), std::string::npos) << p.sql;
  EXPECT_EQ(p.sql.find("t.tableoid"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("ROW(t.f)::text AS key, t.f AS c0"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("NULL::tid AS tid, 0 AS pidx"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find(", f.key FROM"), std::string::npos) << p.sql;
  try {
    BuildTangentSql(loss, {});
    ADD_FAILURE() << "forward mode over a Citus table was not refused";
  } catch (const Error &e) {
    EXPECT_EQ(e.code, std::string(sqlstate::kFeatureNotSupported));
  }
}

// In place on Citus: the data (a Citus table without parameters) is read
// where it is, the parameters through their keyed copy, and nothing is
// fenced, so that Citus can push the per-row work to its workers.
TEST(Program, CitusDataInPlaceIsUnfenced) {
  // sum(tanh(pred.z) * y.val) over pred JOIN y, pred = x JOIN w by x.s (the
  // gathered program computes tanh only for pred rows that meet a y row)
  RelP pred = SumBy(XJoinW(-1, 0), Col(0, kI4), Call("mul", {Col(2, kF8), Col(4, kF8)}));
  RelP y = Scan("public.y", {"s", "val"}, {kI4, kF8}, {-1, -1});
  RelP yj = Join(pred, y, Opaque("($1 OPERATOR(pg_catalog.=) $2)", {Col(2, kI4), Col(0, kI4)}, kBool));
  RelP loss = Aggregate(Project(yj, {Call("mul", {Call("tanh", {Col(1, kF8)}), Col(3, kF8)})}), 0, {{"sum", 0}}, {kF8});
  MarkCitus(loss);
  EXPECT_TRUE(ReadsCitusData(loss));
  Program g = BuildGradientProgram(loss);
  Program p = BuildGradientProgram(loss, CitusPlacement::InPlace);
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_NE(g.sql.find("OFFSET 0"), std::string::npos) << g.sql;
  EXPECT_EQ(g.sql.find("public.x a"), std::string::npos) << g.sql;
  EXPECT_EQ(p.sql.find("OFFSET 0"), std::string::npos) << p.sql;
  EXPECT_NE(g.sql.find("EXISTS"), std::string::npos) << g.sql;
  EXPECT_EQ(p.sql.find("EXISTS"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("public.x a0"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("ROW(t.f)::text AS key"), std::string::npos) << p.sql;
}

// A group's rid is its keys where they are integers: one key that cannot be
// NULL as it is, a nullable one widened with NULL a bigint no integer is,
// others numbered by row_number(). In place on Citus, a per-sample step with
// such a rid is recomputed by its readers (NOT MATERIALIZED, staying on the
// workers), unless a max compares recomputed values.
TEST(Program, GroupRidsFromKeysAndPerSampleStepsRecomputedInPlace) {
  Program p = Build(LinearLoss());
  EXPECT_NE(p.sql.find("SELECT COALESCE(CAST(a0.c0 AS pg_catalog.int8), 4294967296) AS rid, a0.c0 AS c0"),
            std::string::npos)
      << p.sql;
  auto linear = [](const std::string &agg) {
    RelP pred = SumBy(XJoinW(-1, 0, {true, false, false}), Col(0, kI4), Call("mul", {Col(2, kF8), Col(4, kF8)}));
    RelP loss = Aggregate(Project(pred, {Call("mul", {Col(1, kF8), Col(1, kF8)})}), 0, {{agg, 0}}, {kF8});
    MarkCitus(loss);
    return loss;
  };
  p = Build(linear("sum"));
  EXPECT_NE(p.sql.find("SELECT (a0.c0) AS rid, a0.c0 AS c0"), std::string::npos) << p.sql;
  Program in = BuildGradientProgram(linear("sum"), CitusPlacement::InPlace);
  EXPECT_EQ(ParseError(in.sql), "") << in.sql;
  EXPECT_NE(in.sql.find("f5 AS NOT MATERIALIZED (SELECT (a0.s) AS rid"), std::string::npos) << in.sql;
  Program gathered = BuildGradientProgram(linear("sum"));
  EXPECT_EQ(gathered.sql.find("NOT MATERIALIZED (SELECT (a0."), std::string::npos) << gathered.sql;
  // (in place, the loss aggregate's one-row cotangent, here the seed, stays
  // stored for the workers' tasks to read; read by one step, it is
  // otherwise planned inside it)
  EXPECT_NE(in.sql.find(" AS MATERIALIZED (SELECT rid, 1::float8 AS d0 FROM f"), std::string::npos) << in.sql;
  EXPECT_NE(gathered.sql.find(" AS NOT MATERIALIZED (SELECT rid, 1::float8 AS d0 FROM f"), std::string::npos)
      << gathered.sql;
  in = BuildGradientProgram(linear("max"), CitusPlacement::InPlace);
  EXPECT_NE(in.sql.find("f5 AS MATERIALIZED (SELECT (a0.s) AS rid"), std::string::npos) << in.sql;
  // (two keys, both NOT NULL)
  RelP two = Aggregate(
      Project(XJoinW(-1, 0, {true, true, false}), {Col(0, kI4), Col(1, kI4), Call("mul", {Col(2, kF8), Col(4, kF8)})}),
      2, {{"sum", 2}}, {kI4, kI4, kF8});
  p = Build(SumOfSquares(two, 2));
  EXPECT_NE(p.sql.find(
                "(CAST(a0.c0 AS pg_catalog.int8) * 4294967296 + (CAST(a0.c1 AS pg_catalog.int8) + 2147483648)) AS rid"),
            std::string::npos)
      << p.sql;
}

// In place on Citus, a per-sample aggregate whose rid packs two keys (the
// MLP's hidden layer, by sample and unit) is matched to its cotangent and
// grouped with the keys beside the rid, so that Citus sees the distribution
// column in both: its cotangent carries them (rk0, rk1), every contribution
// groups by them, the deferred rows rejoin on them, and its transpose reads
// them from the cotangent. Not in the gathered program, nor on one server.
// The MLP of the packed-rid tests: x(s, f, val) ⋈ w1(f, j, val) summed by
// (s, j) into the hidden layer h, tanh(h) ⋈ w2(j, val) summed by s, the loss
// a sum of squares; `sample` the type of s (never NULL: a distribution column).
namespace {
struct HiddenLayer {
  RelP xw, h, w2, loss;
};
HiddenLayer HiddenLayerMlp(const Type &sample) {
  RelP x = Scan("public.x", {"s", "f", "val"}, {sample, kI4, kF8}, {-1, -1, -1});
  x->notnull = {true, true, false};
  RelP w1 = Scan("public.w1", {"f", "j", "val"}, {kI4, kI4, kF8}, {-1, -1, 0});
  w1->notnull = {true, true, false};
  RelP xw = Join(x, w1, Opaque("($1 = $2)", {Col(1, kI4), Col(3, kI4)}, kBool));
  RelP h = Aggregate(Project(xw, {Col(0, sample), Col(4, kI4), Call("mul", {Col(2, kF8), Col(5, kF8)})}), 2,
                     {{"sum", 2}}, {sample, kI4, kF8});
  RelP w2 = Scan("public.w2", {"j", "val"}, {kI4, kF8}, {-1, 1});
  RelP hw = Join(Project(h, {Col(0, sample), Col(1, kI4), Call("tanh", {Col(2, kF8)})}), w2,
                 Opaque("($1 = $2)", {Col(1, kI4), Col(3, kI4)}, kBool));
  RelP loss = SumOfSquares(SumBy(hw, Col(0, sample), Call("mul", {Col(2, kF8), Col(4, kF8)})), 1);
  MarkCitus(loss);
  return {xw, h, w2, loss};
}
}  // namespace

TEST(Program, PackedRidsCarryTheirKeysInPlace) {
  auto [xw, h, w2, loss] = HiddenLayerMlp(kI4);
  Program in = BuildGradientProgram(loss, CitusPlacement::InPlace);
  EXPECT_EQ(ParseError(in.sql), "") << in.sql;
  EXPECT_NE(in.sql.find("4294967296 + (CAST("), std::string::npos) << in.sql;  // (the packed rid)
  EXPECT_NE(in.sql.find("GROUP BY q.r0, q.rk0_0, q.rk0_1"), std::string::npos) << in.sql;
  EXPECT_NE(in.sql.find("AND a0.c0 = n.rk0_0 AND a0.c1 = n.rk0_1"), std::string::npos) << in.sql;
  EXPECT_NE(in.sql.find("n.rk0_0 AS rk0, n.rk0_1 AS rk1"), std::string::npos) << in.sql;
  // (its groups' keys read from its cotangent alone, not from the hidden
  // layer recomputed again: KeysInCotangent)
  EXPECT_NE(in.sql.find("(SELECT b.rid AS rid, b.rk0 AS c0, b.rk1 AS c1, b.d2 AS bd2 FROM b5 b) a"), std::string::npos)
      << in.sql;
  EXPECT_EQ(in.sql.find("b.rk0 = a.c0"), std::string::npos) << in.sql;
  // (a recomputed step's cotangent is recomputed too, however many read it)
  int recomputed = 0;
  const std::regex step("\\nf([0-9]+) AS NOT MATERIALIZED");
  for (std::sregex_iterator m(in.sql.begin(), in.sql.end(), step), end; m != end; ++m, ++recomputed) {
    std::string b = "\nb" + (*m)[1].str() + " AS ";
    size_t at = in.sql.find(b);
    EXPECT_NE(at, std::string::npos) << b;
    EXPECT_EQ(in.sql.compare(at + b.size(), 17, "NOT MATERIALIZED "), 0) << in.sql.substr(at, 80);
  }
  EXPECT_EQ(recomputed, 2) << in.sql;  // the hidden layer and the output
  // (read twice, by the output and by a sum of its squares: the two
  // contributions summed by the rid and its keys)
  RelP th = Project(h, {Col(0, kI4), Col(1, kI4), Call("tanh", {Col(2, kF8)})});
  RelP hw2 = Join(th, w2, Opaque("($1 = $2)", {Col(1, kI4), Col(3, kI4)}, kBool));
  RelP z = SumBy(hw2, Col(0, kI4), Call("mul", {Col(2, kF8), Col(4, kF8)}));
  RelP sq = SumBy(th, Col(0, kI4), Call("mul", {Col(2, kF8), Col(2, kF8)}));
  RelP both = Join(z, sq, Opaque("($1 = $2)", {Col(0, kI4), Col(2, kI4)}, kBool));
  RelP twice = Aggregate(Project(both, {Call("add", {Col(1, kF8), Col(3, kF8)})}), 0, {{"sum", 0}}, {kF8});
  MarkCitus(twice);
  in = BuildGradientProgram(twice, CitusPlacement::InPlace);
  EXPECT_EQ(ParseError(in.sql), "") << in.sql;
  EXPECT_NE(in.sql.find(") z GROUP BY z.rid, z.rk0, z.rk1)"), std::string::npos) << in.sql;
  // (a hidden layer that averages: its backward reads each group's count,
  // which only the saved rows have, so it still joins them on the rid and
  // its keys)
  RelP ha = Aggregate(Project(xw, {Col(0, kI4), Col(4, kI4), Call("mul", {Col(2, kF8), Col(5, kF8)})}), 2, {{"avg", 2}},
                      {kI4, kI4, kF8});
  RelP haw = Join(Project(ha, {Col(0, kI4), Col(1, kI4), Call("tanh", {Col(2, kF8)})}), w2,
                  Opaque("($1 = $2)", {Col(1, kI4), Col(3, kI4)}, kBool));
  RelP avg_loss = SumOfSquares(SumBy(haw, Col(0, kI4), Call("mul", {Col(2, kF8), Col(4, kF8)})), 1);
  MarkCitus(avg_loss);
  in = BuildGradientProgram(avg_loss, CitusPlacement::InPlace);
  EXPECT_EQ(ParseError(in.sql), "") << in.sql;
  EXPECT_NE(in.sql.find("ON b.rid = a.rid AND b.rk0 = a.c0 AND b.rk1 = a.c1"), std::string::npos) << in.sql;
  for (const Program &p : {BuildGradientProgram(loss), Build(loss)}) {
    EXPECT_EQ(ParseError(p.sql), "") << p.sql;
    EXPECT_EQ(p.sql.find("rk0"), std::string::npos) << p.sql;
  }
}

// A hidden layer whose sample id is a bigint: in place on Citus its rid is
// the two keys packed into a numeric (k0 * 2^64 + (k1 + 2^63)), computed per
// row, with the keys beside it, so that it is recomputed on the workers; not
// row_number(), which Citus computes on the coordinator (the layer gathered).
// Off Citus it keeps row_number().
TEST(Program, BigintKeysPackIntoANumericRidInPlace) {
  RelP loss = HiddenLayerMlp(Type{"pg_catalog.int8", false}).loss;
  Program in = BuildGradientProgram(loss, CitusPlacement::InPlace);
  EXPECT_EQ(ParseError(in.sql), "") << in.sql;
  EXPECT_NE(in.sql.find("AS pg_catalog.numeric) * 18446744073709551616 + (CAST("), std::string::npos) << in.sql;
  EXPECT_NE(in.sql.find("n.rk0_0 AS rk0, n.rk0_1 AS rk1"), std::string::npos) << in.sql;
  const std::regex recomputed("\\nf([0-9]+) AS NOT MATERIALIZED \\(SELECT \\(CAST");
  EXPECT_TRUE(std::regex_search(in.sql, recomputed)) << in.sql;
  for (const Program &p : {BuildGradientProgram(loss), Build(loss)}) {
    EXPECT_EQ(ParseError(p.sql), "") << p.sql;
    EXPECT_EQ(p.sql.find("numeric"), std::string::npos) << p.sql;
    EXPECT_NE(p.sql.find("row_number()"), std::string::npos) << p.sql;
  }
}

// A sum's adjoint is NULL where its argument is: tested on the columns the
// argument is strict in, not on its value (nothing to test where they cannot
// be NULL), and a value that no derivative reads is not computed
// (power(tanh(z), 2): tanh(z), not its square).
TEST(Program, ASumTestsItsArgumentsColumnsAndComputesOnlyWhatDerivativesRead) {
  auto two = std::make_shared<Expr>();
  two->kind = ExprKind::Const;
  two->type = kF8;
  two->text = "2::float8";
  RelP pred = SumBy(XJoinW(-1, 0), Col(0, kI4), Call("mul", {Col(2, kF8), Col(4, kF8)}));
  RelP loss = Aggregate(Project(pred, {Call("pow", {Call("tanh", {Col(1, kF8)}), two})}), 0, {{"sum", 0}}, {kF8});
  Program p = Build(loss);
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_NE(p.sql.find("CASE WHEN r.a0_c1 IS NULL THEN NULL ELSE a.bd0 END"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("tanh(r.a0_c1) AS v0"), std::string::npos) << p.sql;
  EXPECT_EQ(p.sql.find(" AS v1"), std::string::npos) << p.sql;
  RelP w = Scan("public.w", {"f", "val"}, {kI4, kF8}, {-1, 0});
  w->notnull = {true, true};
  p = Build(Aggregate(Project(w, {Call("mul", {Col(1, kF8), Col(1, kF8)})}), 0, {{"sum", 0}}, {kF8}));
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
  p = Build(SumOfSquares(SumBy(XJoinW(-1, 0), Col(2, kF8), Call("mul", {Col(2, kF8), Col(4, kF8)})), 1));
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_NE(p.sql.find("ON r.k0 = a.h0 AND r.k0n = a.h0n"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("COALESCE(a.c0, CAST(0 AS pg_catalog.float8)) AS h0, (a.c0) IS NULL AS h0n"), std::string::npos)
      << p.sql;
  RelP j = XJoinW(-1, 0, {true, false, false});
  p = Build(SumOfSquares(SumBy(j, Col(0, kI4), Call("mul", {Col(2, kF8), Col(4, kF8)})), 1));
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_NE(p.sql.find("ON r.k0 = a.c0"), std::string::npos) << p.sql;
  EXPECT_EQ(p.sql.find("a.h0"), std::string::npos) << p.sql;
}

// In sum(f(x) * w) over x JOIN w, the factor f(x) is differentiated after its
// adjoint is summed per row of x (its own grouping set), not once per joined
// row. Where x also has a set of its own (a term of x at the joined rows'
// grain), the factor's set is told apart by a marker, g0.
TEST(Program, ProductFactorsAreDifferentiatedAtTheirOwnGrain) {
  ExprP tanh_w = Call("mul", {Call("tanh", {Col(2, kF8)}), Col(4, kF8)});
  RelP pred = SumBy(XJoinW(0, 1), Col(0, kI4), tanh_w);
  Program p = Build(SumOfSquares(pred, 1));
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_NE(p.sql.find("GROUPING SETS ((q.r1), (q.r0))"), std::string::npos) << p.sql;
  EXPECT_NE(p.sql.find("n.u0"), std::string::npos) << p.sql;  // the factor, at its grain
  // its values read again from its leaf by rid, not carried through the grouping sets by min()
  EXPECT_NE(p.sql.find("a0.rid = n.r0"), std::string::npos) << p.sql;
  EXPECT_EQ(p.sql.find("min(q.x"), std::string::npos) << p.sql;

  pred = SumBy(XJoinW(0, 1), Col(0, kI4), Call("add", {tanh_w, Call("mul", {Col(2, kF8), Col(2, kF8)})}));
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
  RelP pred = SumBy(j, Col(3, kI4), Call("mul", {Call("exp", {Col(2, kF8)}), Col(4, kF8)}));
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
  RelP y = Scan("public.y", {"s", "val"}, {kI4, kF8}, {-1, -1});
  pred = SumBy(j, Col(3, kI4), Call("mul", {Col(2, kF8), Col(4, kF8)}));
  RelP yj = Join(y, pred, Opaque("($1 OPERATOR(pg_catalog.=) $2)", {Col(2, kI4), Col(0, kI4)}, kBool));
  p = Build(Aggregate(Project(yj, {Call("mul", {Call("exp", {Col(1, kF8)}), Col(3, kF8)})}), 0, {{"sum", 0}}, {kF8}));
  EXPECT_EQ(ParseError(p.sql), "") << p.sql;
  EXPECT_EQ(p.sql.find("EXISTS"), std::string::npos) << p.sql;
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

  p = Build(SumOfSquares(SumBy(XJoinW(0, 1), Col(0, kI4), Call("mul", {Col(2, kF8), Col(4, kF8)})), 1));
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
    RelP q = Scan("public.q", {"i", "c", "val"}, {t, kI4, kF8}, {-1, -1, 0});
    RelP k = Scan("public.k", {"j", "c", "val"}, {t, kI4, kF8}, {-1, -1, 1});
    RelP j = Join(q, k,
                  Opaque("($1 AND $2)",
                         {Opaque("($1 OPERATOR(pg_catalog.=) $2)", {Col(1, kI4), Col(4, kI4)}, kBool),
                          Opaque("($1 OPERATOR(pg_catalog.<=) $2)", {Col(3, t), Col(0, t)}, kBool)},
                         kBool, "AND"));
    RelP s = Aggregate(Project(j, {Col(0, t), Col(3, t), Call("mul", {Col(2, kF8), Col(5, kF8)})}), 2, {{"sum", 2}},
                       {t, t, kF8});
    return Build(SumOfSquares(s, 2));
  };
  Program p = attention(kI4);
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
  RelP x = Scan("public.x", {"s", "f", "val"}, {kI4, kI4, kF8}, {-1, -1, 0});
  RelP w = Scan("public.w", {"f", "val"}, {kI4, kF8}, {-1, -1});
  RelP j = Join(x, w, Opaque("($1 OPERATOR(pg_catalog.=) $2)", {Col(1, kI4), Col(3, kI4)}, kBool));
  RelP s = Aggregate(Project(j, {Col(3, kI4), Col(1, kI4), Call("mul", {Col(2, kF8), Col(4, kF8)})}), 2, {{"sum", 2}},
                     {kI4, kI4, kF8});
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
    RelP x = Scan("public.x", {"s", "f", "val"}, {kI4, kI4, kF8}, {-1, -1, -1});
    RelP w = Scan("public.w", {"f", "val"}, {kI4, kF8}, {-1, 0});
    RelP j = Join(x, w, Opaque(cond, {Col(1, kI4), Col(3, kI4)}, kBool));
    std::vector<ExprP> cols;
    std::vector<Type> types;
    for (int k : keys) cols.push_back(Col(k, kI4)), types.push_back(kI4);
    cols.push_back(Call("mul", {Col(2, kF8), Col(4, kF8)}));
    types.push_back(kF8);
    int n = static_cast<int>(keys.size());
    RelP pred = Aggregate(Project(j, cols), n, {{"sum", n}}, types);
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

}  // namespace
}  // namespace ddx

namespace ddx {
namespace {

// A softmax's max is held constant (shift.h) where the loss is provably
// invariant under shifting it, and only there. The max's reverse rule shares
// ties by a window of counts (FILTER): its absence shows the max is held.
// A region pass over x JOIN z (z = sum by x.s, joined on all its keys: x is
// the only root) sums no term of x: each row of x is one row of the pass.
// With terms for z too, the pass is stored as it is and z's terms alone are
// summed, not GROUPING SETS hashing a set of as many groups as rows.
TEST(Program, TheOnlyRootsTermsAreNotSummed) {
  auto eq = [](int a, int b) { return Opaque("($1 OPERATOR(pg_catalog.=) $2)", {Col(a, kI4), Col(b, kI4)}, kBool); };
  RelP x = Scan("public.x", {"s", "f", "val"}, {kI4, kI4, kF8}, {-1, -1, 0});
  RelP z = Aggregate(Project(x, {Col(0, kI4), Call("exp", {Col(2, kF8)})}), 1, {{"sum", 1}}, {kI4, kF8});
  RelP p = Project(Join(x, z, eq(0, 3)), {Call("div", {Call("exp", {Col(2, kF8)}), Col(4, kF8)})});
  Program prog = Build(SumOfSquares(p, 0));
  EXPECT_EQ(ParseError(prog.sql), "") << prog.sql;
  EXPECT_EQ(prog.sql.find("GROUPING SETS"), std::string::npos) << prog.sql;
  EXPECT_NE(prog.sql.find("FROM m7 WHERE r0 IS NOT NULL)"), std::string::npos) << prog.sql;
  EXPECT_NE(prog.sql.find("FROM m7 WHERE r1 IS NOT NULL GROUP BY r1"), std::string::npos) << prog.sql;
}

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
