// A Query level: its FROM, WHERE, GROUP BY and aggregates, HAVING, windows,
// target list, DISTINCT, LIMIT and set operations; sublinks (see translate.h).
#include "internal.h"

namespace ddx::pg {

RelP Translator::SetOp(Query *q, Node *n, const Scope *scope) {
  if (IsA(n, RangeTblRef)) {
    RangeTblEntry *rte = rt_fetch(castNode(RangeTblRef, n)->rtindex, q->rtable);
    return TranslateQuery(rte->subquery, scope);
  }
  auto *so = castNode(SetOperationStmt, n);
  if (so->op != SETOP_UNION) Refuse("INTERSECT or EXCEPT in the loss", "Only UNION and UNION ALL have a reverse rule.");
  RelP u = NewRel(RelKind::UnionAll);
  u->inputs = {SetOp(q, so->larg, scope), SetOp(q, so->rarg, scope)};
  ListCell *lt, *lm;
  forboth(lt, so->colTypes, lm, so->colTypmods) u->cols.push_back(MakeType(lfirst_oid(lt), lfirst_int(lm)));
  if (so->all) return u;
  RelP d = NewRel(RelKind::Aggregate);
  d->cols = u->cols;
  d->inputs = {u};
  d->nkeys = static_cast<int>(u->cols.size());
  d->distinct = true;
  return d;
}

RelP Translator::TranslateQuery(Query *q, const Scope *parent) {
  CheckQuery(q);
  Scope scope{q, parent};
  RelP rel;
  std::vector<ExprP> outputs;
  std::vector<TargetEntry *> tlist;
  ListCell *lc;
  foreach (lc, q->targetList) tlist.push_back(lfirst_node(TargetEntry, lc));

  if (q->setOperations) {
    rel = SetOp(q, q->setOperations, &scope);
    if (tlist.size() != rel->cols.size()) Refuse("set operation with extra target entries in the loss");
  } else {
    ColMap map;
    rel = FromList(q, q->jointree->fromlist, nullptr, &scope, map);
    std::vector<SubLink *> links;
    CollectScalarSublinks(q->jointree->quals, &links);
    for (TargetEntry *te : tlist) CollectScalarSublinks((Node *)te->expr, &links);
    CollectScalarSublinks(q->havingQual, &links);
    std::map<const SubLink *, int> pre;
    rel = JoinScalars(rel, links, &scope, pre);
    Ctx c;
    c.map = &map;
    c.q = q;
    c.scope = &scope;
    c.scalars = &pre;
    if (q->jointree->quals) rel = MakeFilter(rel, Expr(q->jointree->quals, c));
    if (q->hasAggs || q->groupClause || q->havingQual) {
      rel = Grouped(q, rel, c, &scope, links, tlist);
    } else {
      std::map<const WindowFunc *, int> windows;
      if (q->hasWindowFuncs) rel = JoinWindows(q, rel, c, windows);
      Ctx wc = c;
      wc.windows = &windows;
      for (TargetEntry *te : tlist) outputs.push_back(Expr((Node *)te->expr, wc));
      rel = MakeProject(rel, outputs);
    }
  }

  if (q->distinctClause) {
    RelP d = NewRel(RelKind::Aggregate);
    d->cols = rel->cols;
    d->inputs = {rel};
    d->nkeys = static_cast<int>(rel->cols.size());
    d->distinct = true;
    rel = d;
  }
  if ((q->limitCount || q->limitOffset) && !IdentityOffset(q)) rel = Limited(q, rel);
  // Drop junk columns (ORDER BY / GROUP BY helpers): they sit at the end.
  size_t visible = 0;
  for (TargetEntry *te : tlist)
    if (!te->resjunk) visible++;
  if (visible < rel->cols.size()) {
    std::vector<ExprP> keep;
    for (size_t i = 0; i < visible; i++) keep.push_back(MakeCol(static_cast<int>(i), 0, rel->cols[i]));
    rel = MakeProject(rel, keep);
  }
  return rel;
}

// A grouped level's rows: its aggregation (Aggregate), its scalar
// subqueries joined to the groups, HAVING, windows over the groups (after
// HAVING), and its target list.
RelP Translator::Grouped(Query *q, RelP rel, const Ctx &c, const Scope *scope, const std::vector<SubLink *> &links,
                         const std::vector<TargetEntry *> &tlist) {
  std::vector<Node *> groups, aggrefs;
  ListCell *lc;
  foreach (lc, q->groupClause)
    groups.push_back((Node *)get_sortgroupclause_expr(lfirst_node(SortGroupClause, lc), q->targetList));
  for (TargetEntry *te : tlist) CollectAggrefs((Node *)te->expr, &aggrefs);
  CollectAggrefs(q->havingQual, &aggrefs);
  std::vector<AggOut> outs;
  RelP agg = Aggregate(rel, groups, aggrefs, c, outs);
  std::map<const SubLink *, int> post;
  rel = JoinScalars(agg, links, scope, post);
  Ctx pc;
  pc.q = q;
  pc.scope = scope;
  pc.group_exprs = &groups;
  pc.aggrefs = &aggrefs;
  pc.agg_outs = &outs;
  pc.scalars = &post;
  if (q->havingQual) rel = MakeFilter(rel, Expr(q->havingQual, pc));
  std::map<const WindowFunc *, int> windows;
  if (q->hasWindowFuncs) rel = JoinWindows(q, rel, pc, windows);
  pc.windows = &windows;
  std::vector<ExprP> outputs;
  for (TargetEntry *te : tlist) outputs.push_back(Expr((Node *)te->expr, pc));
  return MakeProject(rel, outputs);
}

// ORDER BY ... LIMIT ... OFFSET ... over a level's rows: each bound a
// constant or a statement parameter (bound when the program runs).
RelP Translator::Limited(Query *q, RelP rel) {
  RelP l = NewRel(RelKind::Limit);
  l->cols = rel->cols;
  l->inputs = {rel};
  auto bound = [&](Node *n) -> std::string {
    if (!n) return "";
    if (!IsA(n, Const)) n = PgCall([&] { return eval_const_expressions(nullptr, n); });
    if (IsA(n, Param) && castNode(Param, n)->paramkind == PARAM_EXTERN) return ProgramParam(castNode(Param, n));
    if (IsA(n, FuncExpr) && castNode(FuncExpr, n)->funcformat == COERCE_IMPLICIT_CAST &&
        list_length(castNode(FuncExpr, n)->args) == 1) {  // LIMIT $1 of an int4 parameter: int8($1)
      Node *a = (Node *)linitial(castNode(FuncExpr, n)->args);
      if (IsA(a, Param) && castNode(Param, a)->paramkind == PARAM_EXTERN)
        return "CAST(" + ProgramParam(castNode(Param, a)) + " AS " + TypeSql(exprType(n), exprTypmod(n)) + ")";
    }
    if (!IsA(n, Const)) Refuse("LIMIT or OFFSET that is not a constant or a parameter in the loss");
    auto *k = castNode(Const, n);
    return k->constisnull ? "" : ConstSql(k);
  };
  l->limit = bound(q->limitCount);
  l->offset = bound(q->limitOffset);
  ListCell *lc;
  foreach (lc, q->sortClause) {
    auto *sgc = lfirst_node(SortGroupClause, lc);
    l->order.push_back(TranslateSortKey(sgc, get_sortgroupclause_tle(sgc, q->targetList)->resno - 1));
  }
  return l;
}

ExprP Translator::Sublink(SubLink *sl, const Ctx &c) {
  if (c.side != 0) Refuse("nested subquery inside a correlated subquery of the loss");
  auto *sq = castNode(Query, sl->subselect);
  CheckQuery(sq);
  auto e = std::make_shared<ddx::Expr>();
  e->kind = ExprKind::Sublink;
  e->type = kBool;
  e->sublink = sl->subLinkType == EXISTS_SUBLINK ? SublinkKind::Exists
               : sl->subLinkType == ANY_SUBLINK  ? SublinkKind::Any
                                                 : SublinkKind::All;
  Scope scope{sq, c.scope};
  std::vector<ExprP> params;
  bool simple = !sq->hasAggs && !sq->groupClause && !sq->havingQual && !sq->setOperations && !sq->limitCount &&
                !sq->limitOffset && !sq->distinctClause && !sq->hasSubLinks;
  if (simple) {
    ColMap smap;
    RelP srel = FromList(sq, sq->jointree->fromlist, nullptr, &scope, smap);
    Ctx sc;
    sc.map = &smap;
    sc.q = sq;
    sc.side = 1;
    sc.outer = &c;
    sc.scope = &scope;
    std::vector<ExprP> local, corr;
    List *conj = make_ands_implicit((::Expr *)sq->jointree->quals);
    ListCell *lc;
    foreach (lc, conj) {
      Node *qual = (Node *)lfirst(lc);
      bool correlated = PgCall([&] { return contain_vars_of_level(qual, 1); });
      if (correlated) {
        corr.push_back(Expr(qual, sc));
      } else {
        Ctx lcx;
        lcx.map = &smap;
        lcx.q = sq;
        lcx.scope = &scope;
        local.push_back(Expr(qual, lcx));
      }
    }
    if (!local.empty()) srel = MakeFilter(srel, AndAll(local));
    e->sub = srel;
    e->corr = AndAll(corr);
    foreach (lc, sq->targetList) {
      auto *te = lfirst_node(TargetEntry, lc);
      if (!te->resjunk) params.push_back(Expr((Node *)te->expr, sc));
    }
  } else {
    bool correlated = PgCall([&] { return contain_vars_of_level((Node *)sq, 1); });
    if (correlated)
      Refuse("correlated subquery with aggregation or set operations in the loss", "",
             "Join with a CTE that computes the subquery for every key.");
    e->sub = TranslateQuery(sq, c.scope);
    for (size_t i = 0; i < e->sub->cols.size(); i++) params.push_back(MakeCol(static_cast<int>(i), 1, e->sub->cols[i]));
  }
  if (sl->subLinkType != EXISTS_SUBLINK) {
    Ctx tc = c;
    tc.sublink_params = &params;
    e->test = Expr(sl->testexpr, tc);
  }
  return e;
}

}  // namespace ddx::pg
