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
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
}

namespace ddx::pg::contraction {

namespace {

// What t computes: the groups of one contraction node (through its
// Subquery Scan), or the sum of several nodes' groups (t a HashAggregate of
// sum(float8) over an Append of them: a program's summed transposes,
// SumTransposes). t's keys: the node's group keys, or t's GROUP BY's; per
// arm (a node), per group key of it in its order, the key of t it is.
struct Target {
  int nkeys = 0;
  bool sum = false;
  int *key_of_att = nullptr;                            // per column of t (attno): its key, or -1
  Oid *eq = nullptr, *type = nullptr, *coll = nullptr;  // per key
  List *arm_keys = NIL;                                 // per arm: IntList
};

// The node's path: the subquery's path, the fill's, PostgreSQL's join of
// the two (the fallback), the join's clauses, and per key of t (in its
// order) the fill's column equal to it.
struct FillPath {
  CustomPath path;
  List *clauses;    // RestrictInfos: the join's but those its lookup tests, checked on each row it finds
  List *fill_vars;  // Var per key of t
  List *null_safe;  // IntList per key of t: 1 where NULL finds the NULL group (NullSafeVar)
  List *arm_keys;   // (Target)
  bool sum;
};

// The group key of `plan` that column `attno` of the subquery rel `rel` (t,
// or an arm of a sum) is, or -1.
int GroupKeyOf(RelOptInfo *rel, AttrNumber attno, const ContractionPlan *plan) {
  TargetEntry *te = get_tle_by_resno(rel->subroot->processed_tlist, attno);
  if (!te || te->resjunk) return -1;
  int g = 0;
  ListCell *lc;
  foreach (lc, plan->group_keys) {
    if (equal(te->expr, lfirst(lc))) return g;
    g++;
  }
  return -1;
}

void AllocKeys(Target *tg, RelOptInfo *t, int nkeys) {
  int natts = list_length(t->subroot->processed_tlist);
  tg->nkeys = nkeys;
  tg->key_of_att = static_cast<int *>(palloc(sizeof(int) * (natts + 1)));
  for (int a = 0; a <= natts; a++) tg->key_of_att[a] = -1;
  tg->eq = static_cast<Oid *>(palloc0(sizeof(Oid) * (nkeys + 1)));
  tg->type = static_cast<Oid *>(palloc0(sizeof(Oid) * (nkeys + 1)));
  tg->coll = static_cast<Oid *>(palloc0(sizeof(Oid) * (nkeys + 1)));
}

// t's path is a Subquery Scan of the contraction node: its keys are the
// node's group keys.
bool OneNode(Path *p, RelOptInfo *t, Target *tg) {
  const ContractionPlan *plan = ContractionUnder(p);
  if (!plan || plan->numbered || !plan->group_keys) return false;
  int ng = list_length(plan->group_keys);
  AllocKeys(tg, t, ng);
  List *ids = NIL;
  for (int g = 0; g < ng; g++) {
    Node *key = static_cast<Node *>(list_nth(plan->group_keys, g));
    tg->eq[g] = list_nth_oid(plan->group_eq, g);
    tg->type[g] = exprType(key);
    tg->coll[g] = list_nth_oid(plan->group_coll, g);
    ids = lappend_int(ids, g);
  }
  int natts = list_length(t->subroot->processed_tlist);
  for (AttrNumber a = 1; a <= natts; a++) tg->key_of_att[a] = GroupKeyOf(t, a, plan);
  tg->arm_keys = list_make1(ids);
  return true;
}

// t's path is a Subquery Scan of a HashAggregate whose input is an Append
// of contraction nodes (each through its Subquery Scan), t's query
//   SELECT u.g0, ..., sum(u.d) ... FROM (arm UNION ALL arm ...) u GROUP BY u.g0, ...
// with nothing but its grouping columns and sums of float8 columns of u,
// and each arm's node grouping by the arm's columns that t groups by, by
// the same equality: the sum's groups are the arms' groups, summed.
bool SummedNodes(Path *p, RelOptInfo *t, Target *tg) {
  if (p->param_info || !IsA(p, SubqueryScanPath)) return false;
  Path *sub = reinterpret_cast<SubqueryScanPath *>(p)->subpath;
  if (IsA(sub, ProjectionPath)) sub = reinterpret_cast<ProjectionPath *>(sub)->subpath;
  if (!IsA(sub, AggPath)) return false;
  AggPath *agg = reinterpret_cast<AggPath *>(sub);
  // (the Append under a projection where its columns are the aggregate's
  // input in another order: one it computes itself, as the plan shows; the
  // executor checks the plan's shape, FindSum)
  Path *in = agg->subpath;
  if (IsA(in, ProjectionPath)) in = reinterpret_cast<ProjectionPath *>(in)->subpath;
  if (agg->aggstrategy != AGG_HASHED || agg->aggsplit != AGGSPLIT_SIMPLE || agg->qual || !IsA(in, AppendPath))
    return false;
  AppendPath *app = reinterpret_cast<AppendPath *>(in);
  if (app->path.parallel_aware || app->first_partial_path < list_length(app->subpaths) ||
      list_length(app->subpaths) < 2)
    return false;
  PlannerInfo *sroot = t->subroot;
  Query *q = sroot->parse;
  if (!q->groupClause || q->groupingSets || q->havingQual || q->hasWindowFuncs || q->distinctClause || q->sortClause ||
      q->limitCount || q->limitOffset || q->hasTargetSRFs || !sroot->append_rel_array)
    return false;
  int nkeys = list_length(q->groupClause);
  AllocKeys(tg, t, nkeys);
  tg->sum = true;
  // t's columns: each a grouping column (a Var of u) or a sum(float8) of one
  Index u = 0;
  AttrNumber *ucol = static_cast<AttrNumber *>(palloc0(sizeof(AttrNumber) * (nkeys + 1)));  // per key: u's column
  ListCell *lc;
  foreach (lc, sroot->processed_tlist) {
    TargetEntry *te = lfirst_node(TargetEntry, lc);
    Node *e = reinterpret_cast<Node *>(te->expr);
    if (te->ressortgroupref) {
      int k = 0;
      ListCell *gc;
      SortGroupClause *found = nullptr;
      foreach (gc, q->groupClause) {
        if (lfirst_node(SortGroupClause, gc)->tleSortGroupRef == te->ressortgroupref) {
          found = lfirst_node(SortGroupClause, gc);
          break;
        }
        k++;
      }
      if (!found || !IsA(e, Var) || te->resjunk) return false;
      Var *v = castNode(Var, e);
      if (v->varlevelsup || v->varattno <= 0 || (u && v->varno != static_cast<int>(u)) || ucol[k]) return false;
      u = v->varno;
      ucol[k] = v->varattno;
      tg->key_of_att[te->resno] = k;
      tg->eq[k] = get_opcode(found->eqop);
      tg->type[k] = v->vartype;
      tg->coll[k] = v->varcollid;
      continue;
    }
    if (te->resjunk || !IsA(e, Aggref)) return false;
    Aggref *a = castNode(Aggref, e);
    if (a->aggfnoid != F_SUM_FLOAT8 || a->aggfilter || a->aggdistinct || a->aggorder || a->aggstar ||
        list_length(a->args) != 1 || !IsA(linitial_node(TargetEntry, a->args)->expr, Var))
      return false;
  }
  for (int k = 0; k < nkeys; k++)
    if (!ucol[k]) return false;
  // each arm: its node groups by exactly t's keys, through the arm's columns
  foreach (lc, app->subpaths) {
    Path *arm = static_cast<Path *>(lfirst(lc));
    const ContractionPlan *plan = ContractionUnder(arm);
    RelOptInfo *rel = arm->parent;
    if (!plan || plan->numbered || list_length(plan->group_keys) != nkeys ||
        rel->reloptkind != RELOPT_OTHER_MEMBER_REL || rel->rtekind != RTE_SUBQUERY || !rel->subroot ||
        rel->relid >= static_cast<Index>(sroot->simple_rel_array_size))
      return false;
    AppendRelInfo *ai = sroot->append_rel_array[rel->relid];
    if (!ai || ai->parent_relid != u) return false;
    int *gk = static_cast<int *>(palloc(sizeof(int) * nkeys));
    for (int g = 0; g < nkeys; g++) gk[g] = -1;
    for (int k = 0; k < nkeys; k++) {
      if (ucol[k] > list_length(ai->translated_vars)) return false;
      Node *tv = static_cast<Node *>(list_nth(ai->translated_vars, ucol[k] - 1));
      if (!tv || !IsA(tv, Var) || static_cast<Index>(castNode(Var, tv)->varno) != rel->relid) return false;
      int g = GroupKeyOf(rel, castNode(Var, tv)->varattno, plan);
      if (g < 0 || gk[g] >= 0 || list_nth_oid(plan->group_eq, g) != tg->eq[k] ||
          list_nth_oid(plan->group_coll, g) != tg->coll[k])
        return false;
      gk[g] = k;
    }
    List *ids = NIL;
    for (int g = 0; g < nkeys; g++) ids = lappend_int(ids, gk[g]);
    tg->arm_keys = lappend(tg->arm_keys, ids);
  }
  return true;
}

// The integer column v of `COALESCE(CAST(v AS int8), c)`, c a bigint that
// no int2 or int4 value equals: ddx's programs join a key that may be NULL
// so (NullSafeKey, src/core/keys_sql.cpp), one hashable equality that holds
// for two NULLs. With *eq the key's own equality (int4eq, int2eq): for two
// such expressions, int8eq holds exactly where v's equality does or both
// are NULL. nullptr for any other expression.
Var *NullSafeVar(Node *n, Oid *eq) {
  if (!n || !IsA(n, CoalesceExpr) || list_length(castNode(CoalesceExpr, n)->args) != 2) return nullptr;
  List *args = castNode(CoalesceExpr, n)->args;
  Node *cast = static_cast<Node *>(linitial(args)), *c = static_cast<Node *>(lsecond(args));
  if (!IsA(cast, FuncExpr) || list_length(castNode(FuncExpr, cast)->args) != 1 || !IsA(c, Const)) return nullptr;
  Oid fn = castNode(FuncExpr, cast)->funcid;
  Node *v = static_cast<Node *>(linitial(castNode(FuncExpr, cast)->args));
  Const *k = castNode(Const, c);
  if (!IsA(v, Var) || k->consttype != INT8OID || k->constisnull) return nullptr;
  int64 value = DatumGetInt64(k->constvalue);
  if (value >= PG_INT32_MIN && value <= PG_INT32_MAX) return nullptr;
  Oid type = exprType(v);
  if (fn == F_INT8_INT4 && type == INT4OID)
    *eq = F_INT4EQ;
  else if (fn == F_INT8_INT2 && type == INT2OID)
    *eq = F_INT2EQ;
  else
    return nullptr;
  return castNode(Var, v);
}

// Per key of t, the fill's Var that a clause of the join equates with it,
// by the key's own equality (its function and collation, the Var of its
// type: the fill's values are looked up in the node's key tables, hashed
// and compared as the node's own keys are), or NULL-safely by ddx's
// programs' integer form (NullSafeVar: *null_safe[k], a NULL then finds the
// NULL group, as it joins it); nullptr where one has none. Those clauses
// into *used: a row's lookup is their test.
Var **BoundKeys(RelOptInfo *t, RelOptInfo *fill, List *restrictlist, const Target &tg, List **used, bool **null_safe) {
  Var **bound = static_cast<Var **>(palloc0(sizeof(Var *) * (tg.nkeys + 1)));
  *null_safe = static_cast<bool *>(palloc0(tg.nkeys + 1));
  int natts = list_length(t->subroot->processed_tlist);
  ListCell *lc;
  foreach (lc, restrictlist) {
    RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
    if (!IsA(ri->clause, OpExpr) || list_length(castNode(OpExpr, ri->clause)->args) != 2) continue;
    OpExpr *op = castNode(OpExpr, ri->clause);
    Node *l = static_cast<Node *>(linitial(op->args)), *r = static_cast<Node *>(lsecond(op->args));
    Oid eq = get_opcode(op->opno), leq = InvalidOid, req = InvalidOid;
    bool safe = false;
    if (!IsA(l, Var) || !IsA(r, Var)) {
      // (both sides NULL-safe integer keys of one type, by int8eq)
      Var *lv = NullSafeVar(l, &leq), *rv = NullSafeVar(r, &req);
      if (!lv || !rv || leq != req || eq != F_INT8EQ) continue;
      l = reinterpret_cast<Node *>(lv);
      r = reinterpret_cast<Node *>(rv);
      eq = leq;
      safe = true;
    }
    Var *tv = castNode(Var, l), *fv = castNode(Var, r);
    if (static_cast<Index>(tv->varno) != t->relid) std::swap(tv, fv);
    if (static_cast<Index>(tv->varno) != t->relid || !bms_is_member(fv->varno, fill->relids) || tv->varlevelsup ||
        fv->varlevelsup || tv->varattno <= 0 || fv->varattno <= 0 || tv->varattno > natts)
      continue;
    int k = tg.key_of_att[tv->varattno];
    if (k < 0 || bound[k]) continue;
    // (int4eq and int2eq ignore collation: the NULL-safe form's int8eq has none)
    if (eq != tg.eq[k] || exprType(reinterpret_cast<Node *>(fv)) != tg.type[k] ||
        exprType(reinterpret_cast<Node *>(tv)) != tg.type[k] || (!safe && op->inputcollid != tg.coll[k]))
      continue;
    bound[k] = fv;
    (*null_safe)[k] = safe;
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
// way round tries t as outerrel) is a subquery the contraction node computes,
// or a sum of such nodes' groups, and every key of it is bound to a column
// of the fill.
void TryFill(PlannerInfo *root, RelOptInfo *joinrel, RelOptInfo *fill, RelOptInfo *t, JoinPathExtraData *extra) {
  if (t->reloptkind != RELOPT_BASEREL || t->rtekind != RTE_SUBQUERY || !t->subroot || t->baserestrictinfo ||
      t->lateral_relids || fill->lateral_relids)
    return;
  Path *tp = nullptr;
  Target tg;
  ListCell *lc;
  foreach (lc, t->pathlist) {
    Path *p = static_cast<Path *>(lfirst(lc));
    tg = Target();
    if (OneNode(p, t, &tg) || SummedNodes(p, t, &tg)) {
      tp = p;
      break;
    }
  }
  Path *fp = fill->cheapest_total_path;
  if (!tp || !fp || fp->param_info) return;
  foreach (lc, extra->restrictlist)
    if (lfirst_node(RestrictInfo, lc)->pseudoconstant) return;
  List *used = NIL;
  bool *null_safe;
  Var **bound = BoundKeys(t, fill, extra->restrictlist, tg, &used, &null_safe);
  List *fill_vars = NIL, *safe = NIL;
  for (int k = 0; k < tg.nkeys; k++) {
    if (!bound[k]) return;
    fill_vars = lappend(fill_vars, bound[k]);
    safe = lappend_int(safe, null_safe[k] ? 1 : 0);
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
  Cost run = fp->total_cost - fp->startup_cost + cpu_operator_cost * tg.nkeys * list_length(tg.arm_keys) * fp->rows +
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
  node->null_safe = safe;
  node->arm_keys = tg.arm_keys;
  node->sum = tg.sum;
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
// custom_private (integers): t's width, its keys' count, each key's column
// of the fill, each key's 1 where it is NULL-safe (else 0), 1 where t is a
// sum (else 0), the arms' count, per arm per
// group key of its node the key of t it is, each scan column's of the
// fallback.
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
  priv = list_concat(priv, path->null_safe);
  // whether t is a sum; its arms, each with the key of t of each group key
  priv = lappend_int(priv, path->sum ? 1 : 0);
  priv = lappend_int(priv, list_length(path->arm_keys));
  foreach (lc, path->arm_keys) priv = list_concat(priv, static_cast<List *>(lfirst(lc)));
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
