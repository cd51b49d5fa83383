// The executor's callbacks: Begin unpacks the plan, Exec builds and returns
// the groups (or falls back), End and ReScan (exec.h).
#include "exec.h"

extern "C" {
#include "postgres.h"

#include "access/parallel.h"
#include "catalog/pg_type.h"
#include "executor/nodeCustom.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "utils/lsyscache.h"
}

namespace ddx::pg::contraction {

namespace {

Exprs InitExprs(List *exprs, PlanState *ps) {
  Exprs e;
  e.states = NIL;
  e.n = list_length(exprs);
  e.att = static_cast<AttrNumber *>(palloc0(sizeof(AttrNumber) * (e.n + 1)));
  e.cval = static_cast<Datum *>(palloc0(sizeof(Datum) * (e.n + 1)));
  e.cnull = static_cast<bool *>(palloc0(e.n + 1));
  e.float4 = static_cast<bool *>(palloc0(e.n + 1));
  e.natts = 0;
  e.direct = true;
  int i = 0;
  ListCell *lc;
  foreach (lc, exprs) {
    Node *x = static_cast<Node *>(lfirst(lc));
    e.states = lappend(e.states, ExecInitExpr(reinterpret_cast<Expr *>(x), ps));
    e.float4[i] = exprType(x) == FLOAT4OID;
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

// Each side's factors, one per accumulator slot: an avg's first slot has
// its factor, its next two (Sx and Sxx, accumulated with N) a 1 never read.
List *SlotFactors(List *factors, List *accs) {
  List *slots = NIL;
  ListCell *lf, *la;
  forboth(lf, factors, la, accs) {
    slots = lappend(slots, lfirst(lf));
    int n = AccOps(static_cast<const AccSpec *>(lfirst(la))->kind).slots;
    for (int follow = 1; follow < n; follow++)
      slots = lappend(slots, makeConst(FLOAT8OID, -1, InvalidOid, 8, Float8GetDatum(1.0), false, true));
  }
  return slots;
}

}  // namespace

Node *CreateState(CustomScan *cs) {
  State *st = reinterpret_cast<State *>(newNode(sizeof(State), T_CustomScanState));
  st->css.methods = &kExecMethods;
  return reinterpret_cast<Node *>(&st->css);
}

namespace {

// The children (build side, probe side) and, instrumented under a Gather
// (EXPLAIN ANALYZE), the fallback now, in the leader and in each worker: the
// shared instrumentation is sized by the leader's plan state tree when the
// Gather starts, and a worker reports every node of its own ("plan node 4
// not found" where one had initialized the fallback lazily and the other
// not).
void InitChildren(State *st, EState *estate, int eflags) {
  CustomScanState *node = &st->css;
  CustomScan *cs = reinterpret_cast<CustomScan *>(node->ss.ps.plan);
  int child_flags = eflags & ~(EXEC_FLAG_BACKWARD | EXEC_FLAG_MARK);
  node->custom_ps = list_make2(ExecInitNode(static_cast<Plan *>(linitial(cs->custom_plans)), estate, child_flags),
                               ExecInitNode(static_cast<Plan *>(lsecond(cs->custom_plans)), estate, child_flags));
  st->fallback = nullptr;
  if (estate->es_instrument && (IsParallelWorker() || estate->es_plannedstmt->parallelModeNeeded)) {
    st->fallback = ExecInitNode(static_cast<Plan *>(lthird(cs->custom_plans)), estate, 0);
    node->custom_ps = lappend(node->custom_ps, st->fallback);
  }
}

// The join keys: each side's expressions, the equality and hash functions,
// the build side's types. Integer keys are compared (and, all of them so,
// hashed) without a function call per pair of rows.
void InitJoinKeys(State *st, const ContractionPlan &plan) {
  PlanState *ps = &st->css.ss.ps;
  st->bkeys = InitExprs(plan.join_keys[kBuild], ps);
  st->pkeys = InitExprs(plan.join_keys[kProbe], ps);
  st->nk = st->bkeys.n;
  st->eq = Fns(plan.join_eq);
  st->bhash = Fns(plan.join_hash[kBuild]);
  st->phash = Fns(plan.join_hash[kProbe]);
  st->kcoll = Oids(plan.join_coll);
  st->probe_first = static_cast<bool *>(palloc0(st->nk + 1));
  st->datum_eq = static_cast<bool *>(palloc0(st->nk + 1));
  st->int_keys = true;
  st->klen = static_cast<int16 *>(palloc0(sizeof(int16) * (st->nk + 1)));
  st->kbyval = static_cast<bool *>(palloc0(st->nk + 1));
  int k = 0;
  ListCell *lc;
  foreach (lc, plan.join_eq) {
    st->datum_eq[k] = IntegerEquality(lfirst_oid(lc));
    st->int_keys = st->int_keys && st->datum_eq[k++];
  }
  k = 0;
  foreach (lc, plan.probe_first) st->probe_first[k++] = lfirst_int(lc) != 0;
  k = 0;
  foreach (lc, plan.join_keys[kBuild]) {
    get_typlenbyval(exprType(static_cast<Node *>(lfirst(lc))), &st->klen[k], &st->kbyval[k]);
    k++;
  }
}

// The output aggregates: each side's factors (one per accumulator slot),
// the accumulators, and for lazy build factors (LazyFactors) the slot and
// context they are computed in.
void InitAccumulators(State *st, const ContractionPlan &plan, EState *estate) {
  PlanState *ps = &st->css.ss.ps;
  st->bfactors = InitExprs(SlotFactors(plan.factors[kBuild], plan.accs), ps);
  st->pfactors = InitExprs(SlotFactors(plan.factors[kProbe], plan.accs), ps);
  st->nagg = st->bfactors.n;
  st->nout = list_length(plan.accs);
  st->accs = static_cast<Accumulator *>(palloc0(sizeof(Accumulator) * (st->nout + 1)));
  int i = 0, slot = 0;
  ListCell *lc;
  foreach (lc, plan.accs) {
    Accumulator *a = &st->accs[i++];
    a->spec = *static_cast<const AccSpec *>(lfirst(lc));
    a->ops = &AccOps(a->spec.kind);
    a->slot = slot;
    slot += a->ops->slots;
  }
  st->plain = st->nagg == 1 && st->accs[0].spec.kind == AccKind::kSum;
  st->pair = static_cast<ExprState **>(palloc0(sizeof(ExprState *) * (st->nout + 1)));
  st->any_pair = false;
  i = 0;
  foreach (lc, plan.pair_terms) {
    if (lfirst(lc)) {
      st->pair[i] = ExecInitExpr(static_cast<Expr *>(lfirst(lc)), ps);
      st->any_pair = true;
    }
    i++;
  }
  st->ptv = static_cast<double *>(palloc0(sizeof(double) * (st->nagg + 1)));
  st->ptn = static_cast<bool *>(palloc0(st->nagg + 1));
  st->lazy = plan.lazy_factors;
  if (st->any_pair && !st->lazy) elog(ERROR, "ddx contraction: pair terms without the build rows kept");
  if (st->lazy) {
    st->btd = ExecGetResultType(static_cast<PlanState *>(linitial(st->css.custom_ps)));
    st->bnatts = st->btd->natts;
    st->lslot = ExecInitExtraTupleSlot(estate, st->btd, &TTSOpsVirtual);
    st->lec = CreateExprContext(estate);
    st->lfv = static_cast<Datum *>(palloc0(sizeof(Datum) * (st->nagg + 1)));
    st->lfn = static_cast<bool *>(palloc0(st->nagg + 1));
  }
}

// An empty KeyTable of nkeys keys, with room for their functions and types
// (filled by the caller), in the query's context; its arrays of keys are
// made by KeyInit at each build.
void KeyTableFor(KeyTable *t, int nkeys) {
  memset(t, 0, sizeof *t);
  t->nkeys = nkeys;
  t->hash = static_cast<FmgrInfo *>(palloc0(sizeof(FmgrInfo) * (nkeys + 1)));
  t->eq = static_cast<FmgrInfo *>(palloc0(sizeof(FmgrInfo) * (nkeys + 1)));
  t->coll = static_cast<Oid *>(palloc0(sizeof(Oid) * (nkeys + 1)));
  t->typlen = static_cast<int16 *>(palloc0(sizeof(int16) * (nkeys + 1)));
  t->byval = static_cast<bool *>(palloc0(nkeys + 1));
  t->integers = true;
}

// The group keys: each key's side and place among that side's keys, each
// side's expressions, and each side's KeyTable with the keys' functions
// and types.
void InitGroupKeys(State *st, const ContractionPlan &plan) {
  List *gexprs = plan.group_keys;
  FmgrInfo *geq = Fns(plan.group_eq);
  FmgrInfo *ghash = Fns(plan.group_hash);
  Oid *gcoll = Oids(plan.group_coll);
  st->ng = list_length(gexprs);
  st->gside = static_cast<int *>(palloc0(sizeof(int) * (st->ng + 1)));
  st->gpos = static_cast<int *>(palloc0(sizeof(int) * (st->ng + 1)));
  List *gsx[2] = {NIL, NIL};
  int count[2] = {0, 0};
  for (int g = 0; g < st->ng; g++) {
    int side = list_nth_int(plan.group_side, g);
    st->gside[g] = side;
    st->gpos[g] = count[side]++;
    gsx[side] = lappend(gsx[side], list_nth(gexprs, g));
  }
  for (int side = 0; side < 2; side++) st->gx[side] = InitExprs(gsx[side], &st->css.ss.ps);
  for (int side = 0; side < 2; side++) {
    KeyTableFor(&st->g[side], count[side]);
  }
  for (int g = 0; g < st->ng; g++) {
    KeyTable *t = &st->g[st->gside[g]];
    int j = st->gpos[g];
    t->integers = t->integers && IntegerEquality(list_nth_oid(plan.group_eq, g));
    t->hash[j] = ghash[g];
    t->eq[j] = geq[g];
    t->coll[j] = gcoll[g];
    get_typlenbyval(exprType(static_cast<Node *>(list_nth(gexprs, g))), &t->typlen[j], &t->byval[j]);
  }
}

// The grouping sets: each set's keys (their places among the group keys,
// all of the probe side: ConsiderOne), its KeyTable with those keys'
// functions and types, and its GROUPING() values.
void InitSets(State *st, const ContractionPlan &plan) {
  st->nsets = list_length(plan.sets);
  st->ngrouping = list_length(plan.grouping_values);
  st->emit_set = 0;
  st->sets = static_cast<GroupingSet *>(palloc0(sizeof(GroupingSet) * (st->nsets + 1)));
  const KeyTable &all = st->g[kProbe];
  int s = 0;
  ListCell *lc;
  foreach (lc, plan.sets) {
    GroupingSet *gs = &st->sets[s];
    List *places = static_cast<List *>(lfirst(lc));
    gs->nkeys = list_length(places);
    gs->key = static_cast<int *>(palloc0(sizeof(int) * (gs->nkeys + 1)));
    KeyTable *t = &gs->keys;
    KeyTableFor(t, gs->nkeys);
    int i = 0;
    ListCell *lp;
    foreach (lp, places) {
      int g = lfirst_int(lp);
      if (g < 0 || g >= st->ng || st->gside[g] != kProbe) elog(ERROR, "ddx contraction: a grouping set's key %d", g);
      int j = st->gpos[g];
      gs->key[i] = g;
      t->hash[i] = all.hash[j];
      t->eq[i] = all.eq[j];
      t->coll[i] = all.coll[j];
      t->typlen[i] = all.typlen[j];
      t->byval[i] = all.byval[j];
      t->integers = t->integers && IntegerEquality(all.eq[j].fn_oid);
      i++;
    }
    gs->grouping = static_cast<int32 *>(palloc0(sizeof(int32) * (st->ngrouping + 1)));
    s++;
  }
  int f = 0;
  foreach (lc, plan.grouping_values) {
    List *values = static_cast<List *>(lfirst(lc));
    if (list_length(values) != st->nsets) elog(ERROR, "ddx contraction: GROUPING() values of another number of sets");
    for (s = 0; s < st->nsets; s++) st->sets[s].grouping[f] = list_nth_int(values, s);
    f++;
  }
}

}  // namespace

const AttrNumber *PickedColumns(SubqueryScanState *sq) {
  if (sq->ss.ps.qual) return nullptr;
  SubqueryScan *plan = reinterpret_cast<SubqueryScan *>(sq->ss.ps.plan);
  List *tl = plan->scan.plan.targetlist;
  AttrNumber *map = static_cast<AttrNumber *>(palloc0(sizeof(AttrNumber) * (list_length(tl) + 1)));
  int i = 0;
  ListCell *lc;
  foreach (lc, tl) {
    Expr *x = lfirst_node(TargetEntry, lc)->expr;
    if (!IsA(x, Var) || static_cast<Index>(castNode(Var, x)->varno) != plan->scan.scanrelid ||
        castNode(Var, x)->varattno <= 0 || castNode(Var, x)->varlevelsup != 0) {
      pfree(map);
      return nullptr;
    }
    map[i++] = castNode(Var, x)->varattno;
  }
  return map;
}

namespace {

// Expressions that read only their child's columns (Exprs::direct) read
// the subplan's instead: the child's column a is the subplan's map[a - 1].
void Remap(Exprs *e, const AttrNumber *map) {
  e->natts = 0;
  for (int i = 0; i < e->n; i++)
    if (e->att[i] > 0) {
      e->att[i] = map[e->att[i] - 1];
      e->natts = Max(e->natts, e->att[i]);
    }
}

// Each side's input: its child, or, where the child is a Subquery Scan with
// no condition whose every column is a column of its subplan (a program's
// `(SELECT a0.c0 AS k0, ... FROM f9 a0 OFFSET 0) r`: a fence, kept by the
// planner as a projection of each row, and a twelfth of the node's time in
// a GPT's gradient, bench/RESULTS.md), the subplan, read at those columns:
// the same values, without a copy of each row. Only where every expression
// the node reads from that side is a column (Exprs::direct) and the build
// side's rows are not kept whole (lazy factors keep the child's tuple). The
// Subquery Scan stays the child (ended and rescanned as one, which rescans
// its subplan); EXPLAIN ANALYZE shows it never executed, and the node says
// it read through it.
void ReadThrough(State *st) {
  for (int side = 0; side < 2; side++) {
    PlanState *child = static_cast<PlanState *>(list_nth(st->css.custom_ps, side));
    st->input[side] = child;
    st->through[side] = false;
    Exprs *es[3] = {side == kBuild ? &st->bkeys : &st->pkeys, side == kBuild ? &st->bfactors : &st->pfactors,
                    &st->gx[side]};
    // (pair terms read the child's columns by the child's own numbers)
    if (!IsA(child, SubqueryScanState) || (side == kBuild && st->lazy) || st->any_pair) continue;
    bool ok = true;
    for (Exprs *e : es) ok = ok && e->direct;
    const AttrNumber *map = ok ? PickedColumns(reinterpret_cast<SubqueryScanState *>(child)) : nullptr;
    if (!map) continue;
    for (Exprs *e : es) Remap(e, map);
    st->input[side] = reinterpret_cast<SubqueryScanState *>(child)->subplan;
    st->through[side] = true;
  }
}

}  // namespace

// Reads the plan (FromPrivate) into the executor's state, with its children
// and expressions initialized, and the node's own memory context.
void Begin(CustomScanState *node, EState *estate, int eflags) {
  State *st = reinterpret_cast<State *>(node);
  ContractionPlan plan;
  FromPrivate(reinterpret_cast<CustomScan *>(node->ss.ps.plan)->custom_private, &plan);
  InitChildren(st, estate, eflags);
  InitJoinKeys(st, plan);
  InitAccumulators(st, plan, estate);
  st->quals = ExecInitQual(plan.key_quals, &node->ss.ps);
  InitGroupKeys(st, plan);
  InitSets(st, plan);
  ReadThrough(st);
  st->numbered = plan.numbered;
  st->rownum = 0;
  st->cxt = AllocSetContextCreate(estate->es_query_cxt, "ddx contraction", ALLOCSET_DEFAULT_SIZES);
  st->limit = get_hash_memory_limit();
  st->built = st->fellback = false;
  st->dense.how = "none (not run)";
  st->emit = 0;
  st->emitted = false;
  st->peak = 0;
}

namespace {

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

}  // namespace

bool EnsureBuilt(State *st) {
  if (!st->fellback && !st->built) {
    if (Build(st))
      st->built = true;
    else
      FallBack(st);
  }
  return !st->fellback;
}

TupleTableSlot *GroupRow(State *st, uint32 at, bool none) {
  CustomScanState *node = &st->css;
  TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
  KeysToSlot(st, slot, none ? 0 : GroupIda(st->groups, at), none ? 0 : GroupIdb(st->groups, at));
  for (int o = 0; o < st->nout; o++) {
    const Accumulator &a = st->accs[o];
    size_t at_slot = static_cast<size_t>(at) * st->nagg + a.slot;
    a.ops->emit(none ? nullptr : &st->groups.sum[at_slot], !none && st->groups.has[at_slot],
                &slot->tts_values[st->ng + o], &slot->tts_isnull[st->ng + o]);
  }
  if (st->numbered) {
    slot->tts_isnull[st->ng + st->nout] = false;
    slot->tts_values[st->ng + st->nout] = Int64GetDatum(++st->rownum);
  }
  ExecStoreVirtualTuple(slot);
  return Projected(&st->css, slot);
}

TupleTableSlot *Projected(CustomScanState *node, TupleTableSlot *slot) {
  ProjectionInfo *proj = node->ss.ps.ps_ProjInfo;
  if (!proj) return slot;
  ExprContext *ec = node->ss.ps.ps_ExprContext;
  ResetExprContext(ec);
  ec->ecxt_scantuple = slot;
  return ExecProject(proj);
}

TupleTableSlot *SetRow(State *st, int set, uint32 id) {
  const GroupingSet &gs = st->sets[set];
  TupleTableSlot *slot = st->css.ss.ss_ScanTupleSlot;
  ExecClearTuple(slot);
  // (the keys the set does not group by are NULL, as in PostgreSQL's rows
  // of that set)
  for (int g = 0; g < st->ng; g++) {
    slot->tts_values[g] = 0;
    slot->tts_isnull[g] = true;
  }
  for (int i = 0; i < gs.nkeys; i++) {
    slot->tts_values[gs.key[i]] = gs.keys.vals[static_cast<size_t>(id) * gs.nkeys + i];
    slot->tts_isnull[gs.key[i]] = gs.keys.nulls[static_cast<size_t>(id) * gs.nkeys + i];
  }
  for (int o = 0; o < st->nout; o++) {
    const Accumulator &a = st->accs[o];
    size_t at = static_cast<size_t>(id) * st->nagg + a.slot;
    a.ops->emit(&gs.sum[at], gs.has[at], &slot->tts_values[st->ng + o], &slot->tts_isnull[st->ng + o]);
  }
  for (int f = 0; f < st->ngrouping; f++) {
    slot->tts_values[st->ng + st->nout + f] = Int32GetDatum(gs.grouping[f]);
    slot->tts_isnull[st->ng + st->nout + f] = false;
  }
  ExecStoreVirtualTuple(slot);
  return Projected(&st->css, slot);
}

TupleTableSlot *Exec(CustomScanState *node) {
  State *st = reinterpret_cast<State *>(node);
  if (!EnsureBuilt(st)) {
    TupleTableSlot *t = ExecProcNode(st->fallback);
    if (TupIsNull(t)) return nullptr;
    return ExecCopySlot(node->ss.ps.ps_ResultTupleSlot, t);
  }
  if (st->nsets) {  // each set's groups in turn
    while (st->emit_set < st->nsets) {
      if (st->emit < st->sets[st->emit_set].keys.n) return SetRow(st, st->emit_set, st->emit++);
      st->emit_set++;
      st->emit = 0;
    }
    return nullptr;
  }
  while (st->emit < st->groups.n && !GroupOk(st->groups, st->emit)) st->emit++;
  // A plain aggregate (no GROUP BY: no group keys) gives one row where no
  // pair joined, as PostgreSQL's Agg does (nodeAgg.c, agg_retrieve_direct):
  // NULL sums and averages, counts of 0.
  bool none = st->emit >= st->groups.n;
  if (none && (st->ng > 0 || st->emitted)) return nullptr;
  uint32 at = none ? 0 : st->emit++;
  st->emitted = true;
  return GroupRow(st, at, none);
}

void End(CustomScanState *node) {
  State *st = reinterpret_cast<State *>(node);
  EndChildren(node);
  MemoryContextDelete(st->cxt);
}

void ReScan(CustomScanState *node) {
  State *st = reinterpret_cast<State *>(node);
  MemoryContextReset(st->cxt);
  st->built = false;
  st->emit = 0;
  st->emit_set = 0;
  st->emitted = false;
  st->rownum = 0;
  st->groups.n = 0;
  for (int set = 0; set < st->nsets; set++) st->sets[set].keys.n = 0;
  // (a side read through never runs: rescanned now, so that it tells its
  // subplan, ExecReScanSubqueryScan)
  RescanChildren(node, st->through, 2);
}

void RescanChildren(CustomScanState *node, const bool *now, int nnow) {
  // custom_ps are not the node's lefttree/righttree, so ExecReScan has not
  // told them which parameters changed (execAmi.c): they are told here. A
  // child told so is rescanned by its next ExecProcNode; one that never
  // runs one, now.
  ListCell *lc;
  int i = 0;
  foreach (lc, node->custom_ps) {
    PlanState *child = static_cast<PlanState *>(lfirst(lc));
    if (node->ss.ps.chgParam) UpdateChangedParamSet(child, node->ss.ps.chgParam);
    if (!child->chgParam || (i < nnow && now[i])) ExecReScan(child);
    i++;
  }
}

void EndChildren(CustomScanState *node) {
  ListCell *lc;
  foreach (lc, node->custom_ps) ExecEndNode(static_cast<PlanState *>(lfirst(lc)));
}

}  // namespace ddx::pg::contraction
