// Scalar expressions (see translate.h).

// What a user wrote, for an expression node the loss cannot contain.
#include "internal.h"

#include "ddx/pg/compat.h"

namespace ddx::pg {

namespace {

std::string UnsupportedName(const Node *n) {
  switch (nodeTag(n)) {
    case T_SubscriptingRef:
      return "a subscript (x[i])";
    case T_FieldSelect:
      return "a field of a composite value ((x).f)";
    case T_FieldStore:
      return "an assignment to a field of a composite value";
    case T_RowExpr:
      return "a row constructor (ROW(...) or (a, b))";
    case T_RowCompareExpr:
      return "a row comparison ((a, b) < (c, d))";
    case T_ArrayCoerceExpr:
      return "a cast of an array";
    case T_ConvertRowtypeExpr:
      return "a cast of a row type";
    case T_CollateExpr:
      return "a COLLATE clause";
    case T_SQLValueFunction:
      return "a special value function (CURRENT_DATE, CURRENT_USER, ...)";
    case T_XmlExpr:
      return "an XML expression";
    case T_CoerceToDomain:
      return "a cast to a domain";
    case T_NextValueExpr:
      return "a sequence's next value";
    case T_GroupingFunc:
      return "GROUPING()";
    default:
      return "an expression of node type " + std::to_string(static_cast<int>(nodeTag(n)));
  }
}

}  // namespace

// What PostgreSQL's Query holds, as IR: a dispatcher (a node equal() to a
// GROUP BY key or an aggregate of the level is its column), one function
// per node family, and a refusal naming what a user wrote for anything else
// (deparse.c's shape: deparseExpr and one deparseXxx per node).
ExprP Translator::Expr(Node *n, const Ctx &c) {
  if (!n) throw Error(sqlstate::kInternalError, "ddx internal error: null expression");
  if (c.group_exprs) {
    for (size_t i = 0; i < c.group_exprs->size(); i++)
      if (equal(n, (*c.group_exprs)[i])) return MakeCol(static_cast<int>(i), c.side, ExprTypeOf(n));
    if (IsA(n, Aggref)) {
      for (size_t i = 0; i < c.aggrefs->size(); i++)
        if (equal(n, (*c.aggrefs)[i])) return AggValue((*c.agg_outs)[i], c.side);
      throw Error(sqlstate::kInternalError, "ddx internal error: aggregate not collected");
    }
  }
  switch (nodeTag(n)) {
    case T_Var:
      return VarOf(castNode(Var, n), c);
    case T_Const:
    case T_Param:
      return Value(n, c);
    case T_RelabelType:
    case T_CoerceViaIO:
    case T_CollateExpr:
      return Coerced(n, c);
    case T_FuncExpr:
      return FuncCall(castNode(FuncExpr, n), c);
    case T_OpExpr:
    case T_DistinctExpr:
    case T_NullIfExpr:
    case T_ScalarArrayOpExpr:
      return Operator(n, c);
    case T_BoolExpr:
    case T_NullTest:
    case T_BooleanTest:
      return Predicate(n, c);
    case T_CaseExpr:
    case T_CaseTestExpr:
    case T_CoalesceExpr:
    case T_MinMaxExpr:
      return Conditional(n, c);
    case T_SubLink:
    case T_ArrayExpr:
    case T_Aggref:
    case T_WindowFunc:
      return Computed(n, c);
    default:
      Refuse(UnsupportedName(n) + " is not supported in the loss", "",
             "Compute it in a query of its own (a table or a CTE outside the loss), or rewrite it with "
             "operators, functions and CASE.");
  }
}

// A column: of this level (through the column map, or a join's alias), or
// of the level a correlated subquery reads.
ExprP Translator::VarOf(Var *v, const Ctx &c) {
  if (v->varlevelsup > 0) {
    if (!c.outer) Refuse("correlated subquery in the loss", "", "Rewrite it as a join.");
    Var *copy = (Var *)PgCall([&] { return copyObjectImpl(v); });
    copy->varlevelsup--;
    return Expr((Node *)copy, *c.outer);
  }
  // (a grouping expression, behind its own Var in 18: as if written out,
  // so that the group's column is found as in 15 and 17)
  if (Node *g = c.q ? compat::GroupedExprOf(c.q, v) : nullptr) return Expr(g, c);
  if (c.group_exprs)
    Refuse("column used outside an aggregate without appearing in GROUP BY", "", "Add the column to GROUP BY.");
  if (v->varattno <= 0) Refuse("system column or whole-row reference in the loss");
  if (c.map) {
    auto it = c.map->find({static_cast<int>(v->varno), v->varattno});
    if (it != c.map->end()) return MakeCol(it->second, c.side, ExprTypeOf((Node *)v));
  }
  if (c.q && v->varno >= 1 && static_cast<int>(v->varno) <= list_length(c.q->rtable)) {
    RangeTblEntry *rte = rt_fetch(v->varno, c.q->rtable);
    if (rte->rtekind == RTE_JOIN && v->varattno <= list_length(rte->joinaliasvars))
      return Expr((Node *)list_nth(rte->joinaliasvars, v->varattno - 1), c);
  }
  throw Error(sqlstate::kInternalError, "ddx internal error: unresolved column reference");
}

// A constant; a statement parameter ($n: a value held constant, bound when
// the program runs); a sublink's parameter (its subquery's column).
ExprP Translator::Value(Node *n, const Ctx &c) {
  if (IsA(n, Const)) {
    auto e = std::make_shared<ddx::Expr>();
    e->kind = ExprKind::Const;
    e->text = ConstSql(castNode(Const, n));
    e->type = ExprTypeOf(n);
    return e;
  }
  auto *p = castNode(Param, n);
  if (p->paramkind == PARAM_SUBLINK && c.sublink_params && p->paramid >= 1 &&
      p->paramid <= static_cast<int>(c.sublink_params->size()))
    return (*c.sublink_params)[p->paramid - 1];
  if (p->paramkind == PARAM_EXTERN) {
    auto k = std::make_shared<ddx::Expr>();
    k->kind = ExprKind::Const;
    k->text = ProgramParam(p);
    k->type = ExprTypeOf(n);
    return MakeOpaque("$1", "parameter $" + std::to_string(p->paramid), {k}, k->type);
  }
  Refuse("parameter $" + std::to_string(p->paramid) + " in the loss");
}

// A cast (one between float types differentiable), or a COLLATE clause
// (also where PostgreSQL inlined a function of a collatable result).
ExprP Translator::Coerced(Node *n, const Ctx &c) {
  Type t = ExprTypeOf(n);
  if (IsA(n, RelabelType)) {
    ExprP a = Expr((Node *)castNode(RelabelType, n)->arg, c);
    if (t.differentiable) return MakeCall("cast", {a}, t);
    return MakeOpaque("CAST($1 AS " + t.sql + ")", "CAST", {a}, t);
  }
  if (IsA(n, CoerceViaIO))
    return MakeOpaque("CAST($1 AS " + t.sql + ")", "CAST", {Expr((Node *)castNode(CoerceViaIO, n)->arg, c)}, t);
  auto *ce = castNode(CollateExpr, n);
  std::string coll = Str(PgCall([&] {
    HeapTuple tp = SearchSysCache1(COLLOID, ObjectIdGetDatum(ce->collOid));
    if (!HeapTupleIsValid(tp)) elog(ERROR, "cache lookup failed for collation %u", ce->collOid);
    auto *cf = (Form_pg_collation)GETSTRUCT(tp);
    char *q = quote_qualified_identifier(get_namespace_name(cf->collnamespace), NameStr(cf->collname));
    ReleaseSysCache(tp);
    return q;
  }));
  return MakeOpaque("($1 COLLATE " + coll + ")", "COLLATE", {Expr((Node *)ce->arg, c)}, t);
}

// The expressions of a list, translated.
std::vector<ExprP> Translator::Exprs(List *l, const Ctx &c) {
  std::vector<ExprP> out;
  ListCell *lc;
  foreach (lc, l) out.push_back(Expr((Node *)lfirst(lc), c));
  return out;
}

// A function call: stop_gradient; an SQL function PostgreSQL inlines (its
// body); a built-in with a derivative rule; else an opaque call, noted
// where it is a user's.
ExprP Translator::FuncCall(FuncExpr *f, const Ctx &c) {
  Type t = ExprTypeOf((Node *)f);
  bool stop = std::find(stop_oids_.begin(), stop_oids_.end(), f->funcid) != stop_oids_.end();
  FuncInfo fi = Func(f->funcid);
  if (!stop && fi.sql && !fi.retset)
    if (ExprP body = Inlined(f->funcid, f->funcresulttype, f->funccollid, f->inputcollid, f->args, f->funcvariadic, c))
      return body;
  std::vector<ExprP> args = Exprs(f->args, c);
  if (stop) return MakeCall("stop_gradient", args, t);
  if (f->funcvariadic) Refuse("VARIADIC call of " + fi.name + " in the loss");
  if (fi.retset && !(c.map == nullptr && c.group_exprs == nullptr))
    Refuse("set-returning function " + fi.name + " in an expression of the loss");
  const char *rule = RuleOf(fi.internal);
  if (*rule && t.differentiable) return MakeCall(rule, args, t);
  std::string shown = fi.builtin ? fi.name : fi.qualified;
  if (!fi.builtin) NoteOpaque(shown + "()");
  return MakeOpaque(fi.qualified + "(" + Placeholders(args.size()) + ")", shown, args, t, fi.is_volatile);
}

// An operator (of a user's, made of an SQL function: its body), IS
// DISTINCT FROM, NULLIF, and a comparison with ANY/ALL of an array.
ExprP Translator::Operator(Node *n, const Ctx &c) {
  if (IsA(n, ScalarArrayOpExpr)) {
    auto *o = castNode(ScalarArrayOpExpr, n);
    std::vector<ExprP> args{Expr((Node *)linitial(o->args), c), Expr((Node *)lsecond(o->args), c)};
    std::string op = OperatorSql(o->opno);
    return MakeOpaque("($1 " + op + (o->useOr ? " ANY" : " ALL") + " ($2))", "ANY/ALL", args, kBool);
  }
  auto *o = (OpExpr *)n;
  PgCall([&] { set_opfuncid(o); });
  Type t = ExprTypeOf(n);
  FuncInfo fi = Func(o->opfuncid);
  if (IsA(n, OpExpr) && fi.sql)
    if (ExprP body = Inlined(o->opfuncid, o->opresulttype, o->opcollid, o->inputcollid, o->args, false, c)) return body;
  std::vector<ExprP> args = Exprs(o->args, c);
  if (IsA(n, DistinctExpr)) return MakeOpaque("($1 IS DISTINCT FROM $2)", "IS DISTINCT FROM", args, kBool);
  if (IsA(n, NullIfExpr)) return MakeOpaque("NULLIF($1, $2)", "NULLIF", args, t);
  if (!fi.builtin) NoteOpaque("operator " + OperatorSql(o->opno) + " (" + fi.qualified + "())");
  const char *rule = RuleOf(fi.internal);
  if (*rule && t.differentiable) return MakeCall(rule, args, t);
  std::string op = OperatorSql(o->opno);
  std::string tmpl = args.size() == 1 ? "(" + op + " $1)" : "($1 " + op + " $2)";
  auto e = MakeOpaque(tmpl, fi.name, args, t, fi.is_volatile);
  std::const_pointer_cast<ddx::Expr>(e)->strict = fi.strict;
  return e;
}

// AND, OR, NOT; IS [NOT] NULL; IS [NOT] TRUE, FALSE, UNKNOWN.
ExprP Translator::Predicate(Node *n, const Ctx &c) {
  if (IsA(n, BoolExpr)) {
    auto *b = castNode(BoolExpr, n);
    std::vector<ExprP> args = Exprs(b->args, c);
    if (b->boolop == NOT_EXPR) return MakeOpaque("(NOT $1)", "NOT", args, kBool);
    std::string t = "(";
    for (size_t i = 0; i < args.size(); i++)
      t += (i ? (b->boolop == AND_EXPR ? " AND $" : " OR $") : "$") + std::to_string(i + 1);
    return MakeOpaque(t + ")", b->boolop == AND_EXPR ? "AND" : "OR", args, kBool);
  }
  if (IsA(n, NullTest)) {
    auto *t = castNode(NullTest, n);
    if (t->argisrow) Refuse("IS NULL on a row in the loss");
    return MakeOpaque(t->nulltesttype == IS_NULL ? "($1 IS NULL)" : "($1 IS NOT NULL)", "IS NULL",
                      {Expr((Node *)t->arg, c)}, kBool);
  }
  auto *t = castNode(BooleanTest, n);
  static const char *kTests[] = {"IS TRUE", "IS NOT TRUE", "IS FALSE", "IS NOT FALSE", "IS UNKNOWN", "IS NOT UNKNOWN"};
  return MakeOpaque(std::string("($1 ") + kTests[t->booltesttype] + ")", "boolean test", {Expr((Node *)t->arg, c)},
                    kBool);
}

// CASE (the simple form's test value), COALESCE as a CASE, GREATEST and
// LEAST.
ExprP Translator::Conditional(Node *n, const Ctx &c) {
  if (IsA(n, CaseTestExpr)) {
    if (!c.case_test) Refuse("this CASE form is not supported in the loss");
    return c.case_test;
  }
  if (IsA(n, MinMaxExpr)) {
    auto *mm = castNode(MinMaxExpr, n);
    std::vector<ExprP> args = Exprs(mm->args, c);
    Type t = ExprTypeOf(n);
    const char *name = mm->op == IS_GREATEST ? "greatest" : "least";
    if (t.differentiable) return MakeCall(name, args, t);
    return MakeOpaque(std::string(mm->op == IS_GREATEST ? "GREATEST(" : "LEAST(") + Placeholders(args.size()) + ")",
                      name, args, t);
  }
  auto e = std::make_shared<ddx::Expr>();
  e->kind = ExprKind::Case;
  e->type = ExprTypeOf(n);
  if (IsA(n, CoalesceExpr)) {
    std::vector<ExprP> args = Exprs(castNode(CoalesceExpr, n)->args, c);
    for (size_t i = 0; i + 1 < args.size(); i++) {
      e->args.push_back(MakeOpaque("($1 IS NOT NULL)", "IS NOT NULL", {args[i]}, kBool));
      e->args.push_back(args[i]);
    }
    e->args.push_back(args.back());
    return e;
  }
  auto *ce = castNode(CaseExpr, n);
  Ctx cc = c;
  if (ce->arg) cc.case_test = Expr((Node *)ce->arg, c);
  ListCell *lc;
  foreach (lc, ce->args) {
    auto *w = lfirst_node(CaseWhen, lc);
    e->args.push_back(Expr((Node *)w->expr, cc));
    e->args.push_back(Expr((Node *)w->result, c));
  }
  e->args.push_back(ce->defresult ? Expr((Node *)ce->defresult, c) : NullOf(e->type));
  return e;
}

// What the level computed apart and this expression reads as a column: a
// scalar subquery, a window function (and an aggregate, where the dispatcher
// did not find it); EXISTS, ANY and ALL; an ARRAY[] constructor.
ExprP Translator::Computed(Node *n, const Ctx &c) {
  if (IsA(n, SubLink)) {
    auto *sl = castNode(SubLink, n);
    if (sl->subLinkType == EXPR_SUBLINK) {
      if (c.scalars) {
        auto it = c.scalars->find(sl);
        if (it != c.scalars->end()) return MakeCol(it->second, c.side, ExprTypeOf(n));
      }
      Refuse("scalar subquery in this position of the loss", "", "Move it to the target list or WHERE.");
    }
    if (sl->subLinkType == EXISTS_SUBLINK || sl->subLinkType == ANY_SUBLINK || sl->subLinkType == ALL_SUBLINK)
      return Sublink(sl, c);
    Refuse("this kind of subquery is not supported in the loss");
  }
  if (IsA(n, ArrayExpr)) {
    auto *a = castNode(ArrayExpr, n);
    if (a->multidims) Refuse("multidimensional ARRAY[] in the loss");
    std::vector<ExprP> args = Exprs(a->elements, c);
    Type t = ExprTypeOf(n);
    return MakeOpaque("CAST(ARRAY[" + Placeholders(args.size()) + "] AS " + t.sql + ")", "ARRAY", args, t);
  }
  if (IsA(n, WindowFunc) && c.windows) {
    auto it = c.windows->find(castNode(WindowFunc, n));
    if (it != c.windows->end()) return MakeCol(it->second, c.side, ExprTypeOf(n));
  }
  Refuse(std::string(IsA(n, Aggref) ? "aggregate" : "window function") + " in this position of the loss");
}

}  // namespace ddx::pg
