// The planner's side of `Custom Scan (ddx fill)` (fill.h): the
// set_join_pathlist_hook that finds an inner join of a subquery computed by
// the contraction node with a relation whose columns equal every group key
// of it, the node's path with its fallback and cost, and its plan.
#include <utility>
#include "fill.h"
#include "planning.h"

extern "C" {
#include "postgres.h"

#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/restrictinfo.h"
#include "optimizer/tlist.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"
}

namespace ddx::pg::contraction {

namespace {

// The node's path: the subquery's path (a Subquery Scan over the
// contraction node), the fill's, PostgreSQL's join of the two (the
// fallback), the join's clauses, and per group key of the contraction (in
// its order) the fill's column equal to it.
struct FillPath {
  CustomPath path;
  List *clauses;    // RestrictInfos: the join's but those its lookup tests, checked on each row it finds
  List *fill_vars;  // Var per group key
};

// The contraction under a subquery rel's path: a Subquery Scan whose path
// is the contraction node's (under a projection, at most).
const ContractionPlan *ContractionUnder(Path *p) {
  if (p->param_info || !IsA(p, SubqueryScanPath)) return nullptr;
  Path *sub = reinterpret_cast<SubqueryScanPath *>(p)->subpath;
  if (IsA(sub, ProjectionPath)) sub = reinterpret_cast<ProjectionPath *>(sub)->subpath;
  if (!IsA(sub, CustomPath) || reinterpret_cast<CustomPath *>(sub)->methods != &kPathMethods) return nullptr;
  return &reinterpret_cast<ContractionPath *>(sub)->plan;
}

// The group key that column `attno` of the subquery rel t is, or -1.
int GroupKeyOf(RelOptInfo *t, AttrNumber attno, const ContractionPlan *plan) {
  TargetEntry *te = get_tle_by_resno(t->subroot->processed_tlist, attno);
  if (!te || te->resjunk) return -1;
  int g = 0;
  ListCell *lc;
  foreach (lc, plan->group_keys) {
    if (equal(te->expr, lfirst(lc))) return g;
    g++;
  }
  return -1;
}

// Per group key, the fill's Var that a clause of the join equates with it,
// by the key's own equality (its function and collation, the Var of its
// type: the fill's values are looked up in the node's key tables, hashed
// and compared as the node's own keys are); nullptr where one has none.
// Those clauses into *used: a row's lookup is their test.
Var **BoundKeys(RelOptInfo *t, RelOptInfo *fill, List *restrictlist, const ContractionPlan *plan, List **used) {
  int ng = list_length(plan->group_keys);
  Var **bound = static_cast<Var **>(palloc0(sizeof(Var *) * (ng + 1)));
  ListCell *lc;
  foreach (lc, restrictlist) {
    RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
    if (!IsA(ri->clause, OpExpr) || list_length(castNode(OpExpr, ri->clause)->args) != 2) continue;
    OpExpr *op = castNode(OpExpr, ri->clause);
    Node *l = static_cast<Node *>(linitial(op->args)), *r = static_cast<Node *>(lsecond(op->args));
    if (!IsA(l, Var) || !IsA(r, Var)) continue;
    Var *tv = castNode(Var, l), *fv = castNode(Var, r);
    if (static_cast<Index>(tv->varno) != t->relid) std::swap(tv, fv);
    if (static_cast<Index>(tv->varno) != t->relid || !bms_is_member(fv->varno, fill->relids) || tv->varlevelsup ||
        fv->varlevelsup || tv->varattno <= 0 || fv->varattno <= 0)
      continue;
    int g = GroupKeyOf(t, tv->varattno, plan);
    if (g < 0 || bound[g]) continue;
    Node *key = static_cast<Node *>(list_nth(plan->group_keys, g));
    if (get_opcode(op->opno) != list_nth_oid(plan->group_eq, g) ||
        exprType(reinterpret_cast<Node *>(fv)) != exprType(key) || op->inputcollid != list_nth_oid(plan->group_coll, g))
      continue;
    bound[g] = fv;
    *used = lappend(*used, ri);
  }
  return bound;
}

// PostgreSQL's cheapest plan of the join so far, not parameterized and not
// this node's, copied: the fallback, planned beside the node and never in
// the rel (add_path frees the paths the node's displaces; the copy keeps
// the same inputs). nullptr where it is not a join of the three kinds.
Path *Fallback(RelOptInfo *joinrel) {
  Path *best = nullptr;
  ListCell *lc;
  foreach (lc, joinrel->pathlist) {
    Path *p = static_cast<Path *>(lfirst(lc));
    if (p->param_info || (IsA(p, CustomPath) && reinterpret_cast<CustomPath *>(p)->methods == &kFillPathMethods))
      continue;
    if (!best || p->total_cost < best->total_cost) best = p;
  }
  if (!best) return nullptr;
  Size size = IsA(best, HashPath)    ? sizeof(HashPath)
              : IsA(best, MergePath) ? sizeof(MergePath)
              : IsA(best, NestPath)  ? sizeof(NestPath)
                                     : 0;
  if (!size) return nullptr;
  Path *copy = static_cast<Path *>(palloc(size));
  memcpy(copy, best, size);
  return copy;
}

// The node's path where t (innerrel, the hook's call with the rels the other
// way round tries t as outerrel) is a subquery the contraction node computes
// and every group key of it is bound to a column of the fill.
void TryFill(PlannerInfo *root, RelOptInfo *joinrel, RelOptInfo *fill, RelOptInfo *t, JoinPathExtraData *extra) {
  if (t->reloptkind != RELOPT_BASEREL || t->rtekind != RTE_SUBQUERY || !t->subroot || t->baserestrictinfo ||
      t->lateral_relids || fill->lateral_relids)
    return;
  Path *tp = nullptr;
  const ContractionPlan *plan = nullptr;
  ListCell *lc;
  foreach (lc, t->pathlist) {
    if ((plan = ContractionUnder(static_cast<Path *>(lfirst(lc))))) {
      tp = static_cast<Path *>(lfirst(lc));
      break;
    }
  }
  Path *fp = fill->cheapest_total_path;
  if (!tp || !fp || fp->param_info || plan->numbered || !plan->group_keys) return;
  foreach (lc, extra->restrictlist)
    if (lfirst_node(RestrictInfo, lc)->pseudoconstant) return;
  int ng = list_length(plan->group_keys);
  List *used = NIL;
  Var **bound = BoundKeys(t, fill, extra->restrictlist, plan, &used);
  List *fill_vars = NIL;
  for (int g = 0; g < ng; g++) {
    if (!bound[g]) return;
    fill_vars = lappend(fill_vars, bound[g]);
  }
  Path *fb = Fallback(joinrel);
  if (!fb) return;
  FillPath *node = static_cast<FillPath *>(palloc0(sizeof(FillPath)));
  NodeSetTag(node, T_CustomPath);
  CustomPath *cp = &node->path;
  cp->path.pathtype = T_CustomScan;
  cp->path.parent = joinrel;
  cp->path.pathtarget = joinrel->reltarget;
  cp->path.param_info = nullptr;
  cp->path.parallel_aware = false;
  // (as the contraction node's: never partial, whole inputs in a worker)
  cp->path.parallel_safe = tp->parallel_safe && fp->parallel_safe && fb->parallel_safe;
  cp->path.parallel_workers = 0;
  cp->path.rows = joinrel->rows;
  // Its work is a part of any plan of this join's: the groups computed as
  // below t, each fill row's keys looked up (no group formed as a row, none
  // hashed), the join's clauses checked on each match. So it costs less
  // than the fallback, PostgreSQL's best, by at least a twentieth: above
  // it, add_path compares costs fuzzily.
  QualCost qc;
  cost_qual_eval(&qc, extra->restrictlist, root);
  Cost run = fp->total_cost - fp->startup_cost + cpu_operator_cost * ng * fp->rows +
             (cpu_tuple_cost + qc.per_tuple) * cp->path.rows;
  cp->path.startup_cost = tp->total_cost + fp->startup_cost + qc.startup;
  cp->path.total_cost = Min(cp->path.startup_cost + run, fb->total_cost * 0.95);
  cp->path.startup_cost = Min(cp->path.startup_cost, cp->path.total_cost);
  cp->path.pathkeys = NIL;
#ifdef CUSTOMPATH_SUPPORT_PROJECTION
  cp->flags = CUSTOMPATH_SUPPORT_PROJECTION;
#else
  cp->flags = 0;
#endif
  cp->custom_paths = list_make3(tp, fp, fb);
  cp->methods = &kFillPathMethods;
  node->clauses = list_difference_ptr(extra->restrictlist, used);
  node->fill_vars = fill_vars;
  elog(DEBUG1, "ddx fill considered: cost %.1f against %.1f", cp->path.total_cost, fb->total_cost);
  add_path(joinrel, &cp->path);
}

}  // namespace

void FillJoinPaths(PlannerInfo *root, RelOptInfo *joinrel, RelOptInfo *outerrel, RelOptInfo *innerrel,
                   JoinType jointype, JoinPathExtraData *extra) {
  if (prev_join_hook) prev_join_hook(root, joinrel, outerrel, innerrel, jointype, extra);
  if (!fill_enabled || mode == kOff || (mode == kPrograms && !in_program) || jointype != JOIN_INNER) return;
  TryFill(root, joinrel, outerrel, innerrel, extra);
}

// The plan: children t, the fill and the fallback; the scan tuple t's
// columns, then the fill's (as their plans give them); the join's clauses
// but those the lookup tests as the node's condition over it; in
// custom_private (integers): t's width, the group keys' count, each group
// key's column of the fill, each scan column's of the fallback.
Plan *PlanFill(PlannerInfo *, RelOptInfo *, CustomPath *best, List *tlist, List *, List *custom_plans) {
  const FillPath *path = reinterpret_cast<const FillPath *>(best);
  CustomScan *cs = makeNode(CustomScan);
  cs->scan.plan.targetlist = tlist;
  cs->scan.plan.qual = extract_actual_clauses(path->clauses, false);
  cs->scan.scanrelid = 0;
  cs->flags = best->flags;
  cs->methods = &kFillScanMethods;
  cs->custom_plans = custom_plans;
  Plan *tplan = static_cast<Plan *>(linitial(custom_plans)), *fplan = static_cast<Plan *>(lsecond(custom_plans));
  List *scan = NIL;
  AttrNumber resno = 1;
  Plan *both[2] = {tplan, fplan};
  for (Plan *p : both) {
    ListCell *le;
    foreach (le, p->targetlist)
      scan = lappend(scan, makeTargetEntry(static_cast<Expr *>(copyObjectImpl(lfirst_node(TargetEntry, le)->expr)),
                                           resno++, nullptr, false));
  }
  cs->custom_scan_tlist = scan;
  List *priv = list_make2_int(list_length(tplan->targetlist), list_length(path->fill_vars));
  ListCell *lc;
  foreach (lc, path->fill_vars) {
    TargetEntry *te = tlist_member(static_cast<Expr *>(lfirst(lc)), fplan->targetlist);
    if (!te) elog(ERROR, "ddx fill: a key column is missing from the fill's target list");
    priv = lappend_int(priv, te->resno);
  }
  // Per column of the scan tuple, the fallback's column that has it, or 0:
  // the fallback returns the join's columns (what is read above it), from
  // inputs that may be other splits of the join than t and the fill, and
  // none but those is read from the scan tuple where it runs.
  Plan *fallback = static_cast<Plan *>(lthird(custom_plans));
  foreach (lc, scan) {
    TargetEntry *te = tlist_member(lfirst_node(TargetEntry, lc)->expr, fallback->targetlist);
    priv = lappend_int(priv, te ? te->resno : 0);
  }
  cs->custom_private = priv;
  return &cs->scan.plan;
}

}  // namespace ddx::pg::contraction
