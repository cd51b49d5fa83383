// The planner hook (create_upper_paths_hook): for a grouping of a join, the
// splits of the join into two sides, the first whose plan the shape checks
// accept, its build side, its fallback and its cost, and the node's path;
// the reasons where there is none, for EXPLAIN; and NumberGroups over the
// window stage (planning.h).
#include <utility>
#include "number.h"
#include "planning.h"

#include "ddx/pg/compat.h"

extern "C" {
#include "postgres.h"

#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/prep.h"
#include "optimizer/tlist.h"
#include "utils/fmgroids.h"
}

namespace ddx::pg::contraction {

namespace {

// The two sides of the join, and the clauses that join them. First the
// outer and inner relations of the input rel's join paths, inner, whose
// inputs are not parameterized (a nested loop over an inner index scan
// enforces the join clause in the index scan, not in its restriction list),
// cheapest first, with that path's restriction list: a join of two base
// relations has one such split, and all its unparameterized paths carry the
// same list. A join of more relations (a subquery without a fence pulled up
// into the join, as ddx's programs run on Citus in place have them) has one
// per join order the planner kept, and add_path keeps few: where the others
// were fuzzily as costly (a program's cross join with its scalar cotangent,
// a nested loop priced with disable_cost), the order with each factor on
// one side may be gone; and where an index made a nested loop the cheapest,
// the join of two may have no unparameterized path left. So then, where
// every join of the query is inner and none lateral (any split is then a
// legal inner join), every split into two relations the planner built
// (base relations, or joins in join_rel_list), with the clauses
// build_joinrel_restrictlist (relnode.c, PostgreSQL 15) would give their
// join. Each side's cheapest path becomes a child of the node, itself a
// join where the side is one.
struct Split {
  RelOptInfo *rels[2];
  List *clauses;
};

// build_joinrel_restrictlist's clauses of joining a and b into joinrel.
List *SplitClauses(PlannerInfo *root, RelOptInfo *joinrel, RelOptInfo *a, RelOptInfo *b) {
  List *out = NIL;
  RelOptInfo *both[2] = {a, b};
  for (RelOptInfo *r : both) {
    ListCell *lc;
    foreach (lc, r->joininfo) {
      RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
      if (bms_is_subset(ri->required_relids, joinrel->relids)) out = list_append_unique_ptr(out, ri);
    }
  }
  return list_concat(out, compat::JoinImpliedEqualities(root, joinrel->relids, a->relids, b));
}

bool SameSplit(List *splits, Relids a, Relids b) {
  ListCell *lc;
  foreach (lc, splits) {
    Split *q = static_cast<Split *>(lfirst(lc));
    Relids c = q->rels[0]->relids, d = q->rels[1]->relids;
    if ((bms_equal(a, c) && bms_equal(b, d)) || (bms_equal(a, d) && bms_equal(b, c))) return true;
  }
  return false;
}

List *JoinSplits(PlannerInfo *root, RelOptInfo *joinrel) {
  List *splits = NIL;
  ListCell *lc;
  foreach (lc, joinrel->pathlist) {  // (by total cost)
    Path *p = static_cast<Path *>(lfirst(lc));
    // (apply_scanjoin_target_to_paths may have put the scan/join target's
    // projection over the join)
    while (IsA(p, ProjectionPath)) p = reinterpret_cast<ProjectionPath *>(p)->subpath;
    if (!IsA(p, NestPath) && !IsA(p, MergePath) && !IsA(p, HashPath)) continue;
    JoinPath *jp = reinterpret_cast<JoinPath *>(p);
    if (p->param_info || jp->outerjoinpath->param_info || jp->innerjoinpath->param_info) continue;
    if (jp->jointype != JOIN_INNER) continue;
    // A semi join run as an inner join over its inner side made unique
    // (JOIN_UNIQUE_INNER, or _OUTER: a UniquePath, whose parent is the
    // plain relation): the node would read the relation, duplicates and
    // all, and count a row once per match (EXISTS under sum(w.val), once a
    // sum of one side's expression was the node's).
    if (IsA(jp->outerjoinpath, UniquePath) || IsA(jp->innerjoinpath, UniquePath)) continue;
    if (SameSplit(splits, jp->outerjoinpath->parent->relids, jp->innerjoinpath->parent->relids)) continue;
    Split *x = static_cast<Split *>(palloc0(sizeof(Split)));
    x->rels[0] = jp->outerjoinpath->parent;
    x->rels[1] = jp->innerjoinpath->parent;
    x->clauses = jp->joinrestrictinfo;
    splits = lappend(splits, x);
  }
  if (root->join_info_list || root->hasLateralRTEs) return splits;
  List *parts = NIL;  // the relations of proper subsets of the join
  int k = -1;
  while ((k = bms_next_member(joinrel->relids, k)) >= 0)
    if (root->simple_rel_array[k] && root->simple_rel_array[k]->reloptkind == RELOPT_BASEREL)
      parts = lappend(parts, root->simple_rel_array[k]);
  foreach (lc, root->join_rel_list) {
    RelOptInfo *r = static_cast<RelOptInfo *>(lfirst(lc));
    if (r != joinrel && bms_is_subset(r->relids, joinrel->relids)) parts = lappend(parts, r);
  }
  // (a bound on the planning this adds to a query of many joins: the
  // programs' have a few relations, but join_rel_list grows fast with them)
  constexpr int kMaxSplits = 64;
  foreach (lc, parts) {
    if (list_length(splits) >= kMaxSplits) break;
    RelOptInfo *a = static_cast<RelOptInfo *>(lfirst(lc)), *b = nullptr;
    Relids rest = bms_difference(joinrel->relids, a->relids);
    if (bms_membership(rest) == BMS_SINGLETON) {
      b = root->simple_rel_array[bms_singleton_member(rest)];
      if (b && b->reloptkind != RELOPT_BASEREL) b = nullptr;
    } else if (!bms_is_empty(rest)) {
      b = find_join_rel(root, rest);
    }
    if (!b || SameSplit(splits, a->relids, b->relids)) continue;
    Split *x = static_cast<Split *>(palloc0(sizeof(Split)));
    x->rels[0] = a;
    x->rels[1] = b;
    x->clauses = SplitClauses(root, joinrel, a, b);
    splits = lappend(splits, x);
  }
  return splits;
}

bool NotOverGroups(Node *n, NumberCtx *ctx) {
  if (!n) return false;
  if (list_member(ctx->gexprs, n)) return false;
  if (IsA(n, Aggref)) return !list_member(ctx->aggrefs, n);
  if (IsA(n, WindowFunc)) {
    WindowFunc *w = castNode(WindowFunc, n);
    if (w->winfnoid != F_ROW_NUMBER || w->args || w->aggfilter || w->winref != ctx->winref) return true;
    ctx->wfuncs = list_append_unique(ctx->wfuncs, w);
    return false;
  }
  if (IsA(n, Var) || IsA(n, SubLink) || IsA(n, SubPlan) || IsA(n, PlaceHolderVar) || IsA(n, GroupingFunc) ||
      (IsA(n, Param) && castNode(Param, n)->paramkind != PARAM_EXTERN))
    return true;
  return expression_tree_walker(n, reinterpret_cast<bool (*)()>(NotOverGroups), ctx);
}

}  // namespace

namespace {

Node *AsCall(Node *n, void *ctx) {
  if (!n) return nullptr;
  if (IsA(n, WindowFunc)) {
    WindowFunc *w = castNode(WindowFunc, n);
    return reinterpret_cast<Node *>(
        makeFuncExpr(w->winfnoid, w->wintype, NIL, w->wincollid, w->inputcollid, COERCE_EXPLICIT_CALL));
  }
  return expression_tree_mutator(n, reinterpret_cast<Node *(*)()>(AsCall), ctx);
}

}  // namespace

List *NumberedTargets(List *tlist, Expr **number) {
  NumberCtx nc{NIL, NIL, NIL, 0};
  (void)WindowFuncs(reinterpret_cast<Node *>(tlist), &nc);
  if (list_length(nc.wfuncs) != 1) elog(ERROR, "ddx: not one row_number() to number the rows by");
  *number = reinterpret_cast<Expr *>(AsCall(static_cast<Node *>(linitial(nc.wfuncs)), nullptr));
  return reinterpret_cast<List *>(AsCall(reinterpret_cast<Node *>(tlist), nullptr));
}

// The distinct WindowFuncs of n, into ctx->wfuncs.
bool WindowFuncs(Node *n, NumberCtx *ctx) {
  if (!n) return false;
  if (IsA(n, WindowFunc)) {
    ctx->wfuncs = list_append_unique(ctx->wfuncs, n);
    return false;
  }
  return expression_tree_walker(n, reinterpret_cast<bool (*)()>(WindowFuncs), ctx);
}

// The contraction under a subquery rel's path: a Subquery Scan whose path
// is the contraction node's (under a projection, at most).
const ContractionPlan *ContractionUnder(Path *p) {
  if (p->param_info || !IsA(p, SubqueryScanPath)) return nullptr;
  Path *sub = reinterpret_cast<SubqueryScanPath *>(p)->subpath;
  if (IsA(sub, ProjectionPath)) sub = reinterpret_cast<ProjectionPath *>(sub)->subpath;
  if (!IsA(sub, CustomPath) || reinterpret_cast<CustomPath *>(sub)->methods != &kPathMethods) return nullptr;
  // (a node of grouping sets: its groups are not one pair of key ids each)
  if (reinterpret_cast<ContractionPath *>(sub)->plan.sets) return nullptr;
  return &reinterpret_cast<ContractionPath *>(sub)->plan;
}

namespace {

ContractionPath *NewPath() {
  return reinterpret_cast<ContractionPath *>(newNode(sizeof(ContractionPath), T_CustomPath));
}

// Puts the build side `build` of the plan p, whose sides are the split's,
// at 0 and the probe side at 1.
void OrientSides(ContractionPlan *p, int build) {
  if (build == kBuild) return;
  std::swap(p->join_keys[0], p->join_keys[1]);
  std::swap(p->join_hash[0], p->join_hash[1]);
  std::swap(p->factors[0], p->factors[1]);
  std::swap(p->rels[0], p->rels[1]);
  List *probe_first = NIL, *group_side = NIL;
  ListCell *lc;
  foreach (lc, p->probe_first) probe_first = lappend_int(probe_first, 1 - lfirst_int(lc));
  foreach (lc, p->group_side) group_side = lappend_int(group_side, 1 - lfirst_int(lc));
  p->probe_first = probe_first;
  p->group_side = group_side;
  foreach (lc, p->accs) {
    AccSpec *a = static_cast<AccSpec *>(lfirst(lc));
    if (a->override_side >= 0) a->override_side = 1 - a->override_side;
  }
}

// row_number() OVER () over the node's groups, numbered by the node as it
// emits them (without ORDER BY, any order is row_number()'s), instead of a
// WindowAgg over its output: a program numbers a saved aggregate's groups
// so where its keys cannot be its rid (ops/aggregate.cpp), and a WindowAgg
// over the matmul's 80k groups cost more than the product (bench/RESULTS.md).
// The path is the node's, with the window's target and a WindowAgg over its
// fallback.
void NumberGroups(PlannerInfo *root, RelOptInfo *input_rel, RelOptInfo *output_rel) {
  Query *parse = root->parse;
  if (list_length(parse->windowClause) != 1) return;
  WindowClause *wc = linitial_node(WindowClause, parse->windowClause);
  if (wc->partitionClause || wc->orderClause) return;
  ContractionPath *node = nullptr;
  ListCell *lc;
  foreach (lc, input_rel->pathlist) {
    Path *x = static_cast<Path *>(lfirst(lc));
    if (IsA(x, CustomPath) && reinterpret_cast<CustomPath *>(x)->methods == &kPathMethods &&
        !reinterpret_cast<ContractionPath *>(x)->plan.sets)
      node = reinterpret_cast<ContractionPath *>(x);
  }
  // (the window's output target, as its WindowAgg paths have it)
  PathTarget *target = nullptr;
  foreach (lc, output_rel->pathlist)
    if (IsA(lfirst(lc), WindowAggPath)) target = static_cast<Path *>(lfirst(lc))->pathtarget;
  if (!node || !target || contain_volatile_functions(reinterpret_cast<Node *>(target->exprs))) return;
  NumberCtx ctx{node->plan.group_keys, node->plan.aggrefs, NIL, wc->winref};
  if (NotOverGroups(reinterpret_cast<Node *>(target->exprs), &ctx) || !ctx.wfuncs) return;
  ContractionPath *numbered = NewPath();
  *numbered = *node;
  numbered->plan.numbered = true;
  CustomPath *cp = &numbered->path;
  cp->path.parent = output_rel;
  cp->path.pathtarget = target;
  Path *fallback = reinterpret_cast<Path *>(compat::WindowAggPathOf(
      root, output_rel, static_cast<Path *>(lthird(node->path.custom_paths)), target, ctx.wfuncs, wc));
  cp->custom_paths = list_make3(linitial(node->path.custom_paths), lsecond(node->path.custom_paths), fallback);
  cp->path.parallel_safe = node->path.path.parallel_safe && fallback->parallel_safe;
  add_path(output_rel, &cp->path);
}

// What the checks of one grouping of a join said: each reason once, in the
// order they came.
struct Refusals {
  static constexpr int kMax = 8;
  const char *why[kMax];
  int n;
};

// Logs why a query keeps PostgreSQL's plan (SET client_min_messages =
// debug1), and keeps the reason in *rs (where not null) for EXPLAIN.
void Note(Refusals *rs, Refusal r) {
  elog(DEBUG1, "ddx contraction not used: %s", r.why);
  if (!rs) return;
  for (int i = 0; i < rs->n; i++)
    if (strcmp(rs->why[i], r.why) == 0) return;
  if (rs->n < Refusals::kMax) rs->why[rs->n++] = r.why;
}

// Why the node does not compute a grouping at all; grouping sets only of
// one relation (sets).
Refusal GroupingFits(const Query *parse, const GroupPathExtraData *gx, bool sets = false) {
  if (parse->groupingSets && !sets) return Refusal{"grouping sets"};
  if (parse->havingQual) return Refusal{"HAVING"};
  if (parse->hasTargetSRFs) return Refusal{"a set-returning function in the output"};
  if (gx->patype != PARTITIONWISE_AGGREGATE_NONE) return Refusal{"partitionwise aggregation"};
  return kFits;
}

// The plan over split x, in *plan, or why it does not fit (a side without
// an unparameterized path, or ShapeOf's refusal).
Refusal SplitFits(PlannerInfo *root, const Split *x, PathTarget *target, ContractionPlan *plan) {
  for (int s = 0; s < 2; s++)
    if (!x->rels[s]->cheapest_total_path || x->rels[s]->cheapest_total_path->param_info)
      return Refusal{"a side without an unparameterized path"};
  Relids sides[2] = {x->rels[0]->relids, x->rels[1]->relids};
  *plan = ContractionPlan();
  return ShapeOf(root, x->clauses, sides, target, plan);
}

// The build side (0 or 1) of the plan over the split x, in *build: the one
// with fewer bytes, unless its expressions may raise (MayRaise) and the
// other's cannot: it is probed then, not built. Where both sides' may, a
// side whose group keys cannot is built with its factors computed on each
// row's first pair, as late as PostgreSQL computes them (*lazy:
// LazyFactors); where both sides' keys may, the query keeps PostgreSQL's
// plan.
Refusal ChooseBuildSide(const ContractionPlan &plan, const Split *x, int *build, bool *lazy) {
  double bytes[2];
  for (int s = 0; s < 2; s++) bytes[s] = x->rels[s]->rows * Max(x->rels[s]->reltarget->width, 8);
  int b = bytes[0] <= bytes[1] ? 0 : 1;
  bool fraise[2], kraise[2] = {false, false};
  for (int s = 0; s < 2; s++) fraise[s] = MayRaise(reinterpret_cast<Node *>(plan.factors[s]));
  ListCell *lg, *lgs;
  forboth(lg, plan.group_keys, lgs, plan.group_side) kraise[lfirst_int(lgs)] =
      kraise[lfirst_int(lgs)] || MayRaise(static_cast<Node *>(lfirst(lg)));
  bool raises[2] = {fraise[0] || kraise[0], fraise[1] || kraise[1]};
  if (raises[b] && !raises[1 - b]) b = 1 - b;
  if (raises[b] && kraise[b]) b = 1 - b;
  if (kraise[b])
    return Refusal{
        "a GROUP BY key on each side that may raise an error (not leakproof): the build side's are "
        "computed for rows that join nothing"};
  // (the streamed side's group keys are computed on a row's first pair,
  // before the key conditions that read them)
  if (plan.key_quals && kraise[1 - b])
    return Refusal{
        "a GROUP BY key that may raise an error beside a join condition on the keys: PostgreSQL computes "
        "it only for the pairs the condition keeps"};
  *build = b;
  // (pair terms read the build row's columns at each pair: its tuple kept)
  bool pairs = false;
  ListCell *lc;
  foreach (lc, plan.pair_terms) pairs = pairs || lfirst(lc);
  *lazy = fraise[b] || pairs;
  return kFits;
}

// PostgreSQL's own aggregate over the join, the node's fallback for when
// memory runs out: planned beside it, never added to the rel (add_path
// frees the paths it rejects). *best gets the grouped rel's cheapest path.
Path *FallbackPath(PlannerInfo *root, RelOptInfo *input_rel, RelOptInfo *output_rel, Path **best) {
  AggClauseCosts costs;
  MemSet(&costs, 0, sizeof costs);
  get_agg_clause_costs(root, AGGSPLIT_SIMPLE, &costs);
  *best = nullptr;
  ListCell *lc;
  foreach (lc, output_rel->pathlist) {
    Path *x = static_cast<Path *>(lfirst(lc));
    // (not the node's own path of another split: PostgreSQL's)
    if (IsA(x, CustomPath) && reinterpret_cast<CustomPath *>(x)->methods == &kPathMethods) continue;
    if (!*best || x->total_cost < (*best)->total_cost) *best = x;
  }
  if (!*best) return nullptr;
  // Grouping sets: a copy of PostgreSQL's cheapest path itself (its
  // rollups are grouping_planner's own, not the hook's to make again); a
  // copy, as add_path frees the paths the node's displaces. Its subpaths
  // are the relation's paths or its own, which add_path never frees.
  if (root->parse->groupingSets) {
    Size size = IsA(*best, GroupingSetsPath) ? sizeof(GroupingSetsPath) : IsA(*best, AggPath) ? sizeof(AggPath) : 0;
    if (size == 0) return nullptr;
    Path *copy = static_cast<Path *>(palloc(size));
    memcpy(copy, *best, size);
    return copy;
  }
  return reinterpret_cast<Path *>(create_agg_path(root, output_rel, input_rel->cheapest_total_path,
                                                  output_rel->reltarget,
                                                  compat::GroupClause(root) ? AGG_HASHED : AGG_PLAIN, AGGSPLIT_SIMPLE,
                                                  compat::GroupClause(root), NIL, &costs, (*best)->rows));
}

// Adds the node's path for the plan over two sides, read from paths[0]
// and paths[1] (of the relations rels[0] and rels[1]: the split's, in its
// order), built on side b (lazy: its factors computed on a row's first
// pair), to output_rel; `one`: a grouping of one relation (ConsiderOne).
void AddNodePath(PlannerInfo *root, RelOptInfo *input_rel, RelOptInfo *output_rel, ContractionPlan *plan,
                 Path *const paths[2], const Relids rels[2], int b, bool lazy, bool one) {
  Path *best;
  Path *fallback = FallbackPath(root, input_rel, output_rel, &best);
  if (!fallback) return;
  double groups = best->rows;
  Path *bp = paths[b], *pp = paths[1 - b];
  ContractionPath *node = NewPath();
  CustomPath *cp = &node->path;
  cp->path.pathtype = T_CustomScan;
  cp->path.parent = output_rel;
  cp->path.pathtarget = output_rel->reltarget;
  cp->path.parallel_aware = false;
  // Parallel-safe where its children and its fallback are (the fallback's
  // safety covers the target's and the join's expressions): never partial,
  // it may run in a worker over whole inputs, as a Hash's inner may. And it
  // must be: a parallel-unsafe path keeps its parallel-safe rival beside it
  // in add_path however much cheaper it is, and where a nested loop (a cross
  // join with a program's scalar cotangent, priced with disable_cost under
  // enable_nestloop = off) makes the costs above them fuzzily equal, the
  // rival wins: a Citus task's recomputed prediction was a hash aggregate.
  cp->path.parallel_safe = bp->parallel_safe && pp->parallel_safe && fallback->parallel_safe;
  cp->path.parallel_workers = 0;
  cp->path.rows = groups;
  // (grouping sets: each row's keys interned, and its sums added, once per set)
  int nsets = Max(list_length(plan->sets), 1);
  int nkeys = list_length(plan->group_keys);
  if (plan->sets) {
    nkeys = 0;
    ListCell *ls;
    foreach (ls, plan->sets) nkeys += list_length(static_cast<List *>(lfirst(ls)));
  }
  int nagg = list_length(plan->aggrefs) * nsets;
  // The pairs the equalities join: the join's rows before its other
  // conditions.
  double pairs = input_rel->rows;
  if (plan->key_qual_ris) {
    Selectivity sel = clauselist_selectivity(root, plan->key_qual_ris, 0, JOIN_INNER, nullptr);
    pairs /= Max(sel, 1e-4);
  }
  // Costs as the hash join and hash aggregate price the same work, without
  // their per-join-row tuple costs: each input row's keys hashed, each pair
  // one multiplication and addition per sum, each group a tuple.
  // A grouping of one relation (ConsiderOne) has no join key to hash:
  // each row's group keys are interned instead, priced at half the
  // operator per key that the hash aggregate prices them at, so that the
  // node wins where both would cost the same, as the CTEs' estimates of a
  // row or two in ddx's programs make them. Measured (bench/grouping.py,
  // bench/RESULTS.md): 2-5x less time than the hash aggregate above the
  // scan, from thousands of rows a group to one.
  double key_work = one ? 0.5 * cpu_operator_cost * pp->rows * nkeys
                        : cpu_operator_cost * (bp->rows + pp->rows) * Max(list_length(plan->join_keys[b]), 1);
  // Pair terms: evaluated for each pair, as for each join row.
  QualCost pair_cost;
  cost_qual_eval_node(&pair_cost, reinterpret_cast<Node *>(plan->pair_terms), root);
  cp->path.startup_cost =
      bp->total_cost + pp->total_cost + key_work + cpu_operator_cost * pairs * nagg + pair_cost.per_tuple * pairs;
  cp->path.total_cost = cp->path.startup_cost + cpu_tuple_cost * groups;
  cp->path.pathkeys = NIL;
  cp->flags = 0;
  cp->custom_paths = list_make3(bp, pp, fallback);
  for (int s = 0; s < 2; s++) plan->rels[s] = rels[s];
  plan->lazy_factors = lazy;
  OrientSides(plan, b);
  node->plan = *plan;
  cp->methods = &kPathMethods;
  elog(DEBUG1, "ddx contraction considered: cost %.1f against %.1f", cp->path.total_cost, best->total_cost);
  add_path(output_rel, &cp->path);
}

// Whether the node computes the grouping of the join input_rel, and how:
// true where it added its path to output_rel; else, the reasons in *rs.
bool ConsiderJoin(PlannerInfo *root, RelOptInfo *input_rel, RelOptInfo *output_rel, GroupPathExtraData *gx,
                  Refusals *rs) {
  if (Refusal r = GroupingFits(root->parse, gx)) {
    Note(rs, r);
    return false;
  }
  List *splits = JoinSplits(root, input_rel);
  if (!splits) {
    Note(rs, Refusal{"not an inner join"});
    return false;
  }
  // A path for every split the node computes, add_path keeping the
  // cheapest: the split of PostgreSQL's cheapest join is not the node's
  // cheapest. The MLP's second layer, tanh(hp.z + b1.val) * w2.val, planned
  // on right estimates, joins the bias to w2 first (128 rows); over that
  // split the node evaluates the tanh for each of 524k pairs where, over
  // (hp JOIN b1) and w2, it is a factor of each of h's 131k rows (62 ms
  // against 45 for the forward: bench/RESULTS.md, "Users' own queries").
  bool added = false;
  ListCell *lc;
  foreach (lc, splits) {
    Split *x = static_cast<Split *>(lfirst(lc));
    ContractionPlan plan;
    int b;
    bool lazy;
    Refusal r = SplitFits(root, x, output_rel->reltarget, &plan);
    if (!r) r = ChooseBuildSide(plan, x, &b, &lazy);
    if (r) {
      Note(rs, r);
      continue;
    }
    Path *paths[2] = {x->rels[0]->cheapest_total_path, x->rels[1]->cheapest_total_path};
    Relids rels[2] = {x->rels[0]->relids, x->rels[1]->relids};
    AddNodePath(root, input_rel, output_rel, &plan, paths, rels, b, lazy, false);
    added = true;
  }
  return added;
}

// GROUP BY GROUPING SETS of one relation: each set's keys (their places in
// the plan's group keys) into plan->sets, and each GROUPING() call's value
// in each set into plan->grouping_values. ddx's backward sums a row-local
// step's cotangent into each of its inputs' rows in one pass, GROUP BY
// GROUPING SETS ((r0), (r1)) (the MLP's first layer: 65,536 rows into
// 65,536 and 16 groups, PostgreSQL's hash aggregate spilling); the node
// reads the rows once and interns each set's keys in a table of its own.
Refusal GroupingSets(PlannerInfo *root, ContractionPlan *plan) {
  Query *parse = root->parse;
  List *groups = compat::GroupClause(root);
  // (every key a GROUP BY column of the relation's rows: no column that a
  // primary key implies, no constant)
  if (list_length(plan->group_keys) != list_length(groups)) return Refusal{"grouping sets of implied columns"};
  ListCell *lc;
  foreach (lc, plan->group_side)
    if (lfirst_int(lc) != kProbe) return Refusal{"grouping sets with a constant key"};
  // (subquery_planner has expanded the sets already: a list of lists of
  // sortgrouprefs, one per set, ROLLUP and CUBE spelled out)
  List *expanded = parse->groupingSets;
  if (list_length(expanded) > 64) return Refusal{"more than 64 grouping sets"};
  foreach (lc, expanded) {
    List *refs = static_cast<List *>(lfirst(lc));
    if (refs && !IsA(refs, IntList)) return Refusal{"grouping sets not expanded"};
    // (the empty set's one row exists even with no input row)
    if (!refs) return Refusal{"an empty grouping set"};
    List *places = NIL;
    ListCell *lr;
    foreach (lr, refs) {
      int place = 0, found = -1;
      ListCell *lg;
      foreach (lg, groups) {
        if (lfirst_node(SortGroupClause, lg)->tleSortGroupRef == static_cast<Index>(lfirst_int(lr))) found = place;
        place++;
      }
      if (found < 0) return Refusal{"a grouping set's column not in GROUP BY"};
      places = list_append_unique_int(places, found);
    }
    plan->sets = lappend(plan->sets, places);
  }
  foreach (lc, plan->grouping_funcs) {
    GroupingFunc *gf = lfirst_node(GroupingFunc, lc);
    List *values = NIL;
    ListCell *ls;
    foreach (ls, expanded) {
      int value = 0;
      ListCell *lr;
      foreach (lr, gf->refs)
        value = (value << 1) | (list_member_int(static_cast<List *>(lfirst(ls)), lfirst_int(lr)) ? 0 : 1);
      values = lappend_int(values, value);
    }
    plan->grouping_values = lappend(plan->grouping_values, values);
  }
  return kFits;
}

// A grouping of one relation (no join: a relation, a subquery, a CTE, a
// UNION ALL), as ddx's programs sum a cotangent's parts by row (SELECT
// rid, sum(d) FROM (a UNION ALL b) GROUP BY rid) and a bias's gradient by
// its key: the node with that relation as its probe side and, as its build
// side, one row of no columns (a Result), joined to every row with no key
// (a cross join, the node's run 0). Each sum is then of the relation's
// expression times the build side's 1 (NodeAggregate's sum of one side),
// which float8mul returns exactly: the same terms, added in the order the
// rows come, as PostgreSQL's hash aggregate adds them. Its gain is the
// grouping itself: the keys interned once per row into dense ids (integer
// keys compared as Datums) and the sums added into an array, where the
// hash aggregate runs each row through its hash table's tuple machinery.
// Only with a GROUP BY: a plain aggregate keeps PostgreSQL's.
bool ConsiderOne(PlannerInfo *root, RelOptInfo *input_rel, RelOptInfo *output_rel, GroupPathExtraData *gx) {
  if (GroupingFits(root->parse, gx, true) || !compat::GroupClause(root) || !input_rel->cheapest_total_path ||
      input_rel->cheapest_total_path->param_info)
    return false;
  // Of a table, a subquery (a UNION ALL among them) or a CTE only: not of a
  // function's rows, such as the intermediate results and the remote scan's
  // rows a Citus coordinator groups, which Citus plans with scans of its own
  // (with the node over them, setrefs.c found no column of theirs, and
  // Citus kept the gradient program off its workers)
  RTEKind kind = root->simple_rte_array[input_rel->relid]->rtekind;
  if (kind != RTE_RELATION && kind != RTE_SUBQUERY && kind != RTE_CTE) return false;
  // A sum of contractions (every arm of a UNION ALL the node's) stays
  // PostgreSQL's hash aggregate: where it is joined back, the fill looks its
  // rows up in each arm's groups and adds them (fill_path.cpp,
  // SummedNodes), forming no group of the sum.
  Path *in = input_rel->cheapest_total_path;
  if (IsA(in, ProjectionPath)) in = reinterpret_cast<ProjectionPath *>(in)->subpath;
  if (IsA(in, AppendPath)) {
    bool all = reinterpret_cast<AppendPath *>(in)->subpaths != NIL;
    ListCell *lc;
    foreach (lc, reinterpret_cast<AppendPath *>(in)->subpaths)
      all = all && ContractionUnder(static_cast<Path *>(lfirst(lc)));
    if (all) return false;
  }
  Relids sides[2] = {nullptr, input_rel->relids};
  ContractionPlan plan;
  plan.grouping_sets = root->parse->groupingSets != NIL;
  Refusal r = ShapeOf(root, NIL, sides, output_rel->reltarget, &plan);
  if (!r && plan.grouping_sets) r = GroupingSets(root, &plan);
  if (r) {
    elog(DEBUG1, "ddx contraction not used for a grouping of one relation: %s", r.why);
    return false;
  }
  // (a group key that reads no column is computed on the one build row,
  // and its factors are constants: neither raises where PostgreSQL's would
  // not; the relation's are computed for each of its rows, as PostgreSQL's)
  if (MayRaise(reinterpret_cast<Node *>(plan.factors[0]))) return false;
  ListCell *lg, *ls;
  forboth(lg, plan.group_keys, ls, plan.group_side) {
    if (lfirst_int(ls) == 0 && MayRaise(static_cast<Node *>(lfirst(lg)))) return false;
  }
  Path *one = reinterpret_cast<Path *>(create_group_result_path(root, output_rel, create_empty_pathtarget(), NIL));
  // (priced at nothing: made once, it is no tuple of the grouping's work,
  // and the CTEs of ddx's programs are estimated at a row or two, where a
  // tuple's cost would decide)
  one->startup_cost = one->total_cost = 0;
  Path *paths[2] = {one, input_rel->cheapest_total_path};
  AddNodePath(root, input_rel, output_rel, &plan, paths, sides, 0, false, true);
  return true;
}

}  // namespace

// create_upper_paths_hook: where a grouping of a join has a plan the node
// computes, the node's path beside PostgreSQL's (and, over the window
// stage, NumberGroups'); add_path chooses by cost. Where it has none, the
// reasons go to the statement being explained, if it is this one
// (KeepRefusals: its query is the top planner's).
void ContractionUpperPaths(PlannerInfo *root, UpperRelationKind stage, RelOptInfo *input_rel, RelOptInfo *output_rel,
                           void *extra) {
  if (prev_upper_hook) prev_upper_hook(root, stage, input_rel, output_rel, extra);
  if (mode == kOff || (mode == kPrograms && !in_program)) return;
  if (stage == UPPERREL_WINDOW) {
    NumberGroups(root, input_rel, output_rel);
    NumberRows(root, input_rel, output_rel);
    return;
  }
  if (stage != UPPERREL_GROUP_AGG) return;
  // (a partition's grouping under partitionwise aggregation has an
  // RELOPT_OTHER_JOINREL: its parent's says why)
  if (!output_rel->pathlist) return;
  if (input_rel->reloptkind == RELOPT_BASEREL) {
    (void)ConsiderOne(root, input_rel, output_rel, static_cast<GroupPathExtraData *>(extra));
    return;
  }
  if (input_rel->reloptkind != RELOPT_JOINREL) return Note(nullptr, Refusal{"not a grouping of a join"});
  Refusals rs = {};
  if (ConsiderJoin(root, input_rel, output_rel, static_cast<GroupPathExtraData *>(extra), &rs)) return;
  PlannerInfo *top = root;
  while (top->parent_root) top = top->parent_root;
  KeepRefusals(top->parse, rs.why, rs.n);
}

}  // namespace ddx::pg::contraction
