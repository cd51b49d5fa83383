// The contraction node: a CustomScan that computes
//
//   SELECT <keys of a>, <keys of b>, SUM(f(a) * g(b)) [, SUM(...) ...]
//   FROM a JOIN b ON a.k1 = b.k1 [AND ...] GROUP BY <keys of a>, <keys of b>
//
// without forming the join's rows: it hashes one side by its join key (each
// row with its group key, interned to a dense id, and its factors), streams
// the other, and adds each product straight into the accumulator of its pair
// of group ids. A matmul's join has one row per (i, k, j); here the per-pair
// work is one multiplication and one addition.
//
// Where: create_upper_paths_hook at UPPERREL_GROUP_AGG, which sees the join
// and the GROUP BY together (planner.c, create_ordinary_grouping_paths, calls
// it after the core's Agg paths are in grouped_rel). The input must be a join
// of two sides (tables, subqueries, CTE scans, or joins of them: their
// cheapest paths become the node's children; JoinSplits), inner, by hashable strict
// equalities and by other conditions that read the GROUP BY keys alone
// (attention's causal k.t <= q.t: tested once per group, when its first pair
// of rows joins, and a group where it fails is dropped); every aggregate
// of the target a plain SUM(float8) of a product float8mul(f, g) (or
// float48mul, float84mul), or SUM(float4) of float4mul(f, g), with f over
// one side's columns and g over the other's (or f a NULL guard of g's side
// around a value of the other side, as ddx's backward writes it:
// SplitGuard), AVG of such a product, or
// COUNT(*) or COUNT(e) of one side's expression (NodeAggregate); every
// other target entry a GROUP BY key over one side's columns, a column that
// depends on a primary key grouped by (one more key: GroupKeys), or a stable
// expression of the keys and aggregates; no HAVING, grouping sets, volatile
// functions, sublinks or PARAM_EXEC; a side whose keys or factors may raise
// an error is not the hashed one where the other's cannot (MayRaise), and
// where both sides' factors may, the hashed side's are computed on each
// row's first pair (LazyFactors). Any other query keeps PostgreSQL's own plan. The GUC
// ddx.contraction decides where it is considered: off, programs (ddx's
// gradient programs and jvp queries; the default) or all.
//
// Exactly PostgreSQL's answer: sum(float8) is float8pl over the non-NULL
// products in some order (only the order of additions may differ); a NULL
// factor contributes nothing; a group whose products are all NULL is NULL; a
// group exists where at least one pair of rows joins; float8_mul and
// float8_pl (utils/float.h) raise overflow and underflow as PostgreSQL does.
// sum(float4) adds in float4 (float4pl, its transition function), so the
// node rounds each product and each partial sum to float4 (float4_mul,
// float4_pl) as PostgreSQL does; only the order of additions differs.
// avg keeps float8_accum's N, Sx and Sxx (three accumulators) and returns
// Sx / N, so that it raises where float8_accum does; count counts pairs.
//
// Memory: the node's context is held to get_hash_memory_limit() (work_mem ×
// hash_mem_multiplier). Past it, before any row is returned, the node frees
// its state and runs its third child instead: PostgreSQL's own hash
// aggregate over the join, planned beside it (create_agg_path, never added
// to the rel: add_path frees the paths it rejects). Long loops check for
// interrupts. Parallel query: the node is never partial; it is parallel-safe
// where its children are (then it may run in a worker over whole inputs).
//
// Expressions: each side's keys and factors are kept in custom_private with
// their Vars turned into OUTER_VAR references to that child's output columns
// (found by varno and varattno in the child's finished target list), and
// evaluated with the child's tuple as the outer tuple. setrefs does not touch
// custom_private, which is why no expression may need it (PARAM_EXEC,
// SubPlans); $n parameters are read from the execution's parameter list, so
// generic plans stay right.
//
// This file is C-style C++: no object with a destructor lives in a frame that
// a PostgreSQL error can longjmp over.
#include "ddx/pg/contraction_node.h"
#include <cmath>

extern "C" {
#include "postgres.h"

#include "access/parallel.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/nodeCustom.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pathnodes.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/planner.h"
#include "optimizer/prep.h"
#include "optimizer/restrictinfo.h"
#include "optimizer/tlist.h"
#include "parser/parse_oper.h"
#include "parser/parsetree.h"
#include "utils/datum.h"
#include "utils/float.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/plancache.h"
#include "utils/ruleutils.h"
#include "utils/typcache.h"
}

