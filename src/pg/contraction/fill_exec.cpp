// The executor's side of `Custom Scan (ddx fill)` (fill.h): the contraction
// node below its first child computes its groups; each row of the fill
// (the second child) finds its group by its key columns' ids in the node's
// key tables, and the row of t that PostgreSQL's join would pair it with is
// the node's row of that group, through the Subquery Scan's projection
// (where t is a sum of nodes, the HashAggregate's row that their rows of that
// group add up to). The join's clauses that the lookup does not test are checked on each row it
// finds. Where there is no such node below (a plan shaped otherwise) or it
// ran out of memory, PostgreSQL's join, the third child, runs instead,
// before any row is returned.
#include "exec.h"
#include "fill.h"

#include "ddx/pg/compat.h"

extern "C" {
#include "postgres.h"

#include "access/parallel.h"
#include "executor/instrument.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/fmgroids.h"
#include "utils/float.h"
}

namespace ddx::pg::contraction {

namespace {

// One contraction node whose groups the fill looks up: t's own, or an arm
// of a sum.
struct Arm {
  State *node;
  SubqueryScanState *sq;   // the Subquery Scan between, or nullptr
  const AttrNumber *tmap;  // where it only picks columns: its column c is the node's tmap[c]
  int *key;                // per group key of the node: the key of t it is
  // The groups by their pair of ids: dense cells (ida * nb + idb), or an
  // open-addressed table of (ida << 32 | idb) + 1.
  uint32 nb;
  int32 *cells;
  uint64 *hkeys;
  uint32 *hat;
  uint32 hslots;
  const char *lookup;
  Datum *kv[2];
  bool *kn[2];
};

// Where t is a sum (SummedNodes): each column of the HashAggregate's row,
// a key (the Append's column `col`) or a sum of one.
struct SumColumn {
  AttrNumber col;
  bool sum;
};

struct FillState {
  CustomScanState css;
  int nt, nkeys;      // t's columns; its keys
  AttrNumber *fatt;   // per key: its column of the fill
  bool *nsafe;        // per key: a NULL finds the NULL group (fill_path.cpp, NullSafeVar)
  AttrNumber fmax;    // the highest of them
  int nscan;          // the scan tuple's columns
  AttrNumber *fbmap;  // per scan column: the fallback's column with it, 0 none (not read above)
  bool sum;           // t is a sum of the arms' groups
  int narms;
  Arm *arms;  // (with their nodes where the plan has them, else found = false)
  bool found;
  // A sum: t's Subquery Scan over the HashAggregate (or nullptr) and its
  // picked columns; the aggregate's row, and what each column of it is.
  SubqueryScanState *tsq;
  const AttrNumber *ttmap;
  TupleTableSlot *aslot;
  int nacol;
  SumColumn *acols;
  Datum *kv;  // per key: the fill row's value
  bool *kn;   // per key: whether it is NULL
  PlanState *fallback;
  MemoryContext cxt;
  bool started, fellback;
  const char *why;  // why the fallback ran
  double fill_rows;
};

void InitFallback(FillState *fs) {
  CustomScanState *node = &fs->css;
  CustomScan *cs = reinterpret_cast<CustomScan *>(node->ss.ps.plan);
  EState *estate = node->ss.ps.state;
  MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);
  fs->fallback = ExecInitNode(static_cast<Plan *>(lthird(cs->custom_plans)), estate, 0);
  node->custom_ps = lappend(node->custom_ps, fs->fallback);
  MemoryContextSwitchTo(old);
}

// The contraction node that `p` is, through a Subquery Scan that only
// passes or picks its columns (setrefs.c removes one that only passes
// them), with `ng` group keys; false where it is not.
bool FindNode(PlanState *p, int ng, Arm *arm) {
  arm->sq = nullptr;
  arm->node = nullptr;
  if (IsA(p, SubqueryScanState) && !p->qual) {
    arm->sq = reinterpret_cast<SubqueryScanState *>(p);
    p = arm->sq->subplan;
  }
  if (!IsA(p, CustomScanState) || reinterpret_cast<CustomScanState *>(p)->methods != &kExecMethods) return false;
  State *st = reinterpret_cast<State *>(p);
  if (st->ng != ng || st->numbered) return false;
  arm->node = st;
  // (a Subquery Scan that only picks columns: they are read, not projected,
  // as ReadThrough reads a side of the contraction node)
  arm->tmap = arm->sq && arm->sq->ss.ps.ps_ProjInfo ? PickedColumns(arm->sq) : nullptr;
  return true;
}

// Where t is a sum: its HashAggregate over an Append of the arms, each
// column of its row a key or a sum(float8) of the Append's columns; the
// arms' nodes. False where the plan is shaped otherwise.
bool FindSum(FillState *fs, PlanState *t) {
  fs->tsq = nullptr;
  if (IsA(t, SubqueryScanState) && !t->qual) {
    fs->tsq = reinterpret_cast<SubqueryScanState *>(t);
    t = fs->tsq->subplan;
  }
  if (!IsA(t, AggState) || t->qual) return false;
  Agg *agg = reinterpret_cast<Agg *>(t->plan);
  if (agg->aggstrategy != AGG_HASHED || agg->aggsplit != AGGSPLIT_SIMPLE || agg->groupingSets ||
      agg->numCols != fs->nkeys || !IsA(outerPlanState(t), AppendState))
    return false;
  AppendState *app = reinterpret_cast<AppendState *>(outerPlanState(t));
  Append *ap = reinterpret_cast<Append *>(app->ps.plan);
  if (ap->plan.parallel_aware || ap->first_partial_plan < app->as_nplans || app->as_nplans != fs->narms) return false;
  fs->nacol = list_length(agg->plan.targetlist);
  fs->acols = static_cast<SumColumn *>(palloc0(sizeof(SumColumn) * (fs->nacol + 1)));
  int c = 0;
  ListCell *lc;
  foreach (lc, agg->plan.targetlist) {
    Expr *e = lfirst_node(TargetEntry, lc)->expr;
    if (IsA(e, Aggref)) {
      Aggref *a = castNode(Aggref, e);
      if (a->aggfnoid != F_SUM_FLOAT8 || a->aggfilter || a->aggdistinct || a->aggorder || list_length(a->args) != 1)
        return false;
      e = linitial_node(TargetEntry, a->args)->expr;
      fs->acols[c].sum = true;
    }
    if (!IsA(e, Var) || castNode(Var, e)->varno != OUTER_VAR) return false;
    fs->acols[c].col = castNode(Var, e)->varattno;
    c++;
  }
  for (int k = 0; k < fs->narms; k++)
    if (!FindNode(app->appendplans[k], fs->nkeys, &fs->arms[k])) return false;
  fs->ttmap = fs->tsq && fs->tsq->ss.ps.ps_ProjInfo ? PickedColumns(fs->tsq) : nullptr;
  fs->aslot = ExecInitExtraTupleSlot(fs->css.ss.ps.state, ExecGetResultType(t), &TTSOpsVirtual);
  return true;
}

void FillBegin(CustomScanState *node, EState *estate, int eflags) {
  FillState *fs = reinterpret_cast<FillState *>(node);
  CustomScan *cs = reinterpret_cast<CustomScan *>(node->ss.ps.plan);
  List *priv = cs->custom_private;  // (PlanFill)
  int at = 0;
  fs->nt = list_nth_int(priv, at++);
  fs->nkeys = list_nth_int(priv, at++);
  fs->fatt = static_cast<AttrNumber *>(palloc0(sizeof(AttrNumber) * (fs->nkeys + 1)));
  fs->fmax = 0;
  for (int k = 0; k < fs->nkeys; k++) {
    fs->fatt[k] = static_cast<AttrNumber>(list_nth_int(priv, at++));
    fs->fmax = Max(fs->fmax, fs->fatt[k]);
  }
  fs->nsafe = static_cast<bool *>(palloc0(fs->nkeys + 1));
  for (int k = 0; k < fs->nkeys; k++) fs->nsafe[k] = list_nth_int(priv, at++) != 0;
  fs->kv = static_cast<Datum *>(palloc0(sizeof(Datum) * (fs->nkeys + 1)));
  fs->kn = static_cast<bool *>(palloc0(fs->nkeys + 1));
  fs->sum = list_nth_int(priv, at++) != 0;
  fs->narms = list_nth_int(priv, at++);
  fs->arms = static_cast<Arm *>(palloc0(sizeof(Arm) * fs->narms));
  for (int a = 0; a < fs->narms; a++) {
    Arm *arm = &fs->arms[a];
    arm->key = static_cast<int *>(palloc(sizeof(int) * (fs->nkeys + 1)));
    for (int g = 0; g < fs->nkeys; g++) arm->key[g] = list_nth_int(priv, at++);
    for (int side = 0; side < 2; side++) {
      arm->kv[side] = static_cast<Datum *>(palloc0(sizeof(Datum) * (fs->nkeys + 1)));
      arm->kn[side] = static_cast<bool *>(palloc0(fs->nkeys + 1));
    }
    arm->lookup = "none (not run)";
  }
  fs->nscan = list_length(cs->custom_scan_tlist);
  fs->fbmap = static_cast<AttrNumber *>(palloc0(sizeof(AttrNumber) * (fs->nscan + 1)));
  for (int c = 0; c < fs->nscan; c++) fs->fbmap[c] = static_cast<AttrNumber>(list_nth_int(priv, at++));
  int child_flags = eflags & ~(EXEC_FLAG_BACKWARD | EXEC_FLAG_MARK);
  PlanState *t = ExecInitNode(static_cast<Plan *>(linitial(cs->custom_plans)), estate, child_flags);
  PlanState *f = ExecInitNode(static_cast<Plan *>(lsecond(cs->custom_plans)), estate, child_flags);
  node->custom_ps = list_make2(t, f);
  fs->fallback = nullptr;
  // (instrumented under a Gather: the fallback now, as the contraction
  // node's InitChildren says why)
  if (estate->es_instrument && (IsParallelWorker() || estate->es_plannedstmt->parallelModeNeeded)) InitFallback(fs);
  // The contraction node: t's child, or t itself where setrefs.c removed a
  // Subquery Scan that only passed its rows on; for a sum, each arm's.
  fs->found = fs->sum ? FindSum(fs, t) : fs->narms == 1 && FindNode(t, fs->nkeys, &fs->arms[0]);
  fs->cxt = AllocSetContextCreate(estate->es_query_cxt, "ddx fill", ALLOCSET_DEFAULT_SIZES);
  fs->started = fs->fellback = false;
  fs->why = nullptr;
  fs->fill_rows = 0;
}

// The groups of an arm's node by their ids (those its key conditions
// rejected left out): dense cells where the pairs of ids are few for the
// groups, else a hash table.
void IndexGroups(FillState *fs, Arm *arm) {
  State *st = arm->node;
  const GroupTable &g = st->groups;
  uint64 na = st->g[0].n, nb = st->g[1].n;
  arm->nb = static_cast<uint32>(nb);
  arm->cells = nullptr;
  arm->hkeys = nullptr;
  if (na * nb <= Max(static_cast<uint64>(g.n) * 4, 1024)) {
    arm->lookup = "dense";
    arm->cells = static_cast<int32 *>(Alloc(fs->cxt, sizeof(int32) * na * nb));
    memset(arm->cells, -1, sizeof(int32) * na * nb);
    for (uint32 at = 0; at < g.n; at++)
      if (GroupOk(g, at))
        arm->cells[static_cast<uint64>(GroupIda(g, at)) * nb + GroupIdb(g, at)] = static_cast<int32>(at);
    return;
  }
  arm->lookup = "hash";
  uint32 ns = 1024;
  while (ns < static_cast<uint64>(g.n) * 2) ns *= 2;
  arm->hslots = ns;
  arm->hkeys = static_cast<uint64 *>(Alloc(fs->cxt, sizeof(uint64) * ns));
  arm->hat = static_cast<uint32 *>(Alloc(fs->cxt, sizeof(uint32) * ns));
  memset(arm->hkeys, 0, sizeof(uint64) * ns);
  for (uint32 at = 0; at < g.n; at++) {
    if (!GroupOk(g, at)) continue;
    uint64 key = ((static_cast<uint64>(GroupIda(g, at)) << 32) | GroupIdb(g, at)) + 1;
    uint32 i = Mix64(key) & (ns - 1);
    while (arm->hkeys[i]) i = (i + 1) & (ns - 1);
    arm->hkeys[i] = key;
    arm->hat[i] = at;
  }
}

int32 FindGroup(const Arm *arm, uint32 ida, uint32 idb) {
  if (arm->cells) return arm->cells[static_cast<uint64>(ida) * arm->nb + idb];
  uint64 key = ((static_cast<uint64>(ida) << 32) | idb) + 1;
  uint32 mask = arm->hslots - 1;
  for (uint32 i = Mix64(key) & mask; arm->hkeys[i]; i = (i + 1) & mask)
    if (arm->hkeys[i] == key) return static_cast<int32>(arm->hat[i]);
  return -1;
}

// The nodes' groups built, each timed as its own (EXPLAIN ANALYZE shows
// its time and no rows: none is formed), and indexed; or the fallback
// chosen.
void Start(FillState *fs) {
  fs->started = true;
  if (!fs->found) {
    fs->why = fs->sum ? "no sum of contraction nodes under the subquery" : "no contraction node under the subquery";
  } else {
    // (t and the nodes never run: rescanned here where a parameter changed,
    // as their ExecProcNode would; a sum's nodes lie under a HashAggregate
    // and an Append that never run either, and are rescanned on the fill's
    // rescan, FillReScan)
    PlanState *t = static_cast<PlanState *>(linitial(fs->css.custom_ps));
    if (t->chgParam) ExecReScan(t);
    bool built = true;
    for (int a = 0; a < fs->narms && built; a++) {
      State *st = fs->arms[a].node;
      if (st->css.ss.ps.chgParam) ExecReScan(&st->css.ss.ps);
      Instrumentation *instr = st->css.ss.ps.instrument;
      if (instr) InstrStartNode(instr);
      built = EnsureBuilt(st);
      if (instr) InstrStopNode(instr, 0);
    }
    if (built) {
      for (int a = 0; a < fs->narms; a++) IndexGroups(fs, &fs->arms[a]);
      return;
    }
    fs->why = "the contraction's memory limit reached: PostgreSQL's join ran";
  }
  fs->fellback = true;
  if (!fs->fallback) InitFallback(fs);
}

// The id of the arm's keys (kv) in side `side`'s key table, or -1.
int32 SideId(Arm *arm, int side) {
  KeyTable *t = &arm->node->g[side];
  if (t->nkeys == 0) return t->n > 0 ? 0 : -1;
  uint32 h, slot;
  return KeyFind(t, arm->kv[side], arm->kn[side], &h, &slot);
}

// The row that a Subquery Scan `sq` (or none) returns for its subplan's row
// t: t projected where the scan computes its columns, t itself where it only
// picks them (`picked`: read in place) or passes them on.
TupleTableSlot *Through(SubqueryScanState *sq, const AttrNumber *picked, TupleTableSlot *t) {
  if (!sq || !sq->ss.ps.ps_ProjInfo || picked) return t;
  ExprContext *ec = sq->ss.ps.ps_ExprContext;
  ResetExprContext(ec);
  ec->ecxt_scantuple = t;
  return ExecProject(sq->ss.ps.ps_ProjInfo);
}

// The row of the arm's group that the fill row's keys (kv, kn per key of t)
// find, as the arm's plan returns it (through its Subquery Scan), or
// nullptr where it has no such group.
TupleTableSlot *ArmRow(Arm *arm, const Datum *kv, const bool *kn) {
  State *st = arm->node;
  for (int g = 0; g < st->ng; g++) {
    arm->kv[st->gside[g]][st->gpos[g]] = kv[arm->key[g]];
    arm->kn[st->gside[g]][st->gpos[g]] = kn[arm->key[g]];
  }
  int32 ida = SideId(arm, 0), idb = ida < 0 ? -1 : SideId(arm, 1);
  int32 at = idb < 0 ? -1 : FindGroup(arm, static_cast<uint32>(ida), static_cast<uint32>(idb));
  if (at < 0) return nullptr;
  TupleTableSlot *t = Through(arm->sq, arm->tmap, GroupRow(st, static_cast<uint32>(at), false));
  slot_getallattrs(t);
  return t;
}

// Column c of an arm's row (ArmRow).
inline Datum ArmValue(const Arm *arm, TupleTableSlot *t, AttrNumber c, bool *isnull) {
  if (arm->tmap) c = arm->tmap[c - 1];
  *isnull = t->tts_isnull[c - 1];
  return t->tts_values[c - 1];
}

// Where t is a sum: the HashAggregate's row of the fill row's group, each
// key from the first arm that has the group, each sum(float8) over the arms
// in the Append's order, as the aggregate adds its input rows (float8pl,
// NULLs skipped; its errors); nullptr where no arm has it.
TupleTableSlot *SumRow(FillState *fs, const Datum *kv, const bool *kn) {
  TupleTableSlot *r = fs->aslot;
  ExecClearTuple(r);
  bool any = false;
  for (int a = 0; a < fs->narms; a++) {
    Arm *arm = &fs->arms[a];
    TupleTableSlot *t = ArmRow(arm, kv, kn);
    if (!t) continue;
    for (int c = 0; c < fs->nacol; c++) {
      bool isnull;
      Datum v = ArmValue(arm, t, fs->acols[c].col, &isnull);
      if (!any) {
        r->tts_values[c] = v;
        r->tts_isnull[c] = isnull;
      } else if (fs->acols[c].sum && !isnull) {
        r->tts_values[c] =
            r->tts_isnull[c] ? v : Float8GetDatum(float8_pl(DatumGetFloat8(r->tts_values[c]), DatumGetFloat8(v)));
        r->tts_isnull[c] = false;
      }
    }
    any = true;
  }
  if (!any) return nullptr;
  ExecStoreVirtualTuple(r);
  r = Through(fs->tsq, fs->ttmap, r);
  slot_getallattrs(r);
  return r;
}

TupleTableSlot *FillExec(CustomScanState *node) {
  FillState *fs = reinterpret_cast<FillState *>(node);
  if (!fs->started) Start(fs);
  ExprContext *ec = node->ss.ps.ps_ExprContext;
  ProjectionInfo *proj = node->ss.ps.ps_ProjInfo;
  TupleTableSlot *scan = node->ss.ss_ScanTupleSlot;
  if (fs->fellback) {  // (its rows meet the join's clauses)
    TupleTableSlot *t = ExecProcNode(fs->fallback);
    if (TupIsNull(t)) return nullptr;
    slot_getallattrs(t);
    ExecClearTuple(scan);
    for (int c = 0; c < fs->nscan; c++) {
      AttrNumber a = fs->fbmap[c];
      scan->tts_values[c] = a ? t->tts_values[a - 1] : 0;
      scan->tts_isnull[c] = a ? t->tts_isnull[a - 1] : true;
    }
    ExecStoreVirtualTuple(scan);
    if (!proj) return scan;
    ResetExprContext(ec);
    ec->ecxt_scantuple = scan;
    return ExecProject(proj);
  }
  PlanState *fill = static_cast<PlanState *>(lsecond(node->custom_ps));
  Datum *kv = fs->kv;
  bool *kn = fs->kn;
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    TupleTableSlot *f = ExecProcNode(fill);
    if (TupIsNull(f)) return nullptr;
    fs->fill_rows++;
    slot_getsomeattrs(f, fs->fmax);
    bool null = false;
    for (int k = 0; k < fs->nkeys && !null; k++) {
      int a = fs->fatt[k] - 1;
      kn[k] = f->tts_isnull[a];
      null = kn[k] && !fs->nsafe[k];  // (= is false for it: no group; NULL-safe, the NULL group)
      kv[k] = kn[k] ? 0 : f->tts_values[a];
    }
    if (null) continue;
    TupleTableSlot *t;
    const AttrNumber *tmap;
    if (fs->sum) {
      t = SumRow(fs, kv, kn);
      tmap = fs->ttmap;
    } else {
      t = ArmRow(&fs->arms[0], kv, kn);
      tmap = fs->arms[0].tmap;
    }
    if (!t) continue;
    slot_getallattrs(f);
    ExecClearTuple(scan);
    int nf = f->tts_tupleDescriptor->natts;
    if (tmap) {
      for (int c = 0; c < fs->nt; c++) {
        scan->tts_values[c] = t->tts_values[tmap[c] - 1];
        scan->tts_isnull[c] = t->tts_isnull[tmap[c] - 1];
      }
    } else {
      memcpy(scan->tts_values, t->tts_values, sizeof(Datum) * fs->nt);
      memcpy(scan->tts_isnull, t->tts_isnull, fs->nt);
    }
    memcpy(scan->tts_values + fs->nt, f->tts_values, sizeof(Datum) * nf);
    memcpy(scan->tts_isnull + fs->nt, f->tts_isnull, nf);
    ExecStoreVirtualTuple(scan);
    ResetExprContext(ec);
    ec->ecxt_scantuple = scan;
    if (node->ss.ps.qual && !ExecQual(node->ss.ps.qual, ec)) continue;
    return proj ? ExecProject(proj) : scan;
  }
}

