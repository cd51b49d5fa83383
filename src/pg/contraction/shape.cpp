// The checks that decide whether the node computes a grouping over a split
// of a join, and fill its plan: which side an expression reads, whether it
// may raise, the join keys, the group keys, the other join conditions, the
// aggregates and the outputs. Each returns its Refusal as a value; ShapeOf
// runs them in order (planning.h).
#include "planning.h"

#include "ddx/pg/compat.h"

extern "C" {
#include "postgres.h"

#include "catalog/pg_aggregate.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/tlist.h"
#include "parser/parse_oper.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"
}

namespace ddx::pg::contraction {

namespace {

// A node the node's expressions cannot hold, aggregates aside: it reads
// another query level, a subplan, or a value set while the plan runs.
bool ForbiddenNode(const Node *n) {
  return (IsA(n, Param) && castNode(Param, n)->paramkind != PARAM_EXTERN) || IsA(n, SubLink) || IsA(n, SubPlan) ||
         IsA(n, AlternativeSubPlan) || IsA(n, PlaceHolderVar) || IsA(n, WindowFunc) || IsA(n, GroupingFunc);
}

// (ctx not null: a grouping of one relation, where a placeholder of this
// level is a column the relation's path computes: pull_up_subqueries wraps
// a pulled-up subquery's expressions so under GROUPING SETS, and the
// grouping's input target has them, as any column of the relation)
bool ForbiddenWalker(Node *n, void *ctx) {
  if (!n) return false;
  if (ctx && IsA(n, PlaceHolderVar) && castNode(PlaceHolderVar, n)->phlevelsup == 0) return false;
  if (ForbiddenNode(n) || IsA(n, Aggref)) return true;
  return expression_tree_walker(n, reinterpret_cast<bool (*)()>(ForbiddenWalker), ctx);
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
  bool one = bms_is_empty(sides[kBuild]) && !bms_is_empty(sides[kProbe]);  // (ConsiderOne's sides)
  if (ForbiddenWalker(e, one ? &one : nullptr) || contain_volatile_functions(e)) return -1;
  Relids r = pull_varnos(root, e);
  if (bms_is_empty(r)) return none;
  for (int s = 0; s < 2; s++)
    if (bms_is_subset(r, sides[s])) return s;
  return -1;
}

Refusal JoinKeys(PlannerInfo *root, List *clauses, const Relids sides[2], ContractionPlan *s) {
  ListCell *lc;
  foreach (lc, clauses) {
    RestrictInfo *ri = lfirst_node(RestrictInfo, lc);
    if (ri->pseudoconstant) return Refusal{"a constant join condition"};
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
        return Refusal{"a join condition with a volatile function, a sublink or a parameter of a subplan"};
      s->key_quals = lappend(s->key_quals, ri->clause);
      s->key_qual_ris = lappend(s->key_qual_ris, ri);
      continue;
    }
    s->join_keys[ls] = lappend(s->join_keys[ls], l);
    s->join_keys[rs] = lappend(s->join_keys[rs], r);
    s->join_hash[ls] = lappend_oid(s->join_hash[ls], lh);
    s->join_hash[rs] = lappend_oid(s->join_hash[rs], rh);
    s->join_eq = lappend_oid(s->join_eq, get_opcode(op->opno));
    s->join_coll = lappend_oid(s->join_coll, op->inputcollid);
    s->probe_first = lappend_int(s->probe_first, ls == 1 ? 1 : 0);
  }
  return kFits;
}

bool OverKeys(Node *n, List *gexprs);

// The join's other conditions: each must read the rows only through the
// group keys (attention's k.t <= q.t, with q.t and k.t grouped by), so that
// it holds for every pair of rows of a group or for none. The node tests it
// once per group, when the group's first pair of rows joins.
Refusal KeyQuals(ContractionPlan *s) {
  ListCell *lc;
  foreach (lc, s->key_quals)
    if (!OverKeys(static_cast<Node *>(lfirst(lc)), s->group_keys))
      return Refusal{"a join condition other than an equality that reads more than the GROUP BY keys"};
  return kFits;
}

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

// The factors of a product of one factor per side, f * g (float8mul,
// float48mul, float84mul; float4mul where f4), or f * g with a NULL guard
// (SplitGuard), appended to s's sides; a refusal where arg is no such
// product (and nothing appended).
Refusal ProductFactors(PlannerInfo *root, Node *arg, bool f4, const Relids sides[2], ContractionPlan *s) {
  if (!is_opclause(arg)) return Refusal{"an aggregate over both sides of something other than a product"};
  OpExpr *op = castNode(OpExpr, arg);
  RegProcedure mul = get_opcode(op->opno);
  if (list_length(op->args) != 2 ||
      (f4 ? mul != F_FLOAT4MUL : mul != F_FLOAT8MUL && mul != F_FLOAT48MUL && mul != F_FLOAT84MUL))
    return Refusal{"an aggregate over both sides of something other than a float8 or float4 product"};
  Node *l = static_cast<Node *>(linitial(op->args)), *r = static_cast<Node *>(lsecond(op->args));
  int ls = SideOf(root, l, sides, -1), rs = SideOf(root, r, sides, -1);
  if (mul == F_FLOAT8MUL && ls < 0 && SplitGuard(root, op, l, r, sides, &l, &ls, &r, &rs)) {
    // (a NULL guard split: l over one side, r over the other)
  } else if (mul == F_FLOAT8MUL && rs < 0 && SplitGuard(root, op, r, l, sides, &r, &rs, &l, &ls)) {
    // (likewise)
  } else if (ls < 0 || rs < 0 || ls == rs) {
    return Refusal{"a product whose factors are not one of each side"};
  }
  s->factors[ls] = lappend(s->factors[ls], l);
  s->factors[rs] = lappend(s->factors[rs], r);
  return kFits;
}

// The aggregate a, whose factors are in place, as computed by an
// accumulator of `kind` (of the pair term `pair`, or null).
void AddAggregate(ContractionPlan *p, Aggref *a, AccKind kind, bool null_zero, int override_side,
                  Node *pair = nullptr) {
  AccSpec *spec = static_cast<AccSpec *>(palloc(sizeof(AccSpec)));
  spec->kind = kind;
  spec->null_zero = null_zero;
  spec->override_side = override_side;
  p->accs = lappend(p->accs, spec);
  p->aggrefs = lappend(p->aggrefs, a);
  p->pair_terms = lappend(p->pair_terms, pair);
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
//   of none): the pairs where e is not NULL, as a "product" of 1s;
//   max(float8) and min(float8) of a float8 product or of one side's
//   expression (a softmax's shift), as float8larger and float8smaller fold
//   them (the product's NULLs and COALESCE as a sum's);
//   any of the float8 ones of a float8 term of both sides that is not such
//   a product (a pair term: the node evaluates it for each pair).
Refusal NodeAggregate(PlannerInfo *root, Aggref *a, const Relids sides[2], ContractionPlan *s) {
  Oid fn = a->aggfnoid;
  bool count = fn == F_COUNT_ || fn == F_COUNT_ANY, avg = fn == F_AVG_FLOAT8 || fn == F_AVG_FLOAT4;
  bool f4 = fn == F_SUM_FLOAT4 || fn == F_AVG_FLOAT4, extreme = fn == F_MAX_FLOAT8 || fn == F_MIN_FLOAT8;
  if ((fn != F_SUM_FLOAT8 && fn != F_SUM_FLOAT4 && !avg && !count && !extreme) || a->aggdistinct || a->aggorder ||
      a->aggfilter || (a->aggstar && fn != F_COUNT_) || a->aggvariadic || a->aggkind != AGGKIND_NORMAL ||
      a->agglevelsup != 0 || list_length(a->args) != (fn == F_COUNT_ ? 0 : 1))
    return Refusal{"an aggregate other than a plain sum or avg (float8, float4), count, or max or min (float8)"};
  if (count) {
    Node *e = a->aggstar ? nullptr : reinterpret_cast<Node *>(linitial_node(TargetEntry, a->args)->expr);
    int side = e ? SideOf(root, e, sides, 0) : 0;
    if (side < 0) return Refusal{"a count of an expression of both sides"};
    s->factors[side] = lappend(s->factors[side], NotNullOne(e));
    s->factors[1 - side] = lappend(s->factors[1 - side], NotNullOne(nullptr));
    AddAggregate(s, a, AccKind::kCount, false, -1);
    return kFits;
  }
  Node *arg = reinterpret_cast<Node *>(linitial_node(TargetEntry, a->args)->expr);
  bool null_zero = false;
  if (IsA(arg, CoalesceExpr) && list_length(castNode(CoalesceExpr, arg)->args) == 2) {
    Node *z = static_cast<Node *>(lsecond(castNode(CoalesceExpr, arg)->args));
    if (!IsA(z, Const) || castNode(Const, z)->consttype != (f4 ? FLOAT4OID : FLOAT8OID) ||
        castNode(Const, z)->constisnull ||
        (f4 ? DatumGetFloat4(castNode(Const, z)->constvalue) : DatumGetFloat8(castNode(Const, z)->constvalue)) != 0.0)
      return Refusal{"an aggregate of COALESCE(product, c) with c other than 0"};
    arg = static_cast<Node *>(linitial(castNode(CoalesceExpr, arg)->args));
    null_zero = true;
  }
  Node *sel_o = nullptr, *sel_d = nullptr, *pair = nullptr;
  int sel_os = -1, sel_ds = -1;
  int side = SideOf(root, arg, sides, 0);
  if (side >= 0) {
    // An expression of one side (or of none): a product with the other
    // side's 1, which float8mul and float4mul return exactly.
    s->factors[side] = lappend(s->factors[side], arg);
    s->factors[1 - side] = lappend(s->factors[1 - side], NotNullOne(nullptr));
  } else if (!f4 && !extreme && SelectGuard(root, arg, sides, &sel_o, &sel_os, &sel_d, &sel_ds)) {
    s->factors[sel_os] = lappend(s->factors[sel_os], sel_o);
    s->factors[sel_ds] = lappend(s->factors[sel_ds], sel_d);
  } else {
    Refusal r = ProductFactors(root, arg, f4, sides, s);
    if (r) {
      // A float8 term of both sides that is no such product (a softmax's
      // normalizer, exp(s.x - m.m)): evaluated for each pair over both
      // rows, as PostgreSQL evaluates it for each row of the join.
      // (SideOf's -1 also means an expression it cannot place: a
      // placeholder, a subplan, a volatile function, another level's Var)
      if (f4 || exprType(arg) != FLOAT8OID || ForbiddenWalker(arg, nullptr) || contain_volatile_functions(arg) ||
          !bms_is_subset(pull_varnos(root, arg), bms_union(sides[0], sides[1])))
        return r;
      s->factors[kBuild] = lappend(s->factors[kBuild], NotNullOne(nullptr));
      s->factors[kProbe] = lappend(s->factors[kProbe], NotNullOne(nullptr));
      pair = arg;
    }
  }
  AccKind kind = pair      ? (fn == F_MAX_FLOAT8   ? AccKind::kMaxPair
                              : fn == F_MIN_FLOAT8 ? AccKind::kMinPair
                              : avg                ? AccKind::kAvgPair
                                                   : AccKind::kSumPair)
                 : extreme ? (fn == F_MAX_FLOAT8 ? AccKind::kMax : AccKind::kMin)
                 : sel_o   ? (avg ? AccKind::kAvgSelect : AccKind::kSumSelect)
                 : f4      ? (avg ? AccKind::kAvgFloat4 : AccKind::kSumFloat4)
                           : (avg ? AccKind::kAvg : AccKind::kSum);
  AddAggregate(s, a, kind, null_zero, sel_o ? sel_os : -1, pair);
  return kFits;
}

// The group key e of side `side`, compared by the operator eqop and hashed
// by hash.
void AddGroupKey(ContractionPlan *p, Node *e, int side, Oid eqop, RegProcedure hash) {
  p->group_keys = lappend(p->group_keys, e);
  p->group_side = lappend_int(p->group_side, side);
  p->group_eq = lappend_oid(p->group_eq, get_opcode(eqop));
  p->group_hash = lappend_oid(p->group_hash, hash);
  p->group_coll = lappend_oid(p->group_coll, exprCollation(e));
}

// The GROUP BY keys, and the output columns that depend on a primary key
// grouped by, each of one side and hashable.
Refusal GroupKeys(PlannerInfo *root, const Relids sides[2], ContractionPlan *s) {
  ListCell *lc;
  foreach (lc, compat::GroupClause(root)) {
    SortGroupClause *sgc = lfirst_node(SortGroupClause, lc);
    Node *e = get_sortgroupclause_expr(sgc, root->processed_tlist);
    // (the key as the output has it, for the output's columns to be found
    // among the keys; its side as the relation's rows have it)
    int side = SideOf(root, compat::BelowGrouping(root, e), sides, 0);
    RegProcedure lh, rh;
    if (side < 0 || !sgc->hashable || !get_op_hash_functions(sgc->eqop, &lh, &rh))
      return Refusal{"a GROUP BY key that is not a hashable expression of one side"};
    AddGroupKey(s, e, side, sgc->eqop, lh);
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
    if (!IsA(e, Var) || castNode(Var, e)->varlevelsup != 0 || list_member(s->group_keys, e)) continue;
    int side = SideOf(root, e, sides, 0);
    Oid eqop = InvalidOid;
    bool hashable = false;
    get_sort_group_operators(exprType(e), false, false, false, nullptr, &eqop, nullptr, &hashable);
    RegProcedure lh, rh;
    if (side < 0 || !OidIsValid(eqop) || !hashable || !get_op_hash_functions(eqop, &lh, &rh))
      return Refusal{"an output column that depends on a primary key grouped by, of a type without hashing"};
    AddGroupKey(s, e, side, eqop, lh);
  }
  return kFits;
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
// NodeAggregate's refusal, where it gave one, in ctx->refusal.
struct SumsCtx {
  PlannerInfo *root;
  const Relids *sides;
  ContractionPlan *s;
  Refusal refusal;  // NodeAggregate's
};
bool NotOverSums(Node *n, SumsCtx *ctx) {
  if (!n) return false;
  ListCell *lc;
  foreach (lc, ctx->s->group_keys)
    if (equal(n, lfirst(lc))) return false;
  // GROUPING(): of the set a row is of, a column of the scan tuple
  // (ConsiderOne gives each set's value)
  if (IsA(n, GroupingFunc) && ctx->s->grouping_sets && castNode(GroupingFunc, n)->agglevelsup == 0) {
    if (!list_member(ctx->s->grouping_funcs, n)) ctx->s->grouping_funcs = lappend(ctx->s->grouping_funcs, n);
    return false;
  }
  if (IsA(n, Aggref)) {
    if (list_member(ctx->s->aggrefs, n)) return false;
    ctx->refusal = NodeAggregate(ctx->root, castNode(Aggref, n), ctx->sides, ctx->s);
    return static_cast<bool>(ctx->refusal);
  }
  if (IsA(n, Var) || ForbiddenNode(n)) return true;
  return expression_tree_walker(n, reinterpret_cast<bool (*)()>(NotOverSums), ctx);
}

// Every entry of the grouped rel's target: a group key, or a stable
// expression of the keys and our sums (a sum itself, or tanh of one).
Refusal TargetFits(PlannerInfo *root, PathTarget *target, const Relids sides[2], ContractionPlan *s) {
  ListCell *lc;
  int i = 0;
  foreach (lc, target->exprs) {
    Node *e = static_cast<Node *>(lfirst(lc));
    Index ref = target->sortgrouprefs ? target->sortgrouprefs[i] : 0;
    i++;
    // A GROUP BY key, or a column that depends on one (GroupKeys). Other
    // entries with a sortgroupref are ORDER BY's or DISTINCT's: over the
    // keys and sums as any other.
    if (ref != 0 && get_sortgroupref_clause_noerr(ref, compat::GroupClause(root))) continue;
    if (list_member(s->group_keys, e)) continue;
    SumsCtx ctx{root, sides, s, kFits};
    if (NotOverSums(e, &ctx)) {
      if (ctx.refusal) return ctx.refusal;
      return Refusal{"an output column that is neither a GROUP BY key nor an expression of the keys and sums"};
    }
    if (contain_volatile_functions(e)) return Refusal{"a volatile output column"};
  }
  if (s->aggrefs == NIL) return Refusal{"no sum"};
  return kFits;
}

}  // namespace

bool MayRaise(Node *n) { return MayRaiseWalker(n, nullptr); }

Refusal ShapeOf(PlannerInfo *root, List *clauses, const Relids sides[2], PathTarget *target, ContractionPlan *s) {
  if (Refusal r = JoinKeys(root, clauses, sides, s)) return r;
  if (Refusal r = GroupKeys(root, sides, s)) return r;
  if (Refusal r = KeyQuals(s)) return r;
  return TargetFits(root, target, sides, s);
}

}  // namespace ddx::pg::contraction