namespace {

enum ContractionMode { kOff, kPrograms, kAll };
const struct config_enum_entry kModes[] = {{"off", kOff, false},
                                           {"programs", kPrograms, false},
                                           {"all", kAll, false},
                                           {"on", kAll, true},
                                           {nullptr, 0, false}};
int mode = kPrograms;
bool in_program = false;  // ddx.in_program: set by the runner's ProgramSettings
create_upper_paths_hook_type prev_upper_hook = nullptr;

// --- planning ----------------------------------------------------------------

// What the node computes, as planned: lists in custom_private, in this order.
//   0 build side's relids (int list), 1 probe side's
//   2 build join keys, 3 probe join keys (expressions over their side)
//   4 equality functions (oid), 5 build hash functions, 6 probe hash functions,
//   7 collations, 8 probe-first flags (int: 1 where the clause's left operand
//     is the probe side's)
//   9 group key expressions (in scan-tlist order), 10 their side (0 build, 1 probe),
//   11 group equality functions, 12 group hash functions, 13 group collations
//   14 build factors, 15 probe factors (one per SUM)
//   16 per SUM, 1 where it sums COALESCE(f * g, 0) (a NULL product adds 0),
//      + 2 where it is sum(float4) of float4mul (in float4, as PostgreSQL)
//   17 join conditions other than the equalities, over the group keys alone
//      (in the plan: INDEX_VAR references to the keys' scan-tuple columns)
//   18 1 where the node also numbers its groups, row_number() OVER () (the
//      scan tuple's last column: NumberGroups)
//   19 1 where the build side's factors may raise: computed on a build row's
//      first pair (LazyFactors), not at the build
//   20 (planning only) the Aggrefs
enum Priv {
  kBuildRels,
  kProbeRels,
  kBuildKeys,
  kProbeKeys,
  kEqFns,
  kBuildHash,
  kProbeHash,
  kKeyColl,
  kProbeFirst,
  kGroupExprs,
  kGroupSide,
  kGroupEq,
  kGroupHash,
  kGroupColl,
  kBuildFactors,
  kProbeFactors,
  kNullZero,
  kKeyQuals,
  kNumbered,
  kLazyFactors,
  kNPriv
};

// A node the node's expressions cannot hold, aggregates aside: it reads
// another query level, a subplan, or a value set while the plan runs.
bool ForbiddenNode(const Node *n) {
  return (IsA(n, Param) && castNode(Param, n)->paramkind != PARAM_EXTERN) || IsA(n, SubLink) || IsA(n, SubPlan) ||
         IsA(n, AlternativeSubPlan) || IsA(n, PlaceHolderVar) || IsA(n, WindowFunc) || IsA(n, GroupingFunc);
}

bool ForbiddenWalker(Node *n, void *) {
  if (!n) return false;
  if (ForbiddenNode(n) || IsA(n, Aggref)) return true;
  return expression_tree_walker(n, reinterpret_cast<bool (*)()>(ForbiddenWalker), nullptr);
}

// Whether evaluating e might raise an error: any function that is not
// leakproof (float8mul's overflow, ln(0), a division by zero; leakproof
// functions promise no error that depends on their arguments), or any
// expression node other than the few below, which raise none of their own.
// PostgreSQL evaluates a GROUP BY key or an aggregate's argument only for
// the join's rows; the node evaluates its probe side's on a row's first pair
// (as late), but its build side's at the build, for every row with a join
// key: an error there, on a row that joins nothing, would fail a query
// PostgreSQL runs. So a side whose expressions may raise is never the build
// side.
bool CannotRaise(Oid fn) {
  switch (fn) {  // not marked leakproof, but total: a float's sign or magnitude
    case F_FLOAT8ABS:
    case F_ABS_FLOAT8:
    case F_ABS_FLOAT4:
    case F_FLOAT4ABS:
    case F_FLOAT8UM:
    case F_FLOAT4UM:
    case F_FLOAT8UP:
    case F_FLOAT4UP:
      return true;
    default:
      return get_func_leakproof(fn);
  }
}
bool MayRaiseWalker(Node *n, void *);
bool MayRaise(Node *n) { return MayRaiseWalker(n, nullptr); }
bool MayRaiseWalker(Node *n, void *) {
  if (!n) return false;
  switch (nodeTag(n)) {
    case T_Var:
    case T_Const:
    case T_Param:
    case T_RelabelType:
    case T_CoalesceExpr:
    case T_NullTest:
    case T_BooleanTest:
    case T_BoolExpr:
    case T_CaseExpr:
    case T_CaseWhen:
    case T_CaseTestExpr:
    case T_List:
      break;
    case T_FuncExpr:
      if (!CannotRaise(castNode(FuncExpr, n)->funcid)) return true;
      break;
    case T_MinMaxExpr: {  // GREATEST, LEAST (ReLU): the type's btree comparison (ExecEvalMinMax)
      TypeCacheEntry *tc = lookup_type_cache(castNode(MinMaxExpr, n)->minmaxtype, TYPECACHE_CMP_PROC);
      if (!OidIsValid(tc->cmp_proc) || !get_func_leakproof(tc->cmp_proc)) return true;
      break;
    }
    case T_OpExpr:
    case T_DistinctExpr:
    case T_NullIfExpr: {
      OpExpr *op = reinterpret_cast<OpExpr *>(n);
      set_opfuncid(op);
      if (!CannotRaise(op->opfuncid)) return true;
      break;
    }
    default:
      return true;
  }
  return expression_tree_walker(n, reinterpret_cast<bool (*)()>(MayRaiseWalker), nullptr);
}

// The side (0 or 1 of `sides`) whose columns alone e reads; -1 if it reads
// both or something the node cannot evaluate; `none` if it reads no column.
int SideOf(PlannerInfo *root, Node *e, const Relids sides[2], int none) {
  if (ForbiddenWalker(e, nullptr) || contain_volatile_functions(e)) return -1;
  Relids r = pull_varnos(root, e);
  if (bms_is_empty(r)) return none;
  for (int s = 0; s < 2; s++)
    if (bms_is_subset(r, sides[s])) return s;
  return -1;
}

struct Shape {
  List *keys[2] = {NIL, NIL};  // join key expressions per side
  List *eq = NIL, *hash[2] = {NIL, NIL}, *coll = NIL, *probe_first = NIL;
  List *gexprs = NIL, *gside = NIL, *geq = NIL, *ghash = NIL, *gcoll = NIL;
  List *factors[2] = {NIL, NIL};
  List *null_zero = NIL;
  List *extra = NIL, *extra_ri = NIL;  // other join conditions (over group keys: checked by KeyQuals)
  List *aggrefs = NIL;                 // the Aggrefs, in factor order
};

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
  return list_concat(out, generate_join_implied_equalities(root, joinrel->relids, a->relids, b));
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

// Why a query keeps PostgreSQL's plan (SET client_min_messages = debug1).
bool No(const char *why) {
  elog(DEBUG1, "ddx contraction not used: %s", why);
  return false;
}

bool JoinKeys(PlannerInfo *root, List *clauses, const Relids sides[2], Shape *s) {
  ListCell *lc;
  foreach (lc, clauses) {
    RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
    if (ri->pseudoconstant) return No("a constant join condition");
    // A strict hashable equality of one side's expression with the other's
    // is a join key; any other condition must read the group keys alone
    // (KeyQuals, once they are known).
    OpExpr *op = is_opclause(ri->clause) ? castNode(OpExpr, ri->clause) : nullptr;
    Node *l = op && list_length(op->args) == 2 ? static_cast<Node *>(linitial(op->args)) : nullptr;
    Node *r = l ? static_cast<Node *>(lsecond(op->args)) : nullptr;
    int ls = l ? SideOf(root, l, sides, -1) : -1, rs = r ? SideOf(root, r, sides, -1) : -1;
    RegProcedure lh = InvalidOid, rh = InvalidOid;
    if (!OidIsValid(ri->hashjoinoperator) || !l || op->opno != ri->hashjoinoperator || !op_strict(op->opno) || ls < 0 ||
        rs < 0 || ls == rs || !get_op_hash_functions(op->opno, &lh, &rh)) {
      if (ForbiddenWalker(reinterpret_cast<Node *>(ri->clause), nullptr) ||
          contain_volatile_functions(reinterpret_cast<Node *>(ri->clause)))
        return No("a join condition with a volatile function, a sublink or a parameter of a subplan");
      s->extra = lappend(s->extra, ri->clause);
      s->extra_ri = lappend(s->extra_ri, ri);
      continue;
    }
    s->keys[ls] = lappend(s->keys[ls], l);
    s->keys[rs] = lappend(s->keys[rs], r);
    s->hash[ls] = lappend_oid(s->hash[ls], lh);
    s->hash[rs] = lappend_oid(s->hash[rs], rh);
    s->eq = lappend_oid(s->eq, get_opcode(op->opno));
    s->coll = lappend_oid(s->coll, op->inputcollid);
    s->probe_first = lappend_int(s->probe_first, ls == 1 ? 1 : 0);
  }
  return true;
}

bool OverKeys(Node *n, List *gexprs);

// The join's other conditions: each must read the rows only through the
// group keys (attention's k.t <= q.t, with q.t and k.t grouped by), so that
// it holds for every pair of rows of a group or for none. The node tests it
// once per group, when the group's first pair of rows joins.
bool KeyQuals(Shape *s) {
  ListCell *lc;
  foreach (lc, s->extra)
    if (!OverKeys(static_cast<Node *>(lfirst(lc)), s->gexprs))
      return No("a join condition other than an equality that reads more than the GROUP BY keys");
  return true;
}

// Per accumulator (custom_private's kNullZero list): how it adds its pairs.
// An output aggregate has one accumulator; avg has three (float8_accum's
// N, Sx and Sxx), the first marked kAccAvg and the next two kAccFollow.
// kAccSelect: a guarded value (SelectGuard), whose override factor is on
// side 1 of the Shape (kAccSelectSide1) while planning, and on the probe
// side (kAccSelectProbe) in the plan.
enum AccFlags {
  kAccNullZero = 1,
  kAccF4 = 2,
  kAccCount = 4,
  kAccAvg = 8,
  kAccFollow = 16,
  kAccSelect = 32,
  kAccSelectSide1 = 64,
  kAccSelectProbe = 128
};

// CASE WHEN cond THEN then ELSE otherwise END, a float8 (the node's own
// factors; the arguments are used as they are, not copied).
Node *Float8Case(Expr *cond, Expr *then, Expr *otherwise) {
  CaseWhen *w = makeNode(CaseWhen);
  w->expr = cond;
  w->result = then;
  w->location = -1;
  CaseExpr *c = makeNode(CaseExpr);
  c->casetype = FLOAT8OID;
  c->casecollid = InvalidOid;
  c->args = list_make1(w);
  c->defresult = otherwise;
  c->location = -1;
  return reinterpret_cast<Node *>(c);
}

Expr *Float8Null() { return reinterpret_cast<Expr *>(makeNullConst(FLOAT8OID, -1, InvalidOid)); }

// The one WHEN of a float8 CASE WHEN c THEN x ELSE y END (no CASE operand,
// an ELSE), or null where n is not such a CASE: the NULL guards of ddx's
// backward (SplitGuard, SelectGuard).
CaseWhen *OneWhen(Node *n) {
  if (!IsA(n, CaseExpr)) return nullptr;
  CaseExpr *c = castNode(CaseExpr, n);
  if (c->arg || list_length(c->args) != 1 || c->casetype != FLOAT8OID || !c->defresult) return nullptr;
  return linitial_node(CaseWhen, c->args);
}

// A float8 1, or NULL where e is: the factor of count(e).
Node *NotNullOne(Node *e) {
  Node *one = reinterpret_cast<Node *>(makeConst(FLOAT8OID, -1, InvalidOid, 8, Float8GetDatum(1.0), false, true));
  if (!e) return one;
  NullTest *nt = makeNode(NullTest);
  nt->arg = static_cast<Expr *>(copyObjectImpl(e));
  nt->nulltesttype = IS_NOT_NULL;
  nt->argisrow = false;
  nt->location = -1;
  return Float8Case(reinterpret_cast<Expr *>(nt), reinterpret_cast<Expr *>(one), Float8Null());
}

// A float8 product whose operand `guard` is a NULL guard that ddx's
// backward writes, CASE WHEN c THEN NULL ELSE e END, with c over one side S
// and e over the other, T: a cotangent e guarded by the inputs of the other
// operand g (over S, or over no side), so that a row with a NULL input
// contributes nothing. The product is NULL where c holds, else e * g, so it
// is e * h with h = CASE WHEN c THEN NULL * g ELSE g END over S: that
// evaluates g where c holds too (float8mul is strict, so NULL * g evaluates g
// and is NULL), as PostgreSQL evaluates both operands of every pair's
// product. PostgreSQL evaluates e only where c does not hold, and the node
// computes it on a T row's first pair: so e must not raise. The split
// factors go to *tf (over T, side *ts) and *sf (over S, side *ss); false
// where the guard is not such a CASE.
bool SplitGuard(PlannerInfo *root, OpExpr *op, Node *guard, Node *g, const Relids sides[2], Node **tf, int *ts,
                Node **sf, int *ss) {
  CaseWhen *w = OneWhen(guard);
  if (!w || exprType(g) != FLOAT8OID || !IsA(w->result, Const) || !castNode(Const, w->result)->constisnull)
    return false;
  CaseExpr *c = castNode(CaseExpr, guard);
  int cs = SideOf(root, reinterpret_cast<Node *>(w->expr), sides, -1);
  int es = SideOf(root, reinterpret_cast<Node *>(c->defresult), sides, -1);
  int gs = SideOf(root, g, sides, -2);
  if (cs < 0 || es < 0 || cs == es || (gs != cs && gs != -2) || MayRaise(reinterpret_cast<Node *>(c->defresult)))
    return false;
  OpExpr *null_g = castNode(OpExpr, copyObjectImpl(op));  // NULL * g: g evaluated, NULL returned
  null_g->args = list_make2(Float8Null(), copyObjectImpl(g));
  *tf = reinterpret_cast<Node *>(c->defresult);
  *ts = es;
  *sf = Float8Case(static_cast<Expr *>(copyObjectImpl(w->expr)), reinterpret_cast<Expr *>(null_g),
                   static_cast<Expr *>(copyObjectImpl(g)));
  *ss = cs;
  return true;
}

// A value guarded by the other side's columns, as ddx's backward writes a
// parameter's gradient beside its NULL test: CASE WHEN c THEN k ELSE d END
// (or CASE WHEN c THEN d ELSE k END), k a float8 constant, c over one side
// S and d over the other, T. Not a product (as d * (c ? 0 : 1) it would turn
// -0 into +0 and Infinity into NaN), so an accumulator of its own: each
// pair's term is k where S's override factor o = CASE WHEN c THEN k ELSE NULL
// END (or its mirror) is not NULL, else d, and no term where d is NULL.
// PostgreSQL evaluates c for every pair (so does o: on each S row's first
// pair) and d only where the branch takes it, where the node computes d on a
// T row's first pair: so d must not raise. *of gets o (side *os), *df gets d
// (side *ds).
bool SelectGuard(PlannerInfo *root, Node *arg, const Relids sides[2], Node **of, int *os, Node **df, int *ds) {
  CaseWhen *w = OneWhen(arg);
  if (!w) return false;
  CaseExpr *c = castNode(CaseExpr, arg);
  auto constant = [](Expr *e) { return IsA(e, Const) && !castNode(Const, e)->constisnull; };
  bool k_when = constant(w->result);
  if (k_when == constant(c->defresult)) return false;  // (one branch a constant, the other not)
  Expr *k = k_when ? w->result : c->defresult, *d = k_when ? c->defresult : w->result;
  int cs = SideOf(root, reinterpret_cast<Node *>(w->expr), sides, -1);
  int es = SideOf(root, reinterpret_cast<Node *>(d), sides, -1);
  if (cs < 0 || es < 0 || cs == es || MayRaise(reinterpret_cast<Node *>(d))) return false;
  Expr *kc = static_cast<Expr *>(copyObjectImpl(k));
  *of =
      Float8Case(static_cast<Expr *>(copyObjectImpl(w->expr)), k_when ? kc : Float8Null(), k_when ? Float8Null() : kc);
  *os = cs;
  *df = reinterpret_cast<Node *>(d);
  *ds = es;
  return true;
}

// An aggregate the node computes over the pairs of rows that join:
//   sum(float8) of float8mul(f, g) (or float48mul, float84mul: a float4
//   factor widened exactly as they widen it), or sum(float4) of
//   float4mul(f, g), f and g of different sides; also of COALESCE(product,
//   0), as ddx's backward writes a transpose (a NULL product adds 0);
//   the same of an expression of one side alone (a product with 1);
//   avg(float8) and avg(float4) of the same, accumulated as
//   float8_accum and float4_accum do (N, Sx and Sxx, whose overflow raises);
//   count(*), and count(e) with e an expression of one side's columns (or
//   of none): the pairs where e is not NULL, as a "product" of 1s.
bool NodeAggregate(PlannerInfo *root, Aggref *a, const Relids sides[2], Shape *s) {
  Oid fn = a->aggfnoid;
  bool count = fn == F_COUNT_ || fn == F_COUNT_ANY, avg = fn == F_AVG_FLOAT8 || fn == F_AVG_FLOAT4;
  bool f4 = fn == F_SUM_FLOAT4 || fn == F_AVG_FLOAT4;
  if ((fn != F_SUM_FLOAT8 && fn != F_SUM_FLOAT4 && !avg && !count) || a->aggdistinct || a->aggorder || a->aggfilter ||
      (a->aggstar && fn != F_COUNT_) || a->aggvariadic || a->aggkind != AGGKIND_NORMAL || a->agglevelsup != 0 ||
      list_length(a->args) != (fn == F_COUNT_ ? 0 : 1))
    return No("an aggregate other than a plain sum or avg (float8, float4) or count");
  if (count) {
    Node *e = a->aggstar ? nullptr : reinterpret_cast<Node *>(linitial_node(TargetEntry, a->args)->expr);
    int side = e ? SideOf(root, e, sides, 0) : 0;
    if (side < 0) return No("a count of an expression of both sides");
    s->factors[side] = lappend(s->factors[side], NotNullOne(e));
    s->factors[1 - side] = lappend(s->factors[1 - side], NotNullOne(nullptr));
    s->aggrefs = lappend(s->aggrefs, a);
    s->null_zero = lappend_int(s->null_zero, kAccCount);
    return true;
  }
  Node *arg = reinterpret_cast<Node *>(linitial_node(TargetEntry, a->args)->expr);
  bool null_zero = false;
  if (IsA(arg, CoalesceExpr) && list_length(castNode(CoalesceExpr, arg)->args) == 2) {
    Node *z = static_cast<Node *>(lsecond(castNode(CoalesceExpr, arg)->args));
    if (!IsA(z, Const) || castNode(Const, z)->consttype != (f4 ? FLOAT4OID : FLOAT8OID) ||
        castNode(Const, z)->constisnull ||
        (f4 ? DatumGetFloat4(castNode(Const, z)->constvalue) : DatumGetFloat8(castNode(Const, z)->constvalue)) != 0.0)
      return No("an aggregate of COALESCE(product, c) with c other than 0");
    arg = static_cast<Node *>(linitial(castNode(CoalesceExpr, arg)->args));
    null_zero = true;
  }
  Node *sel_o = nullptr, *sel_d = nullptr;
  int sel_os = -1, sel_ds = -1, select = 0;
  int side = SideOf(root, arg, sides, 0);
  if (side >= 0) {
    // An expression of one side (or of none): a product with the other
    // side's 1, which float8mul and float4mul return exactly.
    s->factors[side] = lappend(s->factors[side], arg);
    s->factors[1 - side] = lappend(s->factors[1 - side], NotNullOne(nullptr));
  } else if (!f4 && SelectGuard(root, arg, sides, &sel_o, &sel_os, &sel_d, &sel_ds)) {
    s->factors[sel_os] = lappend(s->factors[sel_os], sel_o);
    s->factors[sel_ds] = lappend(s->factors[sel_ds], sel_d);
    select = kAccSelect | (sel_os == 1 ? kAccSelectSide1 : 0);
  } else {
    if (!is_opclause(arg)) return No("a sum or avg over both sides of something other than a product");
    OpExpr *op = castNode(OpExpr, arg);
    RegProcedure mul = get_opcode(op->opno);
    if (list_length(op->args) != 2 ||
        (f4 ? mul != F_FLOAT4MUL : mul != F_FLOAT8MUL && mul != F_FLOAT48MUL && mul != F_FLOAT84MUL))
      return No("a sum or avg over both sides of something other than a float8 or float4 product");
    Node *l = static_cast<Node *>(linitial(op->args)), *r = static_cast<Node *>(lsecond(op->args));
    int ls = SideOf(root, l, sides, -1), rs = SideOf(root, r, sides, -1);
    if (mul == F_FLOAT8MUL && ls < 0 && SplitGuard(root, op, l, r, sides, &l, &ls, &r, &rs)) {
      // (a NULL guard split: l over one side, r over the other)
    } else if (mul == F_FLOAT8MUL && rs < 0 && SplitGuard(root, op, r, l, sides, &r, &rs, &l, &ls)) {
      // (likewise)
    } else if (ls < 0 || rs < 0 || ls == rs) {
      return No("a product whose factors are not one of each side");
    }
    s->factors[ls] = lappend(s->factors[ls], l);
    s->factors[rs] = lappend(s->factors[rs], r);
  }
  s->aggrefs = lappend(s->aggrefs, a);
  s->null_zero =
      lappend_int(s->null_zero, (null_zero ? kAccNullZero : 0) | (f4 ? kAccF4 : 0) | (avg ? kAccAvg : 0) | select);
  for (int k = 0; avg && k < 2; k++) {  // Sx and Sxx: accumulated with N, their factors never read
    for (int side = 0; side < 2; side++) s->factors[side] = lappend(s->factors[side], NotNullOne(nullptr));
    s->null_zero = lappend_int(s->null_zero, kAccFollow);
  }
  return true;
}

bool GroupKeys(PlannerInfo *root, const Relids sides[2], Shape *s) {
  ListCell *lc;
  foreach (lc, root->parse->groupClause) {
    SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);
    Node *e = get_sortgroupclause_expr(sgc, root->processed_tlist);
    int side = SideOf(root, e, sides, 0);
    RegProcedure lh, rh;
    if (side < 0 || !sgc->hashable || !get_op_hash_functions(sgc->eqop, &lh, &rh))
      return No("a GROUP BY key that is not a hashable expression of one side");
    s->gexprs = lappend(s->gexprs, e);
    s->gside = lappend_int(s->gside, side);
    s->geq = lappend_oid(s->geq, get_opcode(sgc->eqop));
    s->ghash = lappend_oid(s->ghash, lh);
    s->gcoll = lappend_oid(s->gcoll, exprCollation(e));
  }
  // A column of the output that is not a GROUP BY key: a plain Var there
  // depends on a primary key grouped by (the parser allows no other), either
  // written so or grouped by in the query and then dropped from GROUP BY by
  // remove_useless_groupby_columns (planner.c). Each group holds one row of
  // its table, so one value of the column, and grouping by it as well makes
  // the same groups. It is a key of the node (the output reads it from the
  // node's scan tuple, where setrefs.c must find it: "variable not found in
  // subplan target list"), compared by its type's default equality, as GROUP
  // BY compares it.
  foreach (lc, root->processed_tlist) {
    Node *e = reinterpret_cast<Node *>(lfirst_node(TargetEntry, lc)->expr);
    if (!IsA(e, Var) || castNode(Var, e)->varlevelsup != 0 || list_member(s->gexprs, e)) continue;
    int side = SideOf(root, e, sides, 0);
    Oid eqop = InvalidOid;
    bool hashable = false;
    get_sort_group_operators(exprType(e), false, false, false, nullptr, &eqop, nullptr, &hashable);
    RegProcedure lh, rh;
    if (side < 0 || !OidIsValid(eqop) || !hashable || !get_op_hash_functions(eqop, &lh, &rh))
      return No("an output column that depends on a primary key grouped by, of a type without hashing");
    s->gexprs = lappend(s->gexprs, e);
    s->gside = lappend_int(s->gside, side);
    s->geq = lappend_oid(s->geq, get_opcode(eqop));
    s->ghash = lappend_oid(s->ghash, lh);
    s->gcoll = lappend_oid(s->gcoll, exprCollation(e));
  }
  return true;
}

