// Test helper: IR built by hand, and the small models several tests share.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ddx/core/ir.h"

namespace ddx {

inline const Type kF8{"pg_catalog.float8", true};
inline const Type kI4{"pg_catalog.int4", false};
inline const Type kBool{"pg_catalog.bool", false};

inline RelP Scan(const std::string &table, std::vector<std::string> names, std::vector<Type> types,
                 std::vector<int> param) {
  auto r = std::make_shared<Rel>();
  r->kind = RelKind::Scan;
  r->table = table;
  r->names = std::move(names);
  r->cols = std::move(types);
  r->param = std::move(param);
  return r;
}

inline ExprP Col(int c, Type t, int side = 0) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Col;
  e->col = c;
  e->side = side;
  e->type = t;
  return e;
}

inline ExprP Call(const std::string &rule, std::vector<ExprP> args, Type t = kF8) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Call;
  e->text = rule;
  e->args = std::move(args);
  e->type = t;
  return e;
}

inline ExprP Opaque(const std::string &tmpl, std::vector<ExprP> args, Type t, const std::string &name = "op") {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Opaque;
  e->text = tmpl;
  e->name = name;
  e->args = std::move(args);
  e->type = t;
  return e;
}

inline RelP Join(RelP l, RelP r, ExprP cond) {
  auto j = std::make_shared<Rel>();
  j->kind = RelKind::Join;
  j->cols = l->cols;
  j->cols.insert(j->cols.end(), r->cols.begin(), r->cols.end());
  j->inputs = {l, r};
  j->cond = cond;
  return j;
}

inline RelP Project(RelP in, std::vector<ExprP> exprs) {
  auto p = std::make_shared<Rel>();
  p->kind = RelKind::Project;
  for (auto &e : exprs) p->cols.push_back(e->type);
  p->inputs = {in};
  p->exprs = std::move(exprs);
  return p;
}

inline RelP Aggregate(RelP in, int nkeys, std::vector<AggCall> aggs, std::vector<Type> types) {
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
inline RelP XJoinW(int xparam, int wparam, std::vector<bool> x_notnull = {}) {
  RelP x = Scan("public.x", {"s", "f", "val"}, {kI4, kI4, kF8}, {-1, -1, xparam});
  x->notnull = std::move(x_notnull);
  RelP w = Scan("public.w", {"f", "val"}, {kI4, kF8}, {-1, wparam});
  return Join(x, w, Opaque("($1 = $2)", {Col(1, kI4), Col(3, kI4)}, kBool));
}

// SELECT key, sum(value) FROM in GROUP BY key
inline RelP SumBy(const RelP &in, ExprP key, ExprP value) {
  Type kt = key->type;
  return Aggregate(Project(in, {std::move(key), std::move(value)}), 1, {{"sum", 1}}, {kt, kF8});
}

// SELECT sum(c * c) FROM in
inline RelP SumOfSquares(const RelP &in, int c) {
  return Aggregate(Project(in, {Call("mul", {Col(c, kF8), Col(c, kF8)})}), 0, {{"sum", 0}}, {kF8});
}

// pred = SELECT x.s, sum(x.val * w.val) FROM x JOIN w ON x.f = w.f GROUP BY x.s
// loss = SELECT sum(pred.z * pred.z) FROM pred
inline RelP LinearLoss() {
  return SumOfSquares(SumBy(XJoinW(-1, 0), Col(0, kI4), Call("mul", {Col(2, kF8), Col(4, kF8)})), 1);
}

// Every scan a Citus table, as the translator marks one: a parameter table's
// rows keyed by its first column.
inline void MarkCitus(const RelP &r) {
  if (r->kind == RelKind::Scan) {
    r->citus = true;
    bool param = false;
    for (int k : r->param) param = param || k >= 0;
    if (param) r->identity = {r->names.at(0)};
  }
  for (auto &in : r->inputs) MarkCitus(in);
}

}  // namespace ddx
