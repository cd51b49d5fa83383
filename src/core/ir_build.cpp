// The IR node builders (see ir_build.h).
#include "ddx/core/ir_build.h"

#include <memory>
#include <utility>

namespace ddx {

ExprP MakeCol(int col, int side, Type t) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Col;
  e->col = col;
  e->side = side;
  e->type = std::move(t);
  return e;
}

ExprP MakeConst(std::string text, Type t) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Const;
  e->type = std::move(t);
  e->text = std::move(text);
  return e;
}

ExprP NullOf(const Type &t) { return MakeConst("NULL::" + t.sql, t); }

ExprP MakeCall(std::string rule, std::vector<ExprP> args, Type t) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Call;
  e->text = std::move(rule);
  e->args = std::move(args);
  e->type = std::move(t);
  return e;
}

ExprP MakeOpaque(std::string tmpl, std::string name, std::vector<ExprP> args, Type t, bool is_volatile) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Opaque;
  e->text = std::move(tmpl);
  e->name = std::move(name);
  e->args = std::move(args);
  e->type = std::move(t);
  e->is_volatile = is_volatile;
  return e;
}

ExprP MakeOpaque(const std::string &tmpl, std::vector<ExprP> args, Type t) {
  return MakeOpaque(tmpl, tmpl, std::move(args), std::move(t));
}

ExprP MakeCase(std::vector<ExprP> args, Type t) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::Case;
  e->type = std::move(t);
  e->args = std::move(args);
  return e;
}

RelP NewRel(RelKind k) {
  auto r = std::make_shared<Rel>();
  r->kind = k;
  return r;
}

RelP MakeScan(std::string table, std::vector<std::string> names, std::vector<Type> cols, std::vector<int> param) {
  RelP s = NewRel(RelKind::Scan);
  s->table = std::move(table);
  s->names = std::move(names);
  s->cols = std::move(cols);
  s->param = std::move(param);
  return s;
}

RelP MakeProject(RelP in, std::vector<ExprP> exprs) {
  RelP p = NewRel(RelKind::Project);
  for (const auto &e : exprs) p->cols.push_back(e->type);
  p->inputs = {std::move(in)};
  p->exprs = std::move(exprs);
  return p;
}

RelP MakeFilter(RelP in, ExprP cond) {
  RelP f = NewRel(RelKind::Filter);
  f->cols = in->cols;
  f->inputs = {std::move(in)};
  f->cond = std::move(cond);
  return f;
}

RelP MakeJoin(RelP l, RelP r, JoinKind jk, ExprP cond) {
  RelP j = NewRel(RelKind::Join);
  j->cols = l->cols;
  j->cols.insert(j->cols.end(), r->cols.begin(), r->cols.end());
  j->inputs = {std::move(l), std::move(r)};
  j->join = jk;
  j->cond = std::move(cond);
  return j;
}

RelP MakeAggregate(RelP in, int nkeys, std::vector<AggCall> aggs, std::vector<Type> cols) {
  RelP a = NewRel(RelKind::Aggregate);
  a->inputs = {std::move(in)};
  a->nkeys = nkeys;
  a->aggs = std::move(aggs);
  a->cols = std::move(cols);
  return a;
}

}  // namespace ddx