// Whether n reads the row only through the group keys `gexprs` (a code of
// the keys, COALESCE(CAST(x.i AS int8), 4294967296)): the node's projection
// computes it from its scan tuple, where setrefs.c finds the keys.
bool OverKeysWalker(Node *n, List *gexprs);
bool OverKeys(Node *n, List *gexprs) {
  if (!n) return true;
  ListCell *lc;
  foreach (lc, gexprs)
    if (equal(n, lfirst(lc))) return true;
  if (IsA(n, Var) || ForbiddenWalker(n, nullptr)) return false;
  return !expression_tree_walker(n, reinterpret_cast<bool (*)()>(OverKeysWalker), gexprs);
}
bool OverKeysWalker(Node *n, List *gexprs) { return !OverKeys(n, gexprs); }

// Whether n reads the rows only through the group keys and sums of
// products (each Aggref in it one: NodeAggregate adds it to s), as the MLP's
// tanh(sum(x.val * w1.val)): the node's projection computes it from its scan
// tuple, where setrefs.c finds the keys and the sums (fix_upper_expr matches
// whole Aggrefs against custom_scan_tlist), as an Agg's projection would.
// false with no reason given where NodeAggregate gave one.
struct SumsCtx {
  PlannerInfo *root;
  const Relids *sides;
  Shape *s;
  bool refused;  // NodeAggregate said why
};
bool NotOverSums(Node *n, SumsCtx *ctx) {
  if (!n) return false;
  ListCell *lc;
  foreach (lc, ctx->s->gexprs)
    if (equal(n, lfirst(lc))) return false;
  if (IsA(n, Aggref)) {
    if (list_member(ctx->s->aggrefs, n)) return false;
    if (NodeAggregate(ctx->root, castNode(Aggref, n), ctx->sides, ctx->s)) return false;
    ctx->refused = true;
    return true;
  }
  if (IsA(n, Var) || ForbiddenNode(n)) return true;
  return expression_tree_walker(n, reinterpret_cast<bool (*)()>(NotOverSums), ctx);
}

// Every entry of the grouped rel's target: a group key, or a stable
// expression of the keys and our sums (a sum itself, or tanh of one).
bool TargetFits(PlannerInfo *root, PathTarget *target, const Relids sides[2], Shape *s) {
  ListCell *lc;
  int i = 0;
  foreach (lc, target->exprs) {
    Node *e = static_cast<Node *>(lfirst(lc));
    Index ref = target->sortgrouprefs ? target->sortgrouprefs[i] : 0;
    i++;
    // A GROUP BY key, or a column that depends on one (GroupKeys). Other
    // entries with a sortgroupref are ORDER BY's or DISTINCT's: over the
    // keys and sums as any other.
    if (ref != 0 && get_sortgroupref_clause_noerr(ref, root->parse->groupClause)) continue;
    if (list_member(s->gexprs, e)) continue;
    SumsCtx ctx{root, sides, s, false};
    if (NotOverSums(e, &ctx)) {
      if (!ctx.refused) No("an output column that is neither a GROUP BY key nor an expression of the keys and sums");
      return false;
    }
    if (contain_volatile_functions(e)) return No("a volatile output column");
  }
  return s->aggrefs != NIL || No("no sum");
}

// Whether n is computed from the node's scan tuple alone: its group keys,
// its sums, and row_number() OVER () of the window `winref`.
struct NumberCtx {
  List *gexprs, *aggrefs, *wfuncs;
  Index winref;
};
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

// The distinct WindowFuncs of n, into ctx->wfuncs.
bool WindowFuncs(Node *n, NumberCtx *ctx) {
  if (!n) return false;
  if (IsA(n, WindowFunc)) {
    ctx->wfuncs = list_append_unique(ctx->wfuncs, n);
    return false;
  }
  return expression_tree_walker(n, reinterpret_cast<bool (*)()>(WindowFuncs), ctx);
}

// row_number() OVER () over the node's groups, numbered by the node as it
// emits them (without ORDER BY, any order is row_number()'s), instead of a
// WindowAgg over its output: a program numbers a saved aggregate's groups
// so where its keys cannot be its rid (ops/aggregate.cpp). The matmul's 80k
// groups: 108 -> 75 ms for the saved product (measured). The path is the
// node's, with the window's target and a WindowAgg over its fallback.
void NumberGroups(PlannerInfo *root, RelOptInfo *input_rel, RelOptInfo *output_rel) {
  Query *parse = root->parse;
  if (list_length(parse->windowClause) != 1) return;
  WindowClause *wc = linitial_node(WindowClause, parse->windowClause);
  if (wc->partitionClause || wc->orderClause) return;
  CustomPath *node = nullptr;
  ListCell *lc;
  foreach (lc, input_rel->pathlist) {
    Path *x = static_cast<Path *>(lfirst(lc));
    if (IsA(x, CustomPath) && reinterpret_cast<CustomPath *>(x)->methods == &ddx::pg::kContractionPathMethods)
      node = reinterpret_cast<CustomPath *>(x);
  }
  // (the window's output target, as its WindowAgg paths have it)
  PathTarget *target = nullptr;
  foreach (lc, output_rel->pathlist)
    if (IsA(lfirst(lc), WindowAggPath)) target = static_cast<Path *>(lfirst(lc))->pathtarget;
  if (!node || !target || contain_volatile_functions(reinterpret_cast<Node *>(target->exprs))) return;
  NumberCtx ctx{static_cast<List *>(list_nth(node->custom_private, kGroupExprs)),
                static_cast<List *>(list_nth(node->custom_private, kNPriv)), NIL, wc->winref};
  if (NotOverGroups(reinterpret_cast<Node *>(target->exprs), &ctx) || !ctx.wfuncs) return;
  CustomPath *cp = makeNode(CustomPath);
  *cp = *node;
  cp->path.parent = output_rel;
  cp->path.pathtarget = target;
  cp->custom_private = list_copy(node->custom_private);
  list_nth_cell(cp->custom_private, kNumbered)->ptr_value = makeInteger(1);
  Path *fallback = reinterpret_cast<Path *>(create_windowagg_path(
      root, output_rel, static_cast<Path *>(lthird(node->custom_paths)), target, ctx.wfuncs, wc, NIL, true));
  cp->custom_paths = list_make3(linitial(node->custom_paths), lsecond(node->custom_paths), fallback);
  cp->path.parallel_safe = node->path.parallel_safe && fallback->parallel_safe;
  add_path(output_rel, &cp->path);
}

void ContractionUpperPaths(PlannerInfo *root, UpperRelationKind stage, RelOptInfo *input_rel, RelOptInfo *output_rel,
                           void *extra) {
  if (prev_upper_hook) prev_upper_hook(root, stage, input_rel, output_rel, extra);
  if (mode == kOff || (mode == kPrograms && !in_program)) return;
  if (stage == UPPERREL_WINDOW) return NumberGroups(root, input_rel, output_rel);
  if (stage != UPPERREL_GROUP_AGG) return;
  Query *parse = root->parse;
  auto *gx = static_cast<GroupPathExtraData *>(extra);
  if (parse->groupingSets || parse->havingQual || parse->hasTargetSRFs || gx->patype != PARTITIONWISE_AGGREGATE_NONE ||
      input_rel->reloptkind != RELOPT_JOINREL || !output_rel->pathlist) {
    No("not one grouping of a join (or HAVING, grouping sets, set-returning functions)");
    return;
  }
  RelOptInfo *rels[2];
  Relids sides[2];
  Shape shape;
  List *splits = JoinSplits(root, input_rel);
  if (!splits) {
    No("not an inner join");
    return;
  }
  ListCell *ls;
  bool fits = false;
  foreach (ls, splits) {
    Split *x = static_cast<Split *>(lfirst(ls));
    bool ok = true;
    for (int s = 0; s < 2; s++) {
      rels[s] = x->rels[s];
      sides[s] = rels[s]->relids;
      if (!rels[s]->cheapest_total_path || rels[s]->cheapest_total_path->param_info) ok = false;
    }
    if (!ok) {
      No("a side without an unparameterized path");
      continue;
    }
    shape = Shape();
    if (JoinKeys(root, x->clauses, sides, &shape) && GroupKeys(root, sides, &shape) && KeyQuals(&shape) &&
        TargetFits(root, output_rel->reltarget, sides, &shape)) {
      fits = true;
      break;
    }
  }
  if (!fits) return;
  // The build side: the one with fewer bytes.
  double bytes[2];
  for (int s = 0; s < 2; s++) bytes[s] = rels[s]->rows * Max(rels[s]->reltarget->width, 8);
  int b = bytes[0] <= bytes[1] ? 0 : 1;
  // (MayRaise) A side whose expressions may raise is probed, not built.
  // Where both sides' may, a side whose group keys cannot is built with its
  // factors computed on each row's first pair, as late as PostgreSQL
  // computes them (LazyFactors); where both sides' keys may, the query keeps
  // PostgreSQL's plan.
  bool fraise[2], kraise[2] = {false, false};
  for (int s = 0; s < 2; s++) fraise[s] = MayRaise(reinterpret_cast<Node *>(shape.factors[s]));
  ListCell *lg, *lgs;
  forboth(lg, shape.gexprs, lgs, shape.gside) kraise[lfirst_int(lgs)] =
      kraise[lfirst_int(lgs)] || MayRaise(static_cast<Node *>(lfirst(lg)));
  bool raises[2] = {fraise[0] || kraise[0], fraise[1] || kraise[1]};
  if (raises[b] && !raises[1 - b]) b = 1 - b;
  if (raises[b] && kraise[b]) b = 1 - b;
  if (kraise[b]) {
    No("a GROUP BY key on each side that may raise an error (not leakproof): the build side's are computed for "
       "rows that join nothing");
    return;
  }
  bool lazy = fraise[b];
  if (shape.extra && kraise[1 - b]) {
    // (the streamed side's group keys are computed on a row's first pair,
    // before the key conditions that read them)
    No("a GROUP BY key that may raise an error beside a join condition on the keys: PostgreSQL computes it only "
       "for the pairs the condition keeps");
    return;
  }
  int p = 1 - b;

  // PostgreSQL's own aggregate over the join, for when memory runs out.
  AggClauseCosts costs;
  MemSet(&costs, 0, sizeof costs);
  get_agg_clause_costs(root, AGGSPLIT_SIMPLE, &costs);
  Path *best = nullptr;
  ListCell *lc;
  foreach (lc, output_rel->pathlist) {
    Path *x = static_cast<Path *>(lfirst(lc));
    if (!best || x->total_cost < best->total_cost) best = x;
  }
  double groups = best->rows;
  Path *fallback = reinterpret_cast<Path *>(create_agg_path(
      root, output_rel, input_rel->cheapest_total_path, output_rel->reltarget,
      parse->groupClause ? AGG_HASHED : AGG_PLAIN, AGGSPLIT_SIMPLE, parse->groupClause, NIL, &costs, groups));

  Path *bp = rels[b]->cheapest_total_path, *pp = rels[p]->cheapest_total_path;
  CustomPath *cp = makeNode(CustomPath);
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
  int nagg = list_length(shape.aggrefs);
  // The pairs the equalities join: the join's rows before its other
  // conditions.
  double pairs = input_rel->rows;
  if (shape.extra_ri) {
    Selectivity sel = clauselist_selectivity(root, shape.extra_ri, 0, JOIN_INNER, nullptr);
    pairs /= Max(sel, 1e-4);
  }
  // Costs as the hash join and hash aggregate price the same work, without
  // their per-join-row tuple costs: each input row's keys hashed, each pair
  // one multiplication and addition per sum, each group a tuple.
  cp->path.startup_cost = bp->total_cost + pp->total_cost +
                          cpu_operator_cost * (bp->rows + pp->rows) * Max(list_length(shape.keys[b]), 1) +
                          cpu_operator_cost * pairs * nagg;
  cp->path.total_cost = cp->path.startup_cost + cpu_tuple_cost * groups;
  cp->path.pathkeys = NIL;
  cp->flags = 0;
  cp->custom_paths = list_make3(bp, pp, fallback);
  List *priv = NIL;
  const int order[2] = {b, p};
  for (int side : order) {  // (a side's relids, as a list: a Bitmapset is not a Node here)
    List *ids = NIL;
    int k = -1;
    while ((k = bms_next_member(sides[side], k)) >= 0) ids = lappend_int(ids, k);
    priv = lappend(priv, ids);
  }
  priv = lappend(priv, shape.keys[b]);
  priv = lappend(priv, shape.keys[p]);
  priv = lappend(priv, shape.eq);
  priv = lappend(priv, shape.hash[b]);
  priv = lappend(priv, shape.hash[p]);
  priv = lappend(priv, shape.coll);
  List *pf = NIL;  // 1 where the clause's left operand is the probe side's
  foreach (lc, shape.probe_first) pf = lappend_int(pf, (b == 0) ? lfirst_int(lc) : 1 - lfirst_int(lc));
  priv = lappend(priv, pf);
  priv = lappend(priv, shape.gexprs);
  List *gs = NIL;  // 0 build, 1 probe
  foreach (lc, shape.gside) gs = lappend_int(gs, lfirst_int(lc) == b ? 0 : 1);
  priv = lappend(priv, gs);
  priv = lappend(priv, shape.geq);
  priv = lappend(priv, shape.ghash);
  priv = lappend(priv, shape.gcoll);
  priv = lappend(priv, shape.factors[b]);
  priv = lappend(priv, shape.factors[p]);
  List *flags = NIL;  // (a select's override side: from the Shape's side 1 to the probe side)
  foreach (lc, shape.null_zero) {
    int f = lfirst_int(lc);
    if (f & kAccSelect) f = (f & ~kAccSelectSide1) | (((f & kAccSelectSide1) ? 1 : 0) == p ? kAccSelectProbe : 0);
    flags = lappend_int(flags, f);
  }
  priv = lappend(priv, flags);
  priv = lappend(priv, shape.extra);
  priv = lappend(priv, makeInteger(0));
  priv = lappend(priv, makeInteger(lazy ? 1 : 0));
  priv = lappend(priv, shape.aggrefs);
  cp->custom_private = priv;
  cp->methods = &ddx::pg::kContractionPathMethods;
  elog(DEBUG1, "ddx contraction considered: cost %.1f against %.1f", cp->path.total_cost, best->total_cost);
  add_path(output_rel, &cp->path);
}

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

}  // namespace