void FillEnd(CustomScanState *node) {
  FillState *fs = reinterpret_cast<FillState *>(node);
  EndChildren(node);
  MemoryContextDelete(fs->cxt);
}

void FillReScan(CustomScanState *node) {
  FillState *fs = reinterpret_cast<FillState *>(node);
  MemoryContextReset(fs->cxt);
  fs->started = fs->fellback = false;
  fs->why = nullptr;
  // (t's rescan resets the contraction node below it; where t was told of a
  // changed parameter, Start rescans it)
  RescanChildren(node, nullptr, 0);
  // (a sum's nodes: the HashAggregate above them, never run, returns from
  // its rescan at once, ExecReScanAgg, and its Append never hears of it;
  // each node is told which parameters changed, as ExecReScanAppend would
  // tell it, so that what it reads is rescanned with them)
  if (fs->sum && fs->found) {
    for (int a = 0; a < fs->narms; a++) {
      PlanState *arm = &fs->arms[a].node->css.ss.ps;
      if (node->ss.ps.chgParam) UpdateChangedParamSet(arm, node->ss.ps.chgParam);
      ExecReScan(arm);
    }
  }
}

void FillExplain(CustomScanState *node, List *, ExplainState *es) {
  FillState *fs = reinterpret_cast<FillState *>(node);
  ExplainPropertyInteger("Fill Keys", nullptr, fs->nkeys, es);
  int nsafe = 0;
  for (int k = 0; k < fs->nkeys; k++) nsafe += fs->nsafe[k] ? 1 : 0;
  if (nsafe > 0) ExplainPropertyInteger("Null-Safe Keys", nullptr, nsafe, es);
  if (fs->sum) ExplainPropertyInteger("Summed Contractions", nullptr, fs->narms, es);
  if (!es->analyze) return;
  if (fs->fellback) {
    ExplainPropertyText("Fell Back", fs->why, es);
  } else if (!fs->started && node->ss.ps.worker_instrument) {
    ExplainPropertyText("Ran In", "parallel workers, whose counts are not shown", es);
  } else {
    ExplainPropertyFloat("Fill Rows", nullptr, fs->fill_rows, 0, es);
    StringInfoData lookup;
    initStringInfo(&lookup);
    for (int a = 0; a < fs->narms; a++) appendStringInfo(&lookup, "%s%s", a ? ", " : "", fs->arms[a].lookup);
    ExplainPropertyText("Group Lookup", lookup.data, es);
  }
}

}  // namespace

const CustomPathMethods kFillPathMethods = {"ddx fill", PlanFill};
const CustomScanMethods kFillScanMethods = {"ddx fill", CreateFillState};
const CustomExecMethods kFillExecMethods = {"ddx fill", FillBegin, FillExec, FillEnd, FillReScan, nullptr,    nullptr,
                                            nullptr,    nullptr,   nullptr,  nullptr, nullptr,    FillExplain};

Node *CreateFillState(CustomScan *) {
  FillState *fs = reinterpret_cast<FillState *>(newNode(sizeof(FillState), T_CustomScanState));
  fs->css.methods = &kFillExecMethods;
  return reinterpret_cast<Node *>(&fs->css);
}

}  // namespace ddx::pg::contraction
