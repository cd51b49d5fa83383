// PlanCustomPath: the CustomScan of the node's path: the scan tuple (group
// keys, aggregates, row_number()), each side's expressions over its child's
// output, the key conditions over the scan tuple, written into
// custom_private by ToPrivate (planning.h).
#include "planning.h"

#include "ddx/pg/compat.h"

extern "C" {
#include "postgres.h"

#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
}

namespace ddx::pg::contraction {

namespace {

// Var (varno, attno) of `side` -> OUTER_VAR (or `varno`) at its position in
// the child's target list.
struct MapCtx {
  Relids rels;  // the side's
  List *tlist;
  bool missing;
  bool exprs;             // whole expressions matched too (a grouping of one relation)
  int varno = OUTER_VAR;  // what the side's Vars become
  bool others = false;    // Vars of other relations left as they are (a pair term's other side)
};

Node *MapVars(Node *n, MapCtx *ctx) {
  if (!n) return nullptr;
  // (an expression the child computes itself: a grouping of one relation
  // reads the relation's path with the grouping's input target applied,
  // whose columns are the GROUP BY expressions, as setrefs.c matches them)
  if (ctx->exprs && !IsA(n, Var) && !IsA(n, Const)) {
    ListCell *lc;
    foreach (lc, ctx->tlist) {
      TargetEntry *te = lfirst_node(TargetEntry, lc);
      if (equal(te->expr, n))
        return reinterpret_cast<Node *>(
            makeVar(ctx->varno, te->resno, exprType(n), exprTypmod(n), exprCollation(n), 0));
    }
  }
  if (IsA(n, Var)) {
    Var *v = castNode(Var, n);
    // (INNER_VAR and OUTER_VAR are negative: no relation's)
    if (ctx->others && (v->varno <= 0 || !bms_is_member(v->varno, ctx->rels))) return n;
    ListCell *lc;
    foreach (lc, ctx->tlist) {
      TargetEntry *te = lfirst_node(TargetEntry, lc);
      if (IsA(te->expr, Var) && castNode(Var, te->expr)->varno == v->varno &&
          castNode(Var, te->expr)->varattno == v->varattno && bms_is_member(v->varno, ctx->rels))
        return reinterpret_cast<Node *>(makeVar(ctx->varno, te->resno, v->vartype, v->vartypmod, v->varcollid, 0));
    }
    ctx->missing = true;
    return n;
  }
  return expression_tree_mutator(n, reinterpret_cast<Node *(*)()>(MapVars), ctx);
}

// A group key expression -> INDEX_VAR at its column of the scan tuple.
struct KeyCtx {
  List *gexprs;
  bool missing;
};

Node *KeyVars(Node *n, KeyCtx *ctx) {
  if (!n) return nullptr;
  ListCell *lc;
  AttrNumber g = 1;
  foreach (lc, ctx->gexprs) {
    Node *e = static_cast<Node *>(lfirst(lc));
    if (equal(n, e))
      return reinterpret_cast<Node *>(makeVar(INDEX_VAR, g, exprType(e), exprTypmod(e), exprCollation(e), 0));
    g++;
  }
  if (IsA(n, Var)) {
    ctx->missing = true;
    return n;
  }
  return expression_tree_mutator(n, reinterpret_cast<Node *(*)()>(KeyVars), ctx);
}

// Each of `exprs` over the output of the child `child` of the side of rels.
List *OverChild(List *exprs, Relids rels, Plan *child, bool whole) {
  List *mapped = NIL;
  ListCell *lc;
  foreach (lc, exprs) {
    MapCtx ctx{rels, child->targetlist, false, whole};
    Node *m = MapVars(static_cast<Node *>(copyObjectImpl(lfirst(lc))), &ctx);
    if (ctx.missing) elog(ERROR, "ddx contraction: a column is missing from a child's target list");
    fix_opfuncids(m);
    mapped = lappend(mapped, m);
  }
  return mapped;
}

// Whether n has a Var of neither child.
bool OtherVar(Node *n, void *) {
  if (!n) return false;
  if (IsA(n, Var)) return castNode(Var, n)->varno != INNER_VAR && castNode(Var, n)->varno != OUTER_VAR;
  return expression_tree_walker(n, reinterpret_cast<bool (*)()>(OtherVar), nullptr);
}

// Each pair term (or NULL) over both children: the build side's columns as
// INNER_VAR, the probe side's as OUTER_VAR (PairTerms evaluates them so).
List *OverBoth(List *terms, const Relids rels[2], Plan *const children[2]) {
  List *mapped = NIL;
  ListCell *lc;
  foreach (lc, terms) {
    Node *m = static_cast<Node *>(copyObjectImpl(lfirst(lc)));
    if (m) {
      MapCtx bc{rels[kBuild], children[kBuild]->targetlist, false, false, INNER_VAR, true};
      m = MapVars(m, &bc);
      MapCtx pc{rels[kProbe], children[kProbe]->targetlist, false, false, OUTER_VAR, true};
      m = MapVars(m, &pc);
      if (bc.missing || pc.missing || OtherVar(m, nullptr))
        elog(ERROR, "ddx contraction: a column is missing from a child's target list");
      fix_opfuncids(m);
    }
    mapped = lappend(mapped, m);
  }
  return mapped;
}

}  // namespace

Plan *PlanContraction(PlannerInfo *root, RelOptInfo *rel, CustomPath *best, List *tlist, List *clauses,
                      List *custom_plans) {
  const ContractionPlan *path = &reinterpret_cast<ContractionPath *>(best)->plan;
  CustomScan *cs = makeNode(CustomScan);
  cs->scan.plan.targetlist = tlist;
  cs->scan.plan.qual = NIL;
  cs->scan.scanrelid = 0;
  cs->flags = best->flags;
  cs->methods = &kScanMethods;
  cs->custom_plans = custom_plans;
  // The scan tuple: the group keys, then the sums.
  List *scan = NIL;
  ListCell *lc;
  AttrNumber resno = 1;
  foreach (lc, path->group_keys)
    scan = lappend(scan, makeTargetEntry(static_cast<Expr *>(copyObjectImpl(lfirst(lc))), resno++, nullptr, false));
  foreach (lc, path->aggrefs)
    scan = lappend(scan, makeTargetEntry(static_cast<Expr *>(copyObjectImpl(lfirst(lc))), resno++, nullptr, false));
  // (grouping sets: then the GROUPING() calls, whose values the node gives
  // by set; the scan tuple is never evaluated, only matched by setrefs.c)
  foreach (lc, path->grouping_funcs)
    scan = lappend(scan, makeTargetEntry(static_cast<Expr *>(copyObjectImpl(lfirst(lc))), resno++, nullptr, false));
  // (numbered: then row_number(), which setrefs.c finds here for the
  // target list's, so that it is never evaluated: NumberedTargets)
  if (path->numbered) {
    Expr *number;
    cs->scan.plan.targetlist = NumberedTargets(tlist, &number);
    scan = lappend(scan, makeTargetEntry(number, resno++, nullptr, false));
  }
  cs->custom_scan_tlist = scan;
  // Expressions of each side over its child's output; the join's other
  // conditions over the scan tuple's keys.
  ContractionPlan plan = *path;
  // (a grouping of one relation: no join key, no build-side relation)
  bool one = path->join_keys[kBuild] == NIL && bms_is_empty(path->rels[kBuild]);
  Plan *children[2] = {static_cast<Plan *>(linitial(custom_plans)), static_cast<Plan *>(lsecond(custom_plans))};
  for (int side = 0; side < 2; side++) {
    plan.join_keys[side] = OverChild(path->join_keys[side], path->rels[side], children[side], one);
    plan.factors[side] = OverChild(path->factors[side], path->rels[side], children[side], one);
  }
  plan.pair_terms = OverBoth(path->pair_terms, path->rels, children);
  plan.group_keys = NIL;
  ListCell *ls;
  forboth(lc, path->group_keys, ls, path->group_side) {
    int side = lfirst_int(ls);
    Node *key = compat::BelowGrouping(root, static_cast<Node *>(copyObjectImpl(lfirst(lc))));
    plan.group_keys = list_concat(plan.group_keys, OverChild(list_make1(key), path->rels[side], children[side], one));
  }
  KeyCtx kc{path->group_keys, false};
  plan.key_quals = reinterpret_cast<List *>(KeyVars(static_cast<Node *>(copyObjectImpl(path->key_quals)), &kc));
  if (kc.missing) elog(ERROR, "ddx contraction: a join condition reads more than the group keys");
  fix_opfuncids(reinterpret_cast<Node *>(plan.key_quals));
  cs->custom_private = ToPrivate(&plan);
  return &cs->scan.plan;
}

}  // namespace ddx::pg::contraction