// --- execution -----------------------------------------------------------------

namespace {

// Interned tuples of key values: id -> values, found by the keys' own hash
// and equality functions. Arrays in the node's context.
struct KeyTable {
  int nkeys;
  bool integers;  // every key compared by IntegerEquality: Datums hashed and compared
  FmgrInfo *hash, *eq;
  Oid *coll;
  int16 *typlen;
  bool *byval;
  uint32 n, cap;  // entries, and room for them
  Datum *vals;    // cap * nkeys
  bool *nulls;
  uint32 *hashes;
  int32 *slots;  // open addressing, -1 empty
  uint32 nslots;
  int32 last;  // the id found last (integers): rows of a group come together
  // One integer key of small values (0 <= v < dcap): its id at dmap[v], -1
  // none, without hashing; grown while the values stay within a few times
  // the keys' count (the matmul's backward: x's 16 column ids met in turn,
  // KeyFind 5% of it; a probe row's join key, looked up in jk through it,
  // 8%). Every key below dcap is in dmap: a miss there is a miss.
  int32 *dmap;
  uint32 dcap;
};

struct Acc {  // the groups: a pair of ids and one sum per aggregate
  uint32 n, cap;
  uint32 *ida, *idb;
  double *sum;  // cap * nagg
  bool *has;
  bool *ok;         // the join's other conditions hold for the group
  uint32 rejected;  // groups where they do not
  uint64 *keys;     // open addressing: (ida << 32 | idb) + 1, 0 empty
  uint32 *at;
  uint32 nslots;
};

// Expressions over a child's tuple (OUTER_VAR), evaluated per input row.
// Where each is a plain Var of the child's output or a constant (the other
// side's 1 of a count or of a sum of one side), its value is read from the
// slot or the Const, not run through ExecEvalExpr: the matmul's 160k probe
// rows evaluated three lists of Vars each (perf: Eval 3% of the forward).
struct Exprs {
  List *states;  // ExprStates
  int n;
  bool direct;      // every one a Var or a Const
  AttrNumber *att;  // per expression: its attribute, 0 for a Const
  Datum *cval;      // per expression: a Const's value
  bool *cnull;
  AttrNumber natts;  // the highest attribute
};

struct State {
  CustomScanState css;
  MemoryContext cxt;
  Exprs bkeys, pkeys, bfactors, pfactors;
  Exprs gx[2];       // the group keys, per side
  ExprState *quals;  // the other join conditions, over the scan tuple's keys
  int nk, ng, nagg;
  int *gside, *gpos;  // per group key: its side, its place among that side's keys
  FmgrInfo *eq, *bhash, *phash;
  Oid *kcoll;
  bool *probe_first;
  bool *datum_eq;  // per join key: equal exactly when the Datums are (IntegerEquality)
  bool int_keys;   // every join key so: the build rows in runs (jk)
  // Accumulators (nagg of them, the "sums" below): one per output
  // aggregate, three for an avg (AccFlags); nout outputs.
  int nout;
  bool *null_zero;  // per accumulator: of COALESCE(f * g, 0)
  bool *sel;        // per accumulator: a guarded value (SelectGuard), not a product
  bool *sel_probe;  // ... whose override factor is the probe side's
  bool *f4;         // per accumulator: of float4mul (a sum's additions in float4 too)
  bool *bf4, *pf4;  // per accumulator: its build (probe) factor is a float4
  uint8 *kind;      // per accumulator: 0 a sum, else kAccCount, kAccAvg or kAccFollow
  bool plain;       // every accumulator a float8 sum (the pairing loop's fast path)
  int16 *klen;      // the build side's join keys' types
  bool *kbyval;
  // the build side's rows
  uint32 nrows, rowcap;
  uint32 *rhash, *rgid;
  int32 *rnext;
  Datum *rkeys;  // rowcap * nk
  double *rf;    // rowcap * nagg
  bool *rfnull;
  // Lazy factors (kLazyFactors): each build row's child tuple (bnatts
  // values), its factors computed on its first pair (rdone) in lec.
  bool lazy;
  int bnatts;
  Datum *rvals;  // rowcap * bnatts
  bool *rvnull;
  bool *rdone;
  TupleDesc btd;
  TupleTableSlot *lslot;
  ExprContext *lec;
  Datum *lfv;
  bool *lfn;
  int32 *buckets;
  uint32 nbuckets;
  // Integer join keys (int_keys): the build rows in runs of one key, in
  // the key's order of first appearance; a probe row finds its key's id in
  // jk (its dmap where the key is one small integer) and pairs with
  // run[id] .. run[id + 1] - 1, one lookup per probe row and none per pair (the matmul's 1.28M pairs walked a bucket
  // chain, each compared by hash and key).
  KeyTable jk;
  uint32 *rkid;    // per build row: its key's id (before the runs are formed)
  uint32 *run;     // jk.n + 1 starts
  bool *run_null;  // per run: a NULL factor in one of its rows
  KeyTable g[2];   // group ids of the build and the probe side
  Acc acc;
  // Dense groups (Dense*): per probe group id, a row of one cell per build
  // group id, while the build side has few groups.
  bool dense;
  uint32 na;               // build groups (a dense row's cells)
  int32 *drow;             // probe group id -> its row's first cell, -1 none
  uint32 ndrow, drowcap;   // probe group ids with a slot, and room for them
  uint32 ncells, cellcap;  // cells of the rows, and room for them
  double *dsum;            // ncells * nagg
  bool *dhas;              // ncells * nagg
  uint8 *dstate;           // per cell: 0 no pair yet, 1 a group, 2 rejected by the key conditions
  uint64 touched;          // cells with a pair
  const char *how;         // for EXPLAIN ANALYZE: "dense", "hash", "dense, then hash"
  bool numbered;           // row_number() OVER () as the scan tuple's last column (NumberGroups)
  int64 rownum;            // the last group's
  bool built, fellback;
  bool emitted;  // a row returned since the last (re)start
  uint32 emit;
  double pairs;
  size_t limit, peak;
  PlanState *fallback;
};

void *Alloc(MemoryContext cxt, Size n) { return MemoryContextAllocHuge(cxt, Max(n, 1)); }

// Room for `need` elements of `elem` bytes in *p (of *cap), doubling.
template <typename T>
void Reserve(MemoryContext cxt, T **p, uint32 cap, uint32 newcap, size_t per) {
  T *q = static_cast<T *>(Alloc(cxt, static_cast<Size>(newcap) * per * sizeof(T)));
  if (*p) {
    memcpy(q, *p, static_cast<Size>(cap) * per * sizeof(T));
    pfree(*p);
  }
  *p = q;
}

inline uint32 Mix64(uint64 k);

// A hash of Datums that are equal exactly when their values are (integers:
// IntegerEquality), without a function call.
uint32 HashDatums(int n, const Datum *v, const bool *isnull) {
  uint32 h = 0;
  for (int i = 0; i < n; i++) {
    h = (h << 1) | (h >> 31);
    if (!isnull[i]) h ^= Mix64(static_cast<uint64>(v[i]) + 1);
  }
  return murmurhash32(h);
}

// Whether an equality function holds exactly when its arguments' Datums are
// equal: int4 and int8 values are Datums of the value itself, sign-extended
// (Int32GetDatum, Int64GetDatum on a 64-bit Datum), so int4eq, int8eq,
// int48eq and int84eq do.
bool IntegerEquality(Oid f) {
  StaticAssertStmt(SIZEOF_DATUM == 8, "ddx contraction: a 64-bit Datum");
  return f == F_INT4EQ || f == F_INT8EQ || f == F_INT48EQ || f == F_INT84EQ;
}

uint32 HashKeys(FmgrInfo *fns, const Oid *coll, int n, const Datum *v, const bool *isnull) {
  uint32 h = 0;
  for (int i = 0; i < n; i++) {
    h = (h << 1) | (h >> 31);
    if (!isnull[i]) h ^= DatumGetUInt32(FunctionCall1Coll(&fns[i], coll[i], v[i]));
  }
  return murmurhash32(h);
}

void KeyInit(MemoryContext cxt, KeyTable *t) {
  t->n = t->cap = 0;
  t->vals = nullptr;
  t->nulls = nullptr;
  t->hashes = nullptr;
  t->nslots = 64;
  t->slots = static_cast<int32 *>(Alloc(cxt, sizeof(int32) * t->nslots));
  memset(t->slots, -1, sizeof(int32) * t->nslots);
  t->last = -1;
  t->dmap = nullptr;
  t->dcap = 0;
}

// The id of the key tuple (v, isnull), or -1 where it is not in the table
// (*h its hash and *slot the empty slot it would take).
int32 KeyFind(KeyTable *t, const Datum *v, const bool *isnull, uint32 *hp, uint32 *slot) {
  int nk = t->nkeys;
  // Rows of one group tend to come together (a table's rows in the order
  // they were written, x(i, k) by i): the last id is tried first, without
  // hashing (the matmul's 160k rows of x, 10k groups; KeyIntern and its
  // hash were 9% of the forward, perf).
  if (t->integers && t->last >= 0) {
    bool same = true;
    for (int k = 0; k < nk && same; k++) {
      bool an = t->nulls[t->last * nk + k];
      same = an == isnull[k] && (an || t->vals[t->last * nk + k] == v[k]);
    }
    if (same) return t->last;
  }
  if (t->dcap > 0 && !isnull[0] && static_cast<uint64>(v[0]) < t->dcap) {
    int32 id = t->dmap[static_cast<uint64>(v[0])];
    if (id >= 0) {
      t->last = id;
      return id;
    }
  }
  uint32 h = t->integers ? HashDatums(nk, v, isnull) : HashKeys(t->hash, t->coll, nk, v, isnull);
  uint32 mask = t->nslots - 1, i = h & mask;
  for (;; i = (i + 1) & mask) {
    int32 id = t->slots[i];
    if (id < 0) break;
    if (t->hashes[id] != h) continue;
    bool same = true;
    for (int k = 0; k < nk && same; k++) {
      bool an = t->nulls[id * nk + k];
      if (an != isnull[k])
        same = false;
      else if (!an)
        same = t->integers ? t->vals[id * nk + k] == v[k]
                           : DatumGetBool(FunctionCall2Coll(&t->eq[k], t->coll[k], t->vals[id * nk + k], v[k]));
    }
    if (same) {
      t->last = id;
      return id;
    }
  }
  *hp = h;
  *slot = i;
  return -1;
}

// The id of the key tuple (v, isnull), interned if new.
uint32 KeyIntern(MemoryContext cxt, KeyTable *t, const Datum *v, const bool *isnull) {
  int nk = t->nkeys;
  if (nk == 0) {
    t->n = 1;
    return 0;
  }
  uint32 h = 0, i = 0;
  int32 found = KeyFind(t, v, isnull, &h, &i);
  if (found >= 0) return static_cast<uint32>(found);
  if (t->n == t->cap) {
    uint32 c = Max(64u, t->cap * 2);
    Reserve(cxt, &t->vals, t->cap, c, nk);
    Reserve(cxt, &t->nulls, t->cap, c, nk);
    Reserve(cxt, &t->hashes, t->cap, c, 1);
    t->cap = c;
  }
  uint32 id = t->n++;
  MemoryContext old = MemoryContextSwitchTo(cxt);
  for (int k = 0; k < nk; k++) {
    t->nulls[id * nk + k] = isnull[k];
    t->vals[id * nk + k] = isnull[k] ? 0 : datumCopy(v[k], t->byval[k], t->typlen[k]);
  }
  MemoryContextSwitchTo(old);
  t->hashes[id] = h;
  t->slots[i] = static_cast<int32>(id);
  t->last = static_cast<int32>(id);
  if (t->integers && nk == 1 && !isnull[0]) {
    uint64 u = static_cast<uint64>(v[0]);
    if (u < t->dcap) {
      t->dmap[u] = static_cast<int32>(id);
    } else if (u < (1u << 20) && u < 8 * (static_cast<uint64>(t->n) + 128)) {
      uint32 c = Max(256u, t->dcap);
      while (c <= u) c *= 2;
      if (t->dmap) pfree(t->dmap);
      t->dmap = static_cast<int32 *>(Alloc(cxt, sizeof(int32) * c));
      memset(t->dmap, -1, sizeof(int32) * c);
      for (uint32 x = 0; x < t->n; x++)
        if (!t->nulls[x] && static_cast<uint64>(t->vals[x]) < c)
          t->dmap[static_cast<uint64>(t->vals[x])] = static_cast<int32>(x);
      t->dcap = c;
    }
  }
  if (t->n * 2 > t->nslots) {  // grow the slots
    uint32 ns = t->nslots * 2;
    int32 *s = static_cast<int32 *>(Alloc(cxt, sizeof(int32) * ns));
    memset(s, -1, sizeof(int32) * ns);
    for (uint32 x = 0; x < t->n; x++) {
      uint32 j = t->hashes[x] & (ns - 1);
      while (s[j] >= 0) j = (j + 1) & (ns - 1);
      s[j] = static_cast<int32>(x);
    }
    pfree(t->slots);
    t->slots = s;
    t->nslots = ns;
  }
  return id;
}

void AccInit(MemoryContext cxt, Acc *a) {
  memset(a, 0, sizeof *a);
  a->nslots = 1024;
  a->keys = static_cast<uint64 *>(Alloc(cxt, sizeof(uint64) * a->nslots));
  a->at = static_cast<uint32 *>(Alloc(cxt, sizeof(uint32) * a->nslots));
  memset(a->keys, 0, sizeof(uint64) * a->nslots);
}

inline uint32 Mix64(uint64 k) {
  k ^= k >> 33;
  k *= UINT64CONST(0xff51afd7ed558ccd);
  k ^= k >> 33;
  return static_cast<uint32>(k);
}

// The accumulator of the group (ida, idb), created if new (*created).
uint32 AccFind(MemoryContext cxt, Acc *a, int nagg, uint32 ida, uint32 idb, bool *created) {
  uint64 key = ((static_cast<uint64>(ida) << 32) | idb) + 1;
  uint32 mask = a->nslots - 1, i = Mix64(key) & mask;
  *created = false;
  for (; a->keys[i] != 0; i = (i + 1) & mask)
    if (a->keys[i] == key) return a->at[i];
  *created = true;
  if (a->n == a->cap) {
    uint32 c = Max(256u, a->cap * 2);
    Reserve(cxt, &a->ida, a->cap, c, 1);
    Reserve(cxt, &a->idb, a->cap, c, 1);
    Reserve(cxt, &a->sum, a->cap, c, nagg);
    Reserve(cxt, &a->has, a->cap, c, nagg);
    Reserve(cxt, &a->ok, a->cap, c, 1);
    a->cap = c;
  }
  uint32 at = a->n++;
  a->ok[at] = true;
  a->ida[at] = ida;
  a->idb[at] = idb;
  for (int k = 0; k < nagg; k++) {
    a->sum[at * nagg + k] = 0;
    a->has[at * nagg + k] = false;
  }
  a->keys[i] = key;
  a->at[i] = at;
  if (a->n * 2 > a->nslots) {
    uint32 ns = a->nslots * 2;
    uint64 *keys = static_cast<uint64 *>(Alloc(cxt, sizeof(uint64) * ns));
    uint32 *ats = static_cast<uint32 *>(Alloc(cxt, sizeof(uint32) * ns));
    memset(keys, 0, sizeof(uint64) * ns);
    for (uint32 x = 0; x < a->nslots; x++) {
      if (!a->keys[x]) continue;
      uint32 j = Mix64(a->keys[x]) & (ns - 1);
      while (keys[j]) j = (j + 1) & (ns - 1);
      keys[j] = a->keys[x];
      ats[j] = a->at[x];
    }
    pfree(a->keys);
    pfree(a->at);
    a->keys = keys;
    a->at = ats;
    a->nslots = ns;
  }
  return at;
}

// Evaluates `e` over the outer tuple into v, n.
inline void Eval(const Exprs &e, ExprContext *ec, Datum *v, bool *n) {
  if (e.direct) {
    TupleTableSlot *slot = ec->ecxt_outertuple;
    if (e.natts > 0) slot_getsomeattrs(slot, e.natts);
    for (int i = 0; i < e.n; i++) {
      AttrNumber a = e.att[i];
      v[i] = a > 0 ? slot->tts_values[a - 1] : e.cval[i];
      n[i] = a > 0 ? slot->tts_isnull[a - 1] : e.cnull[i];
    }
    return;
  }
  int i = 0;
  ListCell *lc;
  foreach (lc, e.states) {
    v[i] = ExecEvalExprSwitchContext(static_cast<ExprState *>(lfirst(lc)), ec, &n[i]);
    i++;
  }
}

// Puts the group keys of (ida, idb) into the scan tuple, its sums NULL (to
// be stored by the caller).
void KeysToSlot(State *st, TupleTableSlot *slot, uint32 ida, uint32 idb) {
  ExecClearTuple(slot);
  for (int g = 0; g < st->ng; g++) {
    KeyTable *t = &st->g[st->gside[g]];
    uint32 id = st->gside[g] == 0 ? ida : idb;
    slot->tts_values[g] = t->vals[id * t->nkeys + st->gpos[g]];
    slot->tts_isnull[g] = t->nulls[id * t->nkeys + st->gpos[g]];
  }
  for (int a = 0; a < st->nout; a++) {
    slot->tts_values[st->ng + a] = 0;
    slot->tts_isnull[st->ng + a] = true;
  }
}

// Whether the join's other conditions hold for the group (ida, idb): they
// read its keys alone (KeyQuals), so one test stands for all its pairs. A
// NULL is false, as in a join.
bool QualsHold(State *st, uint32 ida, uint32 idb) {
  CustomScanState *node = &st->css;
  ExprContext *ec = node->ss.ps.ps_ExprContext;
  TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
  KeysToSlot(st, slot, ida, idb);
  ExecStoreVirtualTuple(slot);
  ec->ecxt_scantuple = slot;
  return ExecQual(st->quals, ec);
}

// float8_accum (and float4_accum, whose float4 input is widened), utils/adt/
// float.c, PostgreSQL 15: one value x into (N, Sx, Sxx) at s, empty where
// !has. Sxx is kept as PostgreSQL keeps it only so that its overflow raises
// where PostgreSQL's would (avg reads Sx / N).
void AvgAccum(double *s, bool has, double x) {
  double n0 = has ? s[0] : 0.0, sx0 = has ? s[1] : 0.0, sxx = has ? s[2] : 0.0;
  double n = n0 + 1.0, sx = sx0 + x;
  if (n0 > 0.0) {
    double tmp = x * n - sx;
    sxx += tmp * tmp / (n * n0);
    if (std::isinf(sx) || std::isinf(sxx)) {
      if (!std::isinf(sx0) && !std::isinf(x)) float_overflow_error();
      sxx = get_float8_nan();
    }
  } else if (std::isnan(x) || std::isinf(x)) {
    sxx = get_float8_nan();
  }
  s[0] = n;
  s[1] = sx;
  s[2] = sxx;
}

// A factor's value as a double: a float4 widened exactly (as float48mul and
// float84mul widen it; a float4 product narrows it back exactly).
inline double Factor(Datum d, bool f4) { return f4 ? static_cast<double>(DatumGetFloat4(d)) : DatumGetFloat8(d); }

// Dense groups. After the build, the build side's groups are known; where
// they are few (kDenseMax), each probe group gets a row of one cell per build
// group, and a pair's sum is at row + build group id: no hashing per pair,
// and the pairs of one probe row write to one row. A row costs its cells
// whether they get pairs or not, so where fewer than a quarter of a large
// set of cells has pairs, the cells go to the hash table (Acc) and the rest
// of the probe side is hashed. At the end the groups go to Acc all the same
// (once per group, not per pair), from which they are returned.
constexpr uint32 kDenseMax = 4096;
constexpr uint32 kDenseSparseCheck = 1u << 20;  // cells

void DenseInit(State *st) {
  st->na = st->g[0].n;
  st->dense = st->na > 0 && st->na <= kDenseMax;
  st->how = st->dense ? "dense" : "hash";
  st->drow = nullptr;
  st->ndrow = st->drowcap = st->ncells = st->cellcap = 0;
  st->dsum = nullptr;
  st->dhas = nullptr;
  st->dstate = nullptr;
  st->touched = 0;
}

// Moves the dense cells with pairs into Acc, and leaves dense mode. A
// rejected cell goes too, marked: pairs of it that come after a move to
// the hash table must find it rejected, not test it again and count it twice.
// `last`: the build is over and nothing looks a group up again, so the
// groups are appended without their hash (each pair of ids is in one cell):
// the matmul's 80k groups went through AccFind, 9% of its forward (perf).
void DenseToAcc(State *st, bool last = false) {
  int nagg = st->nagg;
  if (last) {  // (room for every cell with a pair: st->touched of them)
    Acc *a = &st->acc;
    uint32 cells = static_cast<uint32>(st->touched);
    if (a->n + cells > a->cap) {
      uint32 c = Max(256u, a->n + cells);
      Reserve(st->cxt, &a->ida, a->cap, c, 1);
      Reserve(st->cxt, &a->idb, a->cap, c, 1);
      Reserve(st->cxt, &a->sum, a->cap, c, nagg);
      Reserve(st->cxt, &a->has, a->cap, c, nagg);
      Reserve(st->cxt, &a->ok, a->cap, c, 1);
      a->cap = c;
    }
  }
  for (uint32 idb = 0; idb < st->ndrow; idb++) {
    if (st->drow[idb] < 0) continue;
    for (uint32 ida = 0; ida < st->na; ida++) {
      uint32 c = static_cast<uint32>(st->drow[idb]) + ida;
      if (st->dstate[c] == 0) continue;
      bool created;
      uint32 at;
      if (last) {
        at = st->acc.n++;
        st->acc.ida[at] = ida;
        st->acc.idb[at] = idb;
      } else {
        at = AccFind(st->cxt, &st->acc, nagg, ida, idb, &created);
      }
      st->acc.ok[at] = st->dstate[c] == 1;
      if (st->dstate[c] == 2) st->acc.rejected++;
      for (int a = 0; a < nagg; a++) {
        st->acc.sum[at * nagg + a] = st->dsum[c * nagg + a];
        st->acc.has[at * nagg + a] = st->dhas[c * nagg + a];
      }
    }
  }
  if (st->drow) pfree(st->drow);
  if (st->dsum) pfree(st->dsum);
  if (st->dhas) pfree(st->dhas);
  if (st->dstate) pfree(st->dstate);
  st->drow = nullptr;
  st->dsum = nullptr;
  st->dhas = nullptr;
  st->dstate = nullptr;
  st->dense = false;
}

// The first cell of probe group idb's row, made if new; false where the
// cells went to Acc instead (too sparse).
bool DenseRow(State *st, uint32 idb, uint32 *base) {
  MemoryContext cxt = st->cxt;
  if (idb >= st->drowcap) {
    uint32 c = Max(1024u, st->drowcap * 2);
    while (c <= idb) c *= 2;
    Reserve(cxt, &st->drow, st->drowcap, c, 1);
    for (uint32 i = st->drowcap; i < c; i++) st->drow[i] = -1;
    st->drowcap = c;
  }
  if (idb >= st->ndrow) st->ndrow = idb + 1;
  if (st->drow[idb] < 0) {
    if (st->ncells >= kDenseSparseCheck && st->touched * 4 < st->ncells) {
      DenseToAcc(st);
      st->how = "dense, then hash";
      return false;
    }
    if (st->ncells + st->na > st->cellcap) {
      uint32 c = Max(st->na * 64, st->cellcap * 2);
      Reserve(cxt, &st->dsum, st->cellcap, c, st->nagg);
      Reserve(cxt, &st->dhas, st->cellcap, c, st->nagg);
      Reserve(cxt, &st->dstate, st->cellcap, c, 1);
      st->cellcap = c;
    }
    st->drow[idb] = static_cast<int32>(st->ncells);
    memset(&st->dhas[static_cast<size_t>(st->ncells) * st->nagg], 0, static_cast<size_t>(st->na) * st->nagg);
    memset(&st->dstate[st->ncells], 0, st->na);
    st->ncells += st->na;
  }
  *base = static_cast<uint32>(st->drow[idb]);
  return true;
}

bool OverLimit(State *st) {
  size_t used = MemoryContextMemAllocated(st->cxt, true);
  if (used > st->peak) st->peak = used;
  return used > st->limit;
}

// A build row's factors, on its first pair (kLazyFactors): from its child
// tuple's values, kept at the build. PostgreSQL computes an aggregate's
// argument only for the join's rows, after the join's other conditions: so
// does this, called for a pair the key conditions kept.
void LazyFactors(State *st, uint32 r) {
  ExprContext *lec = st->lec;
  ResetExprContext(lec);
  TupleTableSlot *s = st->lslot;
  ExecClearTuple(s);
  memcpy(s->tts_values, &st->rvals[static_cast<Size>(r) * st->bnatts], sizeof(Datum) * st->bnatts);
  memcpy(s->tts_isnull, &st->rvnull[static_cast<Size>(r) * st->bnatts], st->bnatts);
  ExecStoreVirtualTuple(s);
  lec->ecxt_outertuple = s;
  Eval(st->bfactors, lec, st->lfv, st->lfn);
  for (int a = 0; a < st->nagg; a++) {
    st->rfnull[r * st->nagg + a] = st->lfn[a];
    st->rf[r * st->nagg + a] = st->lfn[a] ? 0 : Factor(st->lfv[a], st->bf4[a]);
  }
  st->rdone[r] = true;
}

// Reads the build side and streams the probe side into the groups; false
// when memory ran past the limit (nothing returned yet).
bool Build(State *st) {
  CustomScanState *node = &st->css;
  ExprContext *ec = node->ss.ps.ps_ExprContext;
  PlanState *bps = static_cast<PlanState *>(linitial(node->custom_ps));
  PlanState *pps = static_cast<PlanState *>(lsecond(node->custom_ps));
  MemoryContext cxt = st->cxt;
  int nk = st->nk, nagg = st->nagg;
  Datum *kv = static_cast<Datum *>(Alloc(cxt, sizeof(Datum) * (nk + 1)));
  bool *kn = static_cast<bool *>(Alloc(cxt, nk + 1));
  Datum *gv = static_cast<Datum *>(Alloc(cxt, sizeof(Datum) * (st->ng + 1)));
  bool *gn = static_cast<bool *>(Alloc(cxt, st->ng + 1));
  Datum *fv = static_cast<Datum *>(Alloc(cxt, sizeof(Datum) * (nagg + 1)));
  bool *fn = static_cast<bool *>(Alloc(cxt, nagg + 1));
  KeyInit(cxt, &st->g[0]);
  KeyInit(cxt, &st->g[1]);
  AccInit(cxt, &st->acc);
  bool runs = st->int_keys;
  if (runs) {
    KeyTable *t = &st->jk;
    memset(t, 0, sizeof *t);
    t->nkeys = nk;
    t->integers = true;
    t->typlen = st->klen;
    t->byval = st->kbyval;
    KeyInit(cxt, t);
  }
  st->nrows = st->rowcap = 0;
  st->rhash = st->rgid = st->rkid = st->run = nullptr;
  st->rnext = nullptr;
  st->rkeys = nullptr;
  st->rf = nullptr;
  st->rfnull = st->run_null = nullptr;
  st->rvals = nullptr;
  st->rvnull = st->rdone = nullptr;
  st->pairs = 0;

  uint64 count = 0;
  for (;;) {
    TupleTableSlot *slot = ExecProcNode(bps);
    if (TupIsNull(slot)) break;
    if ((++count & 1023) == 0) {
      CHECK_FOR_INTERRUPTS();
      if (OverLimit(st)) return false;
    }
    ResetExprContext(ec);
    ec->ecxt_outertuple = slot;
    Eval(st->bkeys, ec, kv, kn);
    bool null_key = false;
    for (int k = 0; k < nk; k++) null_key = null_key || kn[k];
    if (null_key) continue;  // a strict equality never holds
    Eval(st->gx[0], ec, gv, gn);
    uint32 gid = KeyIntern(cxt, &st->g[0], gv, gn);
    if (!st->lazy) Eval(st->bfactors, ec, fv, fn);
    if (st->nrows == st->rowcap) {
      uint32 c = Max(1024u, st->rowcap * 2);
      if (runs) {
        Reserve(cxt, &st->rkid, st->rowcap, c, 1);
      } else {
        Reserve(cxt, &st->rhash, st->rowcap, c, 1);
        Reserve(cxt, &st->rnext, st->rowcap, c, 1);
        Reserve(cxt, &st->rkeys, st->rowcap, c, nk);
      }
      Reserve(cxt, &st->rgid, st->rowcap, c, 1);
      Reserve(cxt, &st->rf, st->rowcap, c, nagg);
      Reserve(cxt, &st->rfnull, st->rowcap, c, nagg);
      if (st->lazy) {
        Reserve(cxt, &st->rvals, st->rowcap, c, st->bnatts);
        Reserve(cxt, &st->rvnull, st->rowcap, c, st->bnatts);
        Reserve(cxt, &st->rdone, st->rowcap, c, 1);
      }
      st->rowcap = c;
    }
    uint32 r = st->nrows++;
    if (runs) {
      st->rkid[r] = KeyIntern(cxt, &st->jk, kv, kn);
    } else {
      st->rhash[r] = HashKeys(st->bhash, st->kcoll, nk, kv, kn);
      MemoryContext old = MemoryContextSwitchTo(cxt);
      for (int k = 0; k < nk; k++) st->rkeys[r * nk + k] = datumCopy(kv[k], st->kbyval[k], st->klen[k]);
      MemoryContextSwitchTo(old);
    }
    st->rgid[r] = gid;
    if (st->lazy) {  // the row's values, its factors computed on its first pair
      slot_getallattrs(slot);
      MemoryContext old = MemoryContextSwitchTo(cxt);
      for (int x = 0; x < st->bnatts; x++) {
        Form_pg_attribute att = TupleDescAttr(st->btd, x);
        bool isnull = slot->tts_isnull[x];
        st->rvnull[r * st->bnatts + x] = isnull;
        st->rvals[r * st->bnatts + x] = isnull ? 0 : datumCopy(slot->tts_values[x], att->attbyval, att->attlen);
      }
      MemoryContextSwitchTo(old);
      st->rdone[r] = false;
      for (int a = 0; a < nagg; a++) {
        st->rfnull[r * nagg + a] = false;
        st->rf[r * nagg + a] = 0;
      }
      continue;
    }
    for (int a = 0; a < nagg; a++) {
      st->rfnull[r * nagg + a] = fn[a];
      st->rf[r * nagg + a] = fn[a] ? 0 : Factor(fv[a], st->bf4[a]);
    }
  }
  if (runs && st->nrows > 0) {  // the rows by key: a counting sort, stable
    uint32 nkid = st->jk.n;
    uint32 *start = static_cast<uint32 *>(Alloc(cxt, sizeof(uint32) * (nkid + 1)));
    memset(start, 0, sizeof(uint32) * (nkid + 1));
    for (uint32 r = 0; r < st->nrows; r++) start[st->rkid[r] + 1]++;
    for (uint32 k = 0; k < nkid; k++) start[k + 1] += start[k];
    uint32 *at = static_cast<uint32 *>(Alloc(cxt, sizeof(uint32) * (nkid + 1)));
    memcpy(at, start, sizeof(uint32) * (nkid + 1));
    uint32 *gid = static_cast<uint32 *>(Alloc(cxt, sizeof(uint32) * (st->nrows + 1)));
    double *f = static_cast<double *>(Alloc(cxt, sizeof(double) * (static_cast<Size>(st->nrows) * nagg + 1)));
    bool *fnull = static_cast<bool *>(Alloc(cxt, static_cast<Size>(st->nrows) * nagg + 1));
    st->run_null = static_cast<bool *>(Alloc(cxt, nkid + 1));
    memset(st->run_null, 0, nkid + 1);
    int bn = st->lazy ? st->bnatts : 0;
    Datum *vals = st->lazy ? static_cast<Datum *>(Alloc(cxt, sizeof(Datum) * (static_cast<Size>(st->nrows) * bn + 1)))
                           : nullptr;
    bool *vnull = st->lazy ? static_cast<bool *>(Alloc(cxt, static_cast<Size>(st->nrows) * bn + 1)) : nullptr;
    for (uint32 r = 0; r < st->nrows; r++) {
      uint32 k = st->rkid[r], to = at[k]++;
      gid[to] = st->rgid[r];
      if (bn) {
        memcpy(&vals[static_cast<Size>(to) * bn], &st->rvals[static_cast<Size>(r) * bn], sizeof(Datum) * bn);
        memcpy(&vnull[static_cast<Size>(to) * bn], &st->rvnull[static_cast<Size>(r) * bn], bn);
      }
      for (int a = 0; a < nagg; a++) {
        f[to * nagg + a] = st->rf[r * nagg + a];
        fnull[to * nagg + a] = st->rfnull[r * nagg + a];
        st->run_null[k] = st->run_null[k] || st->rfnull[r * nagg + a];
      }
    }
    pfree(at);
    pfree(st->rkid);
    pfree(st->rgid);
    pfree(st->rf);
    pfree(st->rfnull);
    st->rkid = nullptr;
    st->rgid = gid;
    st->rf = f;
    st->rfnull = fnull;
    st->run = start;
    if (bn) {  // (rdone: all false, in any order)
      pfree(st->rvals);
      pfree(st->rvnull);
      st->rvals = vals;
      st->rvnull = vnull;
    }
  } else if (!runs) {
    uint32 nb = 1;
    while (nb < st->nrows) nb <<= 1;
    st->nbuckets = nb;
    st->buckets = static_cast<int32 *>(Alloc(cxt, sizeof(int32) * nb));
    memset(st->buckets, -1, sizeof(int32) * nb);
    for (uint32 r = 0; r < st->nrows; r++) {
      uint32 b = st->rhash[r] & (nb - 1);
      st->rnext[r] = st->buckets[b];
      st->buckets[b] = static_cast<int32>(r);
    }
  }
  if (OverLimit(st)) return false;

  // Stream the probe side.
  DenseInit(st);
  double *pf = static_cast<double *>(Alloc(cxt, sizeof(double) * (nagg + 1)));
  uint32 gid = 0, base = 0;
  bool pdone = false;  // the probe row's factors computed
  // The probe row's factors: on its first pair, or, with key conditions, on
  // its first pair they keep. PostgreSQL computes an aggregate's argument
  // only for the pairs the join's conditions keep: a factor that raises on a
  // row whose pairs the conditions all reject must not raise.
  auto probe_factors = [&]() {
    Eval(st->pfactors, ec, fv, fn);
    for (int a = 0; a < nagg; a++) pf[a] = fn[a] ? 0 : Factor(fv[a], st->pf4[a]);
    pdone = true;
  };
  // One pair: build row r with the probe row's group gid (its dense row at
  // base) and factors pf, fn. False where memory ran out.
  auto pair = [&](uint32 r) -> bool {
    double *sums;
    bool *hass;
    if (st->dense) {
      uint32 c = base + st->rgid[r];
      if (st->dstate[c] == 0) {
        st->dstate[c] = st->quals && !QualsHold(st, st->rgid[r], gid) ? 2 : 1;
        st->touched++;
      }
      if (st->dstate[c] == 2) return true;
      sums = &st->dsum[static_cast<size_t>(c) * nagg];
      hass = &st->dhas[static_cast<size_t>(c) * nagg];
    } else {
      bool created;
      uint32 at = AccFind(cxt, &st->acc, nagg, st->rgid[r], gid, &created);
      if (created && st->quals && !QualsHold(st, st->rgid[r], gid)) {
        st->acc.ok[at] = false;
        st->acc.rejected++;
      }
      if (!st->acc.ok[at]) return true;
      sums = &st->acc.sum[at * nagg];
      hass = &st->acc.has[at * nagg];
    }
    if (!pdone) probe_factors();                        // (a pair the key conditions kept)
    if (st->lazy && !st->rdone[r]) LazyFactors(st, r);  // (likewise)
    for (int a = 0; a < nagg; a++) {
      uint8 kind = st->kind[a];
      if (kind == kAccFollow) continue;
      if (st->sel[a]) {  // a guarded value: the override's k, else d, else nothing (or COALESCE's 0)
        bool bn = st->rfnull[r * nagg + a], on_probe = st->sel_probe[a];
        double bv = st->rf[r * nagg + a];
        bool on = !(on_probe ? fn[a] : bn), dn = on_probe ? bn : fn[a];
        if (!on && dn && !st->null_zero[a]) continue;
        double term = on ? (on_probe ? pf[a] : bv) : dn ? 0.0 : (on_probe ? bv : pf[a]);
        if (kind == kAccAvg)
          AvgAccum(&sums[a], hass[a], term);
        else
          sums[a] = hass[a] ? float8_pl(sums[a], term) : term;
        hass[a] = true;
        continue;
      }
      bool nul = fn[a] || st->rfnull[r * nagg + a];
      if (nul && !st->null_zero[a]) continue;  // a NULL product: skipped, or COALESCE's 0
      double *s = &sums[a];
      bool *has = &hass[a];
      if (kind == kAccCount) {  // (its factors are 1 or NULL: NotNullOne)
        *s = *has ? *s + 1 : 1;
        *has = true;
        continue;
      }
      double prod;
      if (st->f4[a])  // float4mul: rounded to float4
        prod = nul ? 0.0 : float4_mul(static_cast<float4>(st->rf[r * nagg + a]), static_cast<float4>(pf[a]));
      else
        prod = nul ? 0.0 : float8_mul(st->rf[r * nagg + a], pf[a]);
      if (kind == kAccAvg) {
        AvgAccum(s, *has, prod);  // (Sx's and Sxx's own flags are never read)
      } else if (st->f4[a]) {     // float4pl: the sum rounded to float4
        *s = *has ? float4_pl(static_cast<float4>(*s), static_cast<float4>(prod)) : prod;
      } else {
        *s = *has ? float8_pl(*s, prod) : prod;
      }
      *has = true;
    }
    st->pairs++;
    if ((static_cast<uint64>(st->pairs) & 65535) == 0) {
      CHECK_FOR_INTERRUPTS();
      if (OverLimit(st)) return false;
    }
    return true;
  };
  // The probe row's group, on its first pair (and its factors where no key
  // condition may reject the pair).
  auto probe_row = [&]() {
    Eval(st->gx[1], ec, gv, gn);
    gid = KeyIntern(cxt, &st->g[1], gv, gn);
    pdone = false;
    if (!st->quals) probe_factors();
    if (st->dense) (void)DenseRow(st, gid, &base);
  };
  for (;;) {
    TupleTableSlot *slot = ExecProcNode(pps);
    if (TupIsNull(slot)) break;
    if ((++count & 1023) == 0) {
      CHECK_FOR_INTERRUPTS();
      if (OverLimit(st)) return false;
    }
    if (st->nrows == 0) continue;  // (read to the end all the same: rescans expect it)
    ResetExprContext(ec);
    ec->ecxt_outertuple = slot;
    Eval(st->pkeys, ec, kv, kn);
    bool null_key = false;
    for (int k = 0; k < nk; k++) null_key = null_key || kn[k];
    if (null_key) continue;
    if (runs) {
      int32 kid;
      if (nk == 0) {  // a cross join: every build row in run 0 (KeyIntern)
        kid = 0;
      } else if (st->jk.dcap > 0 && static_cast<uint64>(kv[0]) < st->jk.dcap) {
        kid = st->jk.dmap[static_cast<uint64>(kv[0])];  // (every key below dcap is in dmap)
      } else {
        uint32 h, slot_at;
        kid = KeyFind(&st->jk, kv, kn, &h, &slot_at);
      }
      if (kid < 0) continue;
      uint32 from = st->run[kid], to = st->run[kid + 1];
      probe_row();
      if (st->dense && !st->quals && nagg == 1 && st->plain && !fn[0] && !st->lazy && !st->run_null[kid]) {
        // The common case, without the general pair's branches: one float8
        // sum of factors that are not NULL, into dense cells. float8_mul
        // and float8_pl raise on overflow and underflow as PostgreSQL's do.
        double p = pf[0];
        const uint32 *rg = st->rgid;
        const double *rf = st->rf;
        uint8 *state = st->dstate;
        double *sum = st->dsum;
        bool *has = st->dhas;
        uint64 touched = 0;
        for (uint32 r = from; r < to; r++) {
          uint32 c = base + rg[r];
          double prod = float8_mul(rf[r], p);
          if (state[c] == 0) {
            state[c] = 1;
            touched++;
          }
          // (a cell may have pairs but no sum yet: its earlier pairs' products
          // were NULL, through the general path)
          if (has[c]) {
            sum[c] = float8_pl(sum[c], prod);
          } else {
            sum[c] = prod;
            has[c] = true;
          }
        }
        st->touched += touched;
        uint64 before = static_cast<uint64>(st->pairs);
        st->pairs += to - from;
        if ((before >> 16) != (static_cast<uint64>(st->pairs) >> 16)) {
          CHECK_FOR_INTERRUPTS();
          if (OverLimit(st)) return false;
        }
        continue;
      }
      for (uint32 r = from; r < to; r++)
        if (!pair(r)) return false;
      continue;
    }
    uint32 h = HashKeys(st->phash, st->kcoll, nk, kv, kn);
    bool evaluated = false;
    for (int32 r = st->buckets[h & (st->nbuckets - 1)]; r >= 0; r = st->rnext[r]) {
      if (st->rhash[r] != h) continue;
      bool match = true;
      for (int k = 0; k < nk && match; k++) {
        Datum b = st->rkeys[r * nk + k], p = kv[k];
        if (st->datum_eq[k])
          match = b == p;
        else
          match = DatumGetBool(st->probe_first[k] ? FunctionCall2Coll(&st->eq[k], st->kcoll[k], p, b)
                                                  : FunctionCall2Coll(&st->eq[k], st->kcoll[k], b, p));
      }
      if (!match) continue;
      if (!evaluated) {
        probe_row();
        evaluated = true;
      }
      if (!pair(static_cast<uint32>(r))) return false;
    }
  }
  if (st->dense) DenseToAcc(st, true);
  OverLimit(st);
  return true;
}

}  // namespace

