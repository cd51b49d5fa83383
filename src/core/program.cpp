// The program builder (see program.h).
//
// What is saved and what is recomputed. Only some relations are materialized
// as CTEs: aggregates (the tape stays the size of a layer's outputs), windows,
// VALUES and functions, set operations, LIMIT, scalar subqueries, the loss,
// the relations of sublinks, scans that one of those reads (they carry the
// rows' identity; other plain tables are read in place, ctid their rid), and a
// projection whose composed expressions grew too large. Every other relation
// (projection, filter, inner and left join) is row-local: it is compiled into
// a *region*, one flat FROM/WHERE over the materialized relations below it
// (its leaves) whose output columns are expressions over the leaves' columns.
// PostgreSQL runs a region as one pipelined join, never storing its rows.
//
// Backward: a materialized relation that gradient reaches gets a cotangent CTE
// b<id> (rid, d<j> per column j that carries gradient), the sum of its readers'
// contributions. A reader's reverse rule recomputes its input region, pairs
// each region row with the cotangent it owes (an aggregate: by its group keys,
// the contraction transpose of DESIGN.md: a matmul's gradient joins the
// cotangent with the other side and sums by the keys), differentiates the
// composed expressions with the rules of rules.h, and sums the products by
// each leaf's rid. Forward values are computed once per row (Lets), and a
// product's factor is differentiated at its own grain (Deferred). A window's
// reverse rule runs windows over the transposed frame (Transpose).
//
// The layout: pass.h names the pieces; graph.cpp and facts.cpp analyse,
// region.cpp compiles regions, ops/ holds one file per operator (its facts,
// forward step and reverse rule, found through ops/registry.cpp),
// accumulate.cpp sums cotangents, lets.cpp and backprop.cpp differentiate
// expressions, and this file drives them.
#include "ddx/core/program.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "pass.h"

