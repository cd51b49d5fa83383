// PlanCustomPath: the node's plan from its path, each side's expressions
// over its child's output (contraction.h).
#include "contraction.h"

extern "C" {
#include "postgres.h"

#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
}

namespace ddx::pg::contraction {

namespace {

// Var (varno, attno) of `side` -> OUTER_VAR at its position in the child's
// target list.
struct MapCtx {
  List *varnos;  // the side's relids
  List *tlist;
  bool missing;
};

Node *MapVars(Node *n, MapCtx *ctx) {
  if (!n) return nullptr;
  if (IsA(n, Var)) {
    Var *v = castNode(Var, n);
    ListCell *lc;
    foreach (lc, ctx->tlist) {
      TargetEntry *te = lfirst_node(TargetEntry, lc);
      if (IsA(te->expr, Var) && castNode(Var, te->expr)->varno == v->varno &&
          castNode(Var, te->expr)->varattno == v->varattno && list_member_int(ctx->varnos, v->varno))
        return reinterpret_cast<Node *>(makeVar(OUTER_VAR, te->resno, v->vartype, v->vartypmod, v->varcollid, 0));
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

}  // namespace

Plan *PlanContraction(PlannerInfo *root, RelOptInfo *rel, CustomPath *best, List *tlist, List *clauses,
                      List *custom_plans) {
  CustomScan *cs = makeNode(CustomScan);
  cs->scan.plan.targetlist = tlist;
  cs->scan.plan.qual = NIL;
  cs->scan.scanrelid = 0;
  cs->flags = best->flags;
  cs->methods = &ddx::pg::kContractionScanMethods;
  cs->custom_plans = custom_plans;
  List *priv = best->custom_private;
  // The scan tuple: the group keys, then the sums.
  List *scan = NIL;
  ListCell *lc;
  AttrNumber resno = 1;
  foreach (lc, static_cast<List *>(list_nth(priv, kGroupExprs)))
    scan = lappend(scan, makeTargetEntry(static_cast<Expr *>(copyObjectImpl(lfirst(lc))), resno++, nullptr, false));
  foreach (lc, static_cast<List *>(list_nth(priv, kNPriv)))
    scan = lappend(scan, makeTargetEntry(static_cast<Expr *>(copyObjectImpl(lfirst(lc))), resno++, nullptr, false));
  // (numbered: then row_number(), which setrefs.c finds here for the
  // target list's, so that it is never evaluated as a WindowFunc)
  if (intVal(list_nth(priv, kNumbered))) {
    NumberCtx nc{NIL, NIL, NIL, 0};
    (void)WindowFuncs(reinterpret_cast<Node *>(tlist), &nc);
    if (list_length(nc.wfuncs) != 1) elog(ERROR, "ddx contraction: not one row_number() to number the groups by");
    scan = lappend(scan,
                   makeTargetEntry(static_cast<Expr *>(copyObjectImpl(linitial(nc.wfuncs))), resno++, nullptr, false));
  }
  cs->custom_scan_tlist = scan;
  // Expressions of each side over its child's output.
  List *out = NIL;
  for (int i = 0; i < kNPriv; i++) {
    Node *x = static_cast<Node *>(list_nth(priv, i));
    int side = -1;
    if (i == kBuildKeys || i == kBuildFactors) side = 0;
    if (i == kProbeKeys || i == kProbeFactors) side = 1;
    if (i == kGroupExprs) side = 2;
    if (i == kKeyQuals) {
      KeyCtx kc{static_cast<List *>(list_nth(priv, kGroupExprs)), false};
      Node *m = KeyVars(static_cast<Node *>(copyObjectImpl(x)), &kc);
      if (kc.missing) elog(ERROR, "ddx contraction: a join condition reads more than the group keys");
      fix_opfuncids(m);
      out = lappend(out, m);
      continue;
    }
    if (side < 0) {
      out = lappend(out, copyObjectImpl(x));
      continue;
    }
    List *mapped = NIL;
    ListCell *le;
    int g = 0;
    foreach (le, reinterpret_cast<List *>(x)) {
      int s = side;
      if (side == 2) s = list_nth_int(static_cast<List *>(list_nth(priv, kGroupSide)), g++);
      Plan *child = static_cast<Plan *>(list_nth(custom_plans, s));
      MapCtx ctx{static_cast<List *>(list_nth(priv, s == 0 ? kBuildRels : kProbeRels)), child->targetlist, false};
      Node *m = MapVars(static_cast<Node *>(copyObjectImpl(lfirst(le))), &ctx);
      if (ctx.missing) elog(ERROR, "ddx contraction: a column is missing from a child's target list");
      fix_opfuncids(m);
      mapped = lappend(mapped, m);
    }
    out = lappend(out, mapped);
  }
  cs->custom_private = out;
  return &cs->scan.plan;
}

}  // namespace ddx::pg::contraction