namespace {

Exprs InitExprs(List *exprs, PlanState *ps) {
  Exprs e;
  e.states = NIL;
  e.n = list_length(exprs);
  e.att = static_cast<AttrNumber *>(palloc0(sizeof(AttrNumber) * (e.n + 1)));
  e.cval = static_cast<Datum *>(palloc0(sizeof(Datum) * (e.n + 1)));
  e.cnull = static_cast<bool *>(palloc0(e.n + 1));
  e.natts = 0;
  e.direct = true;
  int i = 0;
  ListCell *lc;
  foreach (lc, exprs) {
    Node *x = static_cast<Node *>(lfirst(lc));
    e.states = lappend(e.states, ExecInitExpr(reinterpret_cast<Expr *>(x), ps));
    if (IsA(x, Const)) {
      e.cval[i] = castNode(Const, x)->constvalue;
      e.cnull[i] = castNode(Const, x)->constisnull;
    } else if (IsA(x, Var) && castNode(Var, x)->varno == OUTER_VAR && castNode(Var, x)->varattno > 0) {
      e.att[i] = castNode(Var, x)->varattno;
      e.natts = Max(e.natts, e.att[i]);
    } else {
      e.direct = false;
    }
    i++;
  }
  return e;
}

// FmgrInfos of a list of function oids, in the query's context.
FmgrInfo *Fns(List *oids) {
  FmgrInfo *f = static_cast<FmgrInfo *>(palloc0(sizeof(FmgrInfo) * (list_length(oids) + 1)));
  ListCell *lc;
  int i = 0;
  foreach (lc, oids) fmgr_info(lfirst_oid(lc), &f[i++]);
  return f;
}

Oid *Oids(List *oids) {
  Oid *o = static_cast<Oid *>(palloc0(sizeof(Oid) * (list_length(oids) + 1)));
  ListCell *lc;
  int i = 0;
  foreach (lc, oids) o[i++] = lfirst_oid(lc);
  return o;
}

Node *CreateState(CustomScan *cs) {
  State *st = reinterpret_cast<State *>(newNode(sizeof(State), T_CustomScanState));
  st->css.methods = &ddx::pg::kContractionExecMethods;
  return reinterpret_cast<Node *>(&st->css);
}

void Begin(CustomScanState *node, EState *estate, int eflags) {
  State *st = reinterpret_cast<State *>(node);
  CustomScan *cs = reinterpret_cast<CustomScan *>(node->ss.ps.plan);
  List *priv = cs->custom_private;
  int child_flags = eflags & ~(EXEC_FLAG_BACKWARD | EXEC_FLAG_MARK);
  node->custom_ps = list_make2(ExecInitNode(static_cast<Plan *>(linitial(cs->custom_plans)), estate, child_flags),
                               ExecInitNode(static_cast<Plan *>(lsecond(cs->custom_plans)), estate, child_flags));
  // Instrumented under a Gather (EXPLAIN ANALYZE), the fallback is
  // initialized now, in the leader and in each worker: the shared
  // instrumentation is sized by the leader's plan state tree when the Gather
  // starts, and a worker reports every node of its own ("plan node 4 not
  // found" where one had initialized the fallback lazily and the other not).
  st->fallback = nullptr;
  if (estate->es_instrument && (IsParallelWorker() || estate->es_plannedstmt->parallelModeNeeded)) {
    st->fallback = ExecInitNode(static_cast<Plan *>(lthird(cs->custom_plans)), estate, 0);
    node->custom_ps = lappend(node->custom_ps, st->fallback);
  }
  PlanState *ps = &node->ss.ps;
  st->bkeys = InitExprs(static_cast<List *>(list_nth(priv, kBuildKeys)), ps);
  st->pkeys = InitExprs(static_cast<List *>(list_nth(priv, kProbeKeys)), ps);
  st->bfactors = InitExprs(static_cast<List *>(list_nth(priv, kBuildFactors)), ps);
  st->pfactors = InitExprs(static_cast<List *>(list_nth(priv, kProbeFactors)), ps);
  st->quals = ExecInitQual(static_cast<List *>(list_nth(priv, kKeyQuals)), ps);
  st->nk = st->bkeys.n;
  st->nagg = st->bfactors.n;
  st->numbered = intVal(list_nth(priv, kNumbered)) != 0;
  st->rownum = 0;
  st->lazy = intVal(list_nth(priv, kLazyFactors)) != 0;
  if (st->lazy) {
    st->btd = ExecGetResultType(static_cast<PlanState *>(linitial(node->custom_ps)));
    st->bnatts = st->btd->natts;
    st->lslot = ExecInitExtraTupleSlot(estate, st->btd, &TTSOpsVirtual);
    st->lec = CreateExprContext(estate);
    st->lfv = static_cast<Datum *>(palloc0(sizeof(Datum) * (st->nagg + 1)));
    st->lfn = static_cast<bool *>(palloc0(st->nagg + 1));
  }
  st->eq = Fns(static_cast<List *>(list_nth(priv, kEqFns)));
  st->bhash = Fns(static_cast<List *>(list_nth(priv, kBuildHash)));
  st->phash = Fns(static_cast<List *>(list_nth(priv, kProbeHash)));
  st->kcoll = Oids(static_cast<List *>(list_nth(priv, kKeyColl)));
  st->probe_first = static_cast<bool *>(palloc0(st->nk + 1));
  // Integer join keys: compared (and, all of them so, hashed) without a
  // function call per pair of rows.
  st->datum_eq = static_cast<bool *>(palloc0(st->nk + 1));
  st->int_keys = true;
  {
    int k = 0;
    ListCell *le;
    foreach (le, static_cast<List *>(list_nth(priv, kEqFns))) {
      st->datum_eq[k] = IntegerEquality(lfirst_oid(le));
      st->int_keys = st->int_keys && st->datum_eq[k++];
    }
  }
  st->klen = static_cast<int16 *>(palloc0(sizeof(int16) * (st->nk + 1)));
  st->kbyval = static_cast<bool *>(palloc0(st->nk + 1));
  ListCell *lc;
  int i = 0;
  foreach (lc, static_cast<List *>(list_nth(priv, kProbeFirst))) st->probe_first[i++] = lfirst_int(lc) != 0;
  st->null_zero = static_cast<bool *>(palloc0(st->nagg + 1));
  st->f4 = static_cast<bool *>(palloc0(st->nagg + 1));
  st->kind = static_cast<uint8 *>(palloc0(st->nagg + 1));
  st->sel = static_cast<bool *>(palloc0(st->nagg + 1));
  st->sel_probe = static_cast<bool *>(palloc0(st->nagg + 1));
  st->nout = 0;
  st->plain = true;
  i = 0;
  foreach (lc, static_cast<List *>(list_nth(priv, kNullZero))) {
    int f = lfirst_int(lc);
    st->null_zero[i] = (f & kAccNullZero) != 0;
    st->f4[i] = (f & kAccF4) != 0;
    st->kind[i] = static_cast<uint8>(f & (kAccCount | kAccAvg | kAccFollow));
    st->sel[i] = (f & kAccSelect) != 0;
    st->sel_probe[i] = (f & kAccSelectProbe) != 0;
    if (!(f & kAccFollow)) st->nout++;
    st->plain = st->plain && !st->f4[i] && st->kind[i] == 0 && !st->sel[i];
    i++;
  }
  st->bf4 = static_cast<bool *>(palloc0(st->nagg + 1));
  st->pf4 = static_cast<bool *>(palloc0(st->nagg + 1));
  i = 0;
  foreach (lc, static_cast<List *>(list_nth(priv, kBuildFactors)))
    st->bf4[i++] = exprType(static_cast<Node *>(lfirst(lc))) == FLOAT4OID;
  i = 0;
  foreach (lc, static_cast<List *>(list_nth(priv, kProbeFactors)))
    st->pf4[i++] = exprType(static_cast<Node *>(lfirst(lc))) == FLOAT4OID;
  i = 0;
  foreach (lc, static_cast<List *>(list_nth(priv, kBuildKeys)))
    get_typlenbyval(exprType(static_cast<Node *>(lfirst(lc))), &st->klen[i], &st->kbyval[i]), i++;
  // Group keys: per side, with the type's equality and hash functions.
  List *gexprs = static_cast<List *>(list_nth(priv, kGroupExprs));
  List *gside = static_cast<List *>(list_nth(priv, kGroupSide));
  FmgrInfo *geq = Fns(static_cast<List *>(list_nth(priv, kGroupEq)));
  FmgrInfo *ghash = Fns(static_cast<List *>(list_nth(priv, kGroupHash)));
  Oid *gcoll = Oids(static_cast<List *>(list_nth(priv, kGroupColl)));
  st->ng = list_length(gexprs);
  st->gside = static_cast<int *>(palloc0(sizeof(int) * (st->ng + 1)));
  st->gpos = static_cast<int *>(palloc0(sizeof(int) * (st->ng + 1)));
  List *gsx[2] = {NIL, NIL};
  int count[2] = {0, 0};
  for (int g = 0; g < st->ng; g++) {
    int side = list_nth_int(gside, g);
    st->gside[g] = side;
    st->gpos[g] = count[side]++;
    gsx[side] = lappend(gsx[side], list_nth(gexprs, g));
  }
  for (int side = 0; side < 2; side++) st->gx[side] = InitExprs(gsx[side], ps);
  for (int side = 0; side < 2; side++) {
    KeyTable *t = &st->g[side];
    memset(t, 0, sizeof *t);
    t->nkeys = count[side];
    t->hash = static_cast<FmgrInfo *>(palloc0(sizeof(FmgrInfo) * (t->nkeys + 1)));
    t->eq = static_cast<FmgrInfo *>(palloc0(sizeof(FmgrInfo) * (t->nkeys + 1)));
    t->coll = static_cast<Oid *>(palloc0(sizeof(Oid) * (t->nkeys + 1)));
    t->typlen = static_cast<int16 *>(palloc0(sizeof(int16) * (t->nkeys + 1)));
    t->byval = static_cast<bool *>(palloc0(t->nkeys + 1));
  }
  for (int side = 0; side < 2; side++) st->g[side].integers = true;
  for (int g = 0; g < st->ng; g++) {
    KeyTable *t = &st->g[st->gside[g]];
    int j = st->gpos[g];
    t->integers = t->integers && IntegerEquality(list_nth_oid(static_cast<List *>(list_nth(priv, kGroupEq)), g));
    t->hash[j] = ghash[g];
    t->eq[j] = geq[g];
    t->coll[j] = gcoll[g];
    get_typlenbyval(exprType(static_cast<Node *>(list_nth(gexprs, g))), &t->typlen[j], &t->byval[j]);
  }
  st->cxt = AllocSetContextCreate(estate->es_query_cxt, "ddx contraction", ALLOCSET_DEFAULT_SIZES);
  st->limit = get_hash_memory_limit();
  st->built = st->fellback = false;
  st->how = "none (not run)";
  st->emit = 0;
  st->emitted = false;
  st->peak = 0;
}

// Memory ran out: PostgreSQL's own aggregate over the join takes over.
void FallBack(State *st) {
  CustomScanState *node = &st->css;
  MemoryContextReset(st->cxt);
  st->fellback = true;
  if (!st->fallback) {
    CustomScan *cs = reinterpret_cast<CustomScan *>(node->ss.ps.plan);
    EState *estate = node->ss.ps.state;
    MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);
    st->fallback = ExecInitNode(static_cast<Plan *>(lthird(cs->custom_plans)), estate, 0);
    node->custom_ps = lappend(node->custom_ps, st->fallback);
    MemoryContextSwitchTo(old);
  }
}