namespace ddx {
namespace core {
namespace {

// Each materialized relation's forward step f<id>, in order.
std::vector<Step> ForwardSteps(const Pass &p) {
  std::vector<Step> ctes;
  for (const Rel *r : p.order)
    if (p.mat.count(r) && !p.direct.count(r))
      ctes.push_back({p.F(r), RuleOf(*r).forward(p, *r), {}, !p.recomputed.count(r)});
  return ctes;
}

// The steps as the WITH list prints them.
std::vector<std::string> Printed(const std::vector<Step> &steps) {
  std::vector<std::string> ctes;
  for (const Step &s : steps)
    ctes.push_back(s.name + (s.stored ? " AS MATERIALIZED (" : " AS NOT MATERIALIZED (") + s.sql + ")");
  return ctes;
}

// A backward step that only one later step reads is not stored: NOT
// MATERIALIZED, PostgreSQL plans it inside its reader, whose join consumes
// its rows as they come (the matmul's 80k cotangents of its products,
// built straight into the hash of the transposed join: program 572 -> 554
// ms). Backward steps are read in FROM lists only (sublinks read forward
// steps), so an inlined step is never run once per row of a subplan. Its
// references are counted as the code that wrote them recorded them (Refs,
// pass.h: a reader that joins it twice counts twice), never as words of the
// printed program, where a user's table or column of the same name counted
// too: the MLP's bias table public.b2 kept b2, the cotangent of w1 that
// only the gradient rows read, stored.
//
// In place on Citus, the cotangent of a recomputed step (graph.cpp) is
// recomputed by each of its readers too (`recomputed`): stored, it is a
// Citus subplan, one row per sample gathered to the coordinator and sent to
// every worker (the MLP's dL/dz: bytes that grow with the samples and all
// pass through the coordinator); recomputed, it stays on the workers, which
// share the recomputation (faster even on 2 cores that the coordinator and
// both workers share: bench/RESULTS.md, 'Which steps a program saves'). Its
// values only enter sums, as its step's do: a
// program whose recomputed values a comparison reads recomputes nothing.
//
// And in place on Citus, the cotangent of an aggregate to one row (the
// loss's: the seed through the loss's own expression) stays stored
// (`kept_rows`): one row that Citus computes once on the coordinator and sends
// with the next round's tasks, each of which would otherwise join the
// loss's saved rows again to derive it (bench/RESULTS.md, 'Which steps a
// program saves').
void Stream(std::vector<Step> &steps, size_t from, const Refs &final_reads, const std::set<std::string> &recomputed,
            const std::set<std::string> &kept_rows) {
  std::map<std::string, size_t> refs;  // per backward step, the references to it
  for (size_t i = from; i < steps.size(); i++) refs[steps[i].name] = 0;
  auto count = [&refs](const Refs &reads) {
    for (const std::string &name : reads) {
      auto it = refs.find(name);
      if (it == refs.end()) Internal("a read of no backward step: " + name);
      it->second++;
    }
  };
  for (const Step &s : steps) count(s.reads);
  count(final_reads);
  for (size_t i = from; i < steps.size(); i++) {
    const std::string &name = steps[i].name;
    if ((refs[name] == 1 && !kept_rows.count(name)) || recomputed.count(name)) steps[i].stored = false;
  }
}

Program Gradient(Pass &p) {
  const RelP &loss = p.loss;
  if (loss->cols.size() != 1 || !loss->cols[0].differentiable)
    throw Error(sqlstate::kInvalidParameterValue, "loss must be one row and one numeric column");
  std::vector<Step> ctes = ForwardSteps(p);
  std::vector<std::string> finals;
  Refs final_reads;
  size_t nforward = ctes.size();
  const Rel *L = loss.get();
  // The seed: the loss's cotangent is 1.
  if (p.active[L][0])
    p.contribs[L].push_back({"SELECT rid, 1::float8 AS d0 FROM " + p.F(L) + " WHERE c0 IS NOT NULL", {}, {0}});
  Steps steps{ctes, finals, final_reads};
  for (auto it = p.order.rbegin(); it != p.order.rend(); ++it) {
    const Rel *r = *it;
    if (!p.mat.count(r) || !p.MakeCotangent(r, ctes)) continue;
    RuleOf(*r).reverse(p, *r, steps);
  }
  finals.push_back(
      "SELECT NULL::oid AS toid, NULL::tid AS tid, -1 AS pidx, count(*)::float8 AS g, NULL::text AS key FROM " +
      p.F(L));
  // the loss's value, for ddx_value(loss): from this same pass
  finals.push_back("SELECT NULL::oid, NULL::tid, " + std::to_string(kLossValue) + ", c0::float8, NULL::text FROM " +
                   p.F(L));
  // pidx = -3: rows whose window values depend on how PostgreSQL orders
  // ties (the runner refuses the gradient when there are any).
  for (const Rel *r : p.order)
    if (r->kind == RelKind::Window && OrderSensitive(r))
      finals.push_back("SELECT NULL::oid, NULL::tid, -3, count(*)::float8, NULL::text FROM " + p.F(r) +
                       " WHERE tie > 0");
  Program prog;
  prog.forward_steps = static_cast<int>(nforward);
  prog.backward_steps = static_cast<int>(ctes.size() - nforward);
  // The rows as they come: a parameter table read in two places has two
  // rows per parameter row, which the runner sums as it reads them, in this
  // order, as the GROUP BY over every gradient row did before (a
  // HashAggregate of 100,000 rows spilled at the default work_mem and took
  // half of a trivial loss's gradient: bench/optimizer.py).
  std::string tail = "\n" + Join(finals, "\nUNION ALL\n");
  std::set<std::string> again, one_row;
  for (const Rel *r : p.recomputed) again.insert(p.B(r));
  if (p.citus_in_place)
    for (const Rel *r : p.order)
      if (r->kind == RelKind::Aggregate && r->nkeys == 0) one_row.insert(p.B(r));
  Stream(ctes, nforward, final_reads, again, one_row);
  prog.sql = "WITH " + Join(Printed(ctes), ",\n") + tail;
  return prog;
}

}  // namespace
}  // namespace core

ExprP NullSafeEquals(const ExprP &a, const ExprP &b) {
  std::string tmpl =
      a->type.sql == b->type.sql ? core::NullSafeEq("$1", "$2", a->type.sql) : "($1) IS NOT DISTINCT FROM ($2)";
  auto e = MakeOpaque("(" + tmpl + ")", {a, b}, kBool);
  std::const_pointer_cast<Expr>(e)->name = "=";
  return e;
}

namespace {

void MarkRead(const Rel *r, std::set<const Rel *> &seen, std::vector<bool> &read);

void MarkReadExpr(const ExprP &e, std::set<const Rel *> &seen, std::vector<bool> &read) {
  if (!e) return;
  if (e->sub) MarkRead(e->sub.get(), seen, read);
  MarkReadExpr(e->test, seen, read);
  MarkReadExpr(e->corr, seen, read);
  for (const auto &a : e->args) MarkReadExpr(a, seen, read);
}

void MarkRead(const Rel *r, std::set<const Rel *> &seen, std::vector<bool> &read) {
  if (!seen.insert(r).second) return;
  for (int p : r->param)
    if (p >= 0 && p < static_cast<int>(read.size())) read[p] = true;
  for (const auto &in : r->inputs) MarkRead(in.get(), seen, read);
  for (const auto &e : r->exprs) MarkReadExpr(e, seen, read);
  for (const auto &row : r->rows)
    for (const auto &e : row) MarkReadExpr(e, seen, read);
  MarkReadExpr(r->cond, seen, read);
}

}  // namespace

std::vector<bool> ParamsRead(const RelP &loss, size_t nparams) {
  std::vector<bool> read(nparams, false);
  std::set<const Rel *> seen;
  MarkRead(loss.get(), seen, read);
  return read;
}

std::vector<bool> ActiveColumns(const RelP &rel) {
  core::Pass p(rel);
  return p.active.at(rel.get());
}

Program BuildGradientProgram(const RelP &loss, CitusPlacement citus, bool contraction_node) {
  core::Pass p(loss, nullptr, citus == CitusPlacement::InPlace, contraction_node);
  return core::Gradient(p);
}

bool ReadsCitusData(const RelP &loss) {
  core::Pass p(loss);
  for (const Rel *r : p.order) {
    if (r->kind != RelKind::Scan || !r->citus) continue;
    bool param = false;
    for (int k : r->param) param = param || k >= 0;
    if (!param) return true;
  }
  return false;
}

// The tangent query is one statement, so its steps are plain CTEs: where
// one step reads another, PostgreSQL inlines it and the rows stream from one
// into the next, as in the output's own query; where several do, it
// materializes it. Each step is fenced by OFFSET 0 (a subquery with an OFFSET
// is never pulled up into its reader), because a pulled-up step would have
// its columns' expressions substituted at every use, and a tangent step reads
// each value twice (for the value and in the tangent): computed again per use,
// a GPT's chain of steps took more than twice as long (bench/RESULTS.md,
// 'Which steps a program saves', for the MLP's and the GPT's figures). hvp
// differentiates the steps themselves:
// it gets them unfenced (the fences would be projections in its IR).
std::string BuildTangentSql(const RelP &out, const std::vector<Tangent> &tangents, TangentUse use,
                            const std::string &stop_gradient_sql) {
  core::Pass p(out, &tangents);
  if (use == TangentUse::Differentiate) p.stop_gradient_sql = stop_gradient_sql;
  for (const Rel *r : p.order)
    if (r->citus)
      throw Error(sqlstate::kFeatureNotSupported,
                  "jvp and hvp do not run over Citus tables yet: the output reads " + r->table,
                  "Reverse mode (grad, vjp, the optimizers, ddx_train) does.",
                  "Take the derivative with grad or vjp, or run jvp over plain tables.");
  std::vector<std::string> ctes;
  for (const Rel *r : p.order) {
    if (!p.mat.count(r) || p.direct.count(r)) continue;
    std::string step = core::RuleOf(*r).tangent(p, *r);
    ctes.push_back(p.F(r) + " AS (" + (use == TangentUse::Run ? "SELECT * FROM (" + step + ") s OFFSET 0" : step) +
                   ")");
  }
  const std::vector<bool> &act = p.active.at(out.get());
  std::vector<std::string> cols;
  for (size_t j = 0; j < out->cols.size(); j++) cols.push_back("o." + core::C(static_cast<int>(j)));
  for (size_t j = 0; j < out->cols.size(); j++) {
    std::string c = "o." + core::C(static_cast<int>(j));
    cols.push_back("CASE WHEN " + c + " IS NULL THEN NULL ELSE " + (act[j] ? "o.t" + std::to_string(j) : "0::float8") +
                   " END AS t" + std::to_string(j));
  }
  return "WITH " + core::Join(ctes, ",\n") + "\nSELECT " + core::Join(cols, ", ") + " FROM " + p.F(out.get()) + " o";
}

std::string BuildForwardSql(const RelP &loss) {
  core::Pass p(loss);
  return "WITH " + core::Join(core::Printed(core::ForwardSteps(p)), ",\n") + "\nSELECT * FROM " + p.F(loss.get());
}

}  // namespace ddx