TupleTableSlot *Exec(CustomScanState *node) {
  State *st = reinterpret_cast<State *>(node);
  if (!st->fellback && !st->built) {
    if (Build(st))
      st->built = true;
    else
      FallBack(st);
  }
  if (st->fellback) {
    TupleTableSlot *t = ExecProcNode(st->fallback);
    if (TupIsNull(t)) return nullptr;
    return ExecCopySlot(node->ss.ps.ps_ResultTupleSlot, t);
  }
  while (st->emit < st->acc.n && !st->acc.ok[st->emit]) st->emit++;
  // A plain aggregate (no GROUP BY: no group keys) gives one row where no
  // pair joined, as PostgreSQL's Agg does (nodeAgg.c, agg_retrieve_direct):
  // NULL sums and averages, counts of 0.
  bool none = st->emit >= st->acc.n;
  if (none && (st->ng > 0 || st->emitted)) return nullptr;
  uint32 at = none ? 0 : st->emit++;
  st->emitted = true;
  TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
  KeysToSlot(st, slot, none ? 0 : st->acc.ida[at], none ? 0 : st->acc.idb[at]);
  for (int a = 0, o = 0; a < st->nagg; a++) {
    const double *v = none ? nullptr : &st->acc.sum[at * st->nagg + a];
    bool has = !none && st->acc.has[at * st->nagg + a];
    Datum *d = &slot->tts_values[st->ng + o];
    bool *isnull = &slot->tts_isnull[st->ng + o];
    switch (st->kind[a]) {
      case kAccFollow:
        continue;
      case kAccCount:  // (a group has pairs: 0 where none counted)
        *isnull = false;
        *d = Int64GetDatum(has ? static_cast<int64>(v[0]) : 0);
        break;
      case kAccAvg:  // float8_avg: Sx / N, NULL where N = 0
        *isnull = !has || v[0] == 0.0;
        *d = Float8GetDatum(*isnull ? 0.0 : v[1] / v[0]);
        break;
      default:
        *isnull = !has;
        *d = st->f4[a] ? Float4GetDatum(static_cast<float4>(has ? v[0] : 0.0)) : Float8GetDatum(has ? v[0] : 0.0);
    }
    o++;
  }
  if (st->numbered) {
    slot->tts_isnull[st->ng + st->nout] = false;
    slot->tts_values[st->ng + st->nout] = Int64GetDatum(++st->rownum);
  }
  ExecStoreVirtualTuple(slot);
  ProjectionInfo *proj = node->ss.ps.ps_ProjInfo;
  if (!proj) return slot;
  ExprContext *ec = node->ss.ps.ps_ExprContext;
  ResetExprContext(ec);
  ec->ecxt_scantuple = slot;
  return ExecProject(proj);
}

void End(CustomScanState *node) {
  State *st = reinterpret_cast<State *>(node);
  ListCell *lc;
  foreach (lc, node->custom_ps) ExecEndNode(static_cast<PlanState *>(lfirst(lc)));
  MemoryContextDelete(st->cxt);
}

void ReScan(CustomScanState *node) {
  State *st = reinterpret_cast<State *>(node);
  MemoryContextReset(st->cxt);
  st->built = false;
  st->emit = 0;
  st->emitted = false;
  st->rownum = 0;
  st->acc.n = 0;
  // custom_ps are not the node's lefttree/righttree, so ExecReScan has not
  // told them which parameters changed (execAmi.c): they are told here.
  ListCell *lc;
  foreach (lc, node->custom_ps) {
    PlanState *child = static_cast<PlanState *>(lfirst(lc));
    if (node->ss.ps.chgParam) UpdateChangedParamSet(child, node->ss.ps.chgParam);
    if (!child->chgParam) ExecReScan(child);
  }
}

void Explain(CustomScanState *node, List *ancestors, ExplainState *es) {
  State *st = reinterpret_cast<State *>(node);
  CustomScan *cs = reinterpret_cast<CustomScan *>(node->ss.ps.plan);
  List *priv = cs->custom_private;
  ExplainPropertyInteger("Join Keys", nullptr, list_length(static_cast<List *>(list_nth(priv, kBuildKeys))), es);
  ExplainPropertyInteger("Group Keys", nullptr, list_length(static_cast<List *>(list_nth(priv, kGroupExprs))), es);
  {
    int sums = 0, counts = 0, avgs = 0;
    ListCell *lc;
    foreach (lc, static_cast<List *>(list_nth(priv, kNullZero))) {
      int f = lfirst_int(lc);
      if (f & kAccCount)
        counts++;
      else if (f & kAccAvg)
        avgs++;
      else if (!(f & kAccFollow))
        sums++;
    }
    ExplainPropertyInteger("Sums", nullptr, sums, es);
    if (counts) ExplainPropertyInteger("Counts", nullptr, counts, es);
    if (avgs) ExplainPropertyInteger("Averages", nullptr, avgs, es);
  }
  if (intVal(list_nth(priv, kNumbered))) ExplainPropertyText("Numbered", "row_number() OVER (), as emitted", es);
  if (intVal(list_nth(priv, kLazyFactors)))
    ExplainPropertyText("Build Factors", "computed on a row's first pair (they may raise)", es);
  if (List *quals = static_cast<List *>(list_nth(priv, kKeyQuals))) {
    // (deparsed against the node's scan tuple, whose columns are the keys)
    List *ctx = set_deparse_context_plan(es->deparse_cxt, &cs->scan.plan, ancestors);
    ExplainPropertyText("Key Condition",
                        deparse_expression(reinterpret_cast<Node *>(make_ands_explicit(quals)), ctx, true, false), es);
  }
  if (es->analyze) {
    if (st->fellback) {
      ExplainPropertyText("Fell Back", "memory limit reached: PostgreSQL's aggregate ran", es);
    } else if (!st->built && node->ss.ps.worker_instrument) {
      // (run in a parallel worker only: this is the leader's state, and the
      // node shares none of its counts with it)
      ExplainPropertyText("Ran In", "parallel workers, whose counts and memory are not shown", es);
      return;
    } else {
      ExplainPropertyInteger("Build Rows", nullptr, st->nrows, es);
      ExplainPropertyFloat("Pairs", nullptr, st->pairs, 0, es);
      ExplainPropertyInteger("Groups", nullptr, st->acc.n - st->acc.rejected, es);
      ExplainPropertyText("Accumulator", st->how, es);
      if (st->quals) ExplainPropertyInteger("Groups Rejected", nullptr, st->acc.rejected, es);
    }
    ExplainPropertyInteger("Peak Memory", "kB", static_cast<int64>((st->peak + 1023) / 1024), es);
  }
}

}  // namespace

namespace ddx::pg {

const CustomPathMethods kContractionPathMethods = {"ddx contraction", PlanContraction};
const CustomScanMethods kContractionScanMethods = {"ddx contraction", CreateState};
const CustomExecMethods kContractionExecMethods = {"ddx contraction", Begin,   Exec,    End,     ReScan,
                                                   nullptr,           nullptr, nullptr, nullptr, nullptr,
                                                   nullptr,           nullptr, Explain};

// A changed setting plans cached statements again, ddx's kept programs
// among them (plancache.c: ResetPlanCache marks every cached plan invalid;
// nothing is freed here), so that no cached plan keeps the old choice.
void AssignMode(int newval, void *) {
  if (newval != mode) ResetPlanCache();
}

bool ContractionInPrograms() { return mode != kOff; }

void InstallContraction() {
  DefineCustomEnumVariable("ddx.contraction",
                           "Where ddx's contraction node computes a grouped SUM of products over a join.",
                           "off: nowhere; programs: in ddx's gradient programs and jvp queries; all: in every query.",
                           &mode, kPrograms, kModes, PGC_USERSET, 0, nullptr, AssignMode, nullptr);
  DefineCustomBoolVariable("ddx.in_program", "Set by ddx while one of its programs runs.", nullptr, &in_program, false,
                           PGC_USERSET, GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE | GUC_DISALLOW_IN_FILE, nullptr, nullptr,
                           nullptr);
  RegisterCustomScanMethods(&kContractionScanMethods);
  prev_upper_hook = create_upper_paths_hook;
  create_upper_paths_hook = ContractionUpperPaths;
}

}  // namespace ddx::pg
