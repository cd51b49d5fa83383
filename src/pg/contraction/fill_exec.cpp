// The executor's side of `Custom Scan (ddx fill)` (fill.h): the contraction
// node below its first child computes its groups; each row of the fill
// (the second child) finds its group by its key columns' ids in the node's
// key tables, and the row of t that PostgreSQL's join would pair it with is
// the node's row of that group, through the Subquery Scan's projection. The
// join's clauses that the lookup does not test are checked on each row it
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
#include "miscadmin.h"
}

namespace ddx::pg::contraction {

namespace {

struct FillState {
  CustomScanState css;
  int nt, ng;              // t's columns; the group keys
  AttrNumber *fatt;        // per group key: its column of the fill
  AttrNumber fmax;         // the highest of them
  int nscan;               // the scan tuple's columns
  AttrNumber *fbmap;       // per scan column: the fallback's column with it, 0 none (not read above)
  State *node;             // the contraction node below t, or nullptr
  SubqueryScanState *sq;   // the Subquery Scan between, or nullptr
  const AttrNumber *tmap;  // where it only picks columns: t's column c is the node's tmap[c]
  PlanState *fallback;
  MemoryContext cxt;
  bool started, fellback;
  const char *why;  // why the fallback ran
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

void FillBegin(CustomScanState *node, EState *estate, int eflags) {
  FillState *fs = reinterpret_cast<FillState *>(node);
  CustomScan *cs = reinterpret_cast<CustomScan *>(node->ss.ps.plan);
  List *priv = cs->custom_private;  // (PlanFill)
  fs->nt = linitial_int(priv);
  fs->ng = lsecond_int(priv);
  fs->fatt = static_cast<AttrNumber *>(palloc0(sizeof(AttrNumber) * (fs->ng + 1)));
  fs->fmax = 0;
  for (int g = 0; g < fs->ng; g++) {
    fs->fatt[g] = static_cast<AttrNumber>(list_nth_int(priv, g + 2));
    fs->fmax = Max(fs->fmax, fs->fatt[g]);
  }
  fs->nscan = list_length(cs->custom_scan_tlist);
  fs->fbmap = static_cast<AttrNumber *>(palloc0(sizeof(AttrNumber) * (fs->nscan + 1)));
  for (int c = 0; c < fs->nscan; c++) fs->fbmap[c] = static_cast<AttrNumber>(list_nth_int(priv, 2 + fs->ng + c));
  int child_flags = eflags & ~(EXEC_FLAG_BACKWARD | EXEC_FLAG_MARK);
  PlanState *t = ExecInitNode(static_cast<Plan *>(linitial(cs->custom_plans)), estate, child_flags);
  PlanState *f = ExecInitNode(static_cast<Plan *>(lsecond(cs->custom_plans)), estate, child_flags);
  node->custom_ps = list_make2(t, f);
  fs->fallback = nullptr;
  // (instrumented under a Gather: the fallback now, as the contraction
  // node's InitChildren says why)
  if (estate->es_instrument && (IsParallelWorker() || estate->es_plannedstmt->parallelModeNeeded)) InitFallback(fs);
  // The contraction node: t's child, or t itself where setrefs.c removed a
  // Subquery Scan that only passed its rows on.
  fs->sq = nullptr;
  fs->node = nullptr;
  PlanState *p = t;
  if (IsA(p, SubqueryScanState) && !p->qual) {
    fs->sq = reinterpret_cast<SubqueryScanState *>(p);
    p = fs->sq->subplan;
  }
  if (IsA(p, CustomScanState) && reinterpret_cast<CustomScanState *>(p)->methods == &kExecMethods) {
    State *st = reinterpret_cast<State *>(p);
    if (st->ng == fs->ng && !st->numbered) fs->node = st;
  }
  // (a Subquery Scan that only picks columns: they are read, not projected,
  // as ReadThrough reads a side of the contraction node)
  fs->tmap = fs->sq && fs->sq->ss.ps.ps_ProjInfo ? PickedColumns(fs->sq) : nullptr;
  for (int side = 0; side < 2; side++) {
    fs->kv[side] = static_cast<Datum *>(palloc0(sizeof(Datum) * (fs->ng + 1)));
    fs->kn[side] = static_cast<bool *>(palloc0(fs->ng + 1));
  }
  fs->cxt = AllocSetContextCreate(estate->es_query_cxt, "ddx fill", ALLOCSET_DEFAULT_SIZES);
  fs->started = fs->fellback = false;
  fs->why = nullptr;
  fs->lookup = "none (not run)";
  fs->fill_rows = 0;
}

// The groups of the node by their ids (those its key conditions rejected
// left out): dense cells where the pairs of ids are few for the groups,
// else a hash table.
void IndexGroups(FillState *fs) {
  State *st = fs->node;
  const GroupTable &g = st->groups;
  uint64 na = st->g[0].n, nb = st->g[1].n;
  fs->nb = static_cast<uint32>(nb);
  fs->cells = nullptr;
  fs->hkeys = nullptr;
  if (na * nb <= Max(static_cast<uint64>(g.n) * 4, 1024)) {
    fs->lookup = "dense";
    fs->cells = static_cast<int32 *>(Alloc(fs->cxt, sizeof(int32) * na * nb));
    memset(fs->cells, -1, sizeof(int32) * na * nb);
    for (uint32 at = 0; at < g.n; at++)
      if (g.ok[at]) fs->cells[static_cast<uint64>(g.ida[at]) * nb + g.idb[at]] = static_cast<int32>(at);
    return;
  }
  fs->lookup = "hash";
  uint32 ns = 1024;
  while (ns < static_cast<uint64>(g.n) * 2) ns *= 2;
  fs->hslots = ns;
  fs->hkeys = static_cast<uint64 *>(Alloc(fs->cxt, sizeof(uint64) * ns));
  fs->hat = static_cast<uint32 *>(Alloc(fs->cxt, sizeof(uint32) * ns));
  memset(fs->hkeys, 0, sizeof(uint64) * ns);
  for (uint32 at = 0; at < g.n; at++) {
    if (!g.ok[at]) continue;
    uint64 key = ((static_cast<uint64>(g.ida[at]) << 32) | g.idb[at]) + 1;
    uint32 i = Mix64(key) & (ns - 1);
    while (fs->hkeys[i]) i = (i + 1) & (ns - 1);
    fs->hkeys[i] = key;
    fs->hat[i] = at;
  }
}

int32 FindGroup(const FillState *fs, uint32 ida, uint32 idb) {
  if (fs->cells) return fs->cells[static_cast<uint64>(ida) * fs->nb + idb];
  uint64 key = ((static_cast<uint64>(ida) << 32) | idb) + 1;
  uint32 mask = fs->hslots - 1;
  for (uint32 i = Mix64(key) & mask; fs->hkeys[i]; i = (i + 1) & mask)
    if (fs->hkeys[i] == key) return static_cast<int32>(fs->hat[i]);
  return -1;
}

// The node's groups built, timed as its own (EXPLAIN ANALYZE shows its time
// and no rows: none is formed), and indexed; or the fallback chosen.
void Start(FillState *fs) {
  fs->started = true;
  if (!fs->node) {
    fs->why = "no contraction node under the subquery";
  } else {
    // (t and the node never run: rescanned here where a parameter changed,
    // as their ExecProcNode would)
    PlanState *t = static_cast<PlanState *>(linitial(fs->css.custom_ps));
    if (t->chgParam) ExecReScan(t);
    if (fs->node->css.ss.ps.chgParam) ExecReScan(&fs->node->css.ss.ps);
    Instrumentation *instr = fs->node->css.ss.ps.instrument;
    if (instr) InstrStartNode(instr);
    bool built = EnsureBuilt(fs->node);
    if (instr) InstrStopNode(instr, 0);
    if (built) {
      IndexGroups(fs);
      return;
    }
    fs->why = "the contraction's memory limit reached: PostgreSQL's join ran";
  }
  fs->fellback = true;
  if (!fs->fallback) InitFallback(fs);
}

// The id of the fill row's keys in side `side`'s key table, or -1.
int32 SideId(FillState *fs, int side) {
  KeyTable *t = &fs->node->g[side];
  if (t->nkeys == 0) return t->n > 0 ? 0 : -1;
  uint32 h, slot;
  return KeyFind(t, fs->kv[side], fs->kn[side], &h, &slot);
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
  State *st = fs->node;
  PlanState *fill = static_cast<PlanState *>(lsecond(node->custom_ps));
  for (;;) {
    CHECK_FOR_INTERRUPTS();
    TupleTableSlot *f = ExecProcNode(fill);
    if (TupIsNull(f)) return nullptr;
    fs->fill_rows++;
    slot_getsomeattrs(f, fs->fmax);
    bool null = false;
    for (int g = 0; g < fs->ng && !null; g++) {
      int a = fs->fatt[g] - 1;
      null = f->tts_isnull[a];  // (= is false for it: no group)
      fs->kv[st->gside[g]][st->gpos[g]] = f->tts_values[a];
      fs->kn[st->gside[g]][st->gpos[g]] = false;
    }
    if (null) continue;
    int32 ida = SideId(fs, 0), idb = ida < 0 ? -1 : SideId(fs, 1);
    int32 at = idb < 0 ? -1 : FindGroup(fs, static_cast<uint32>(ida), static_cast<uint32>(idb));
    if (at < 0) continue;
    TupleTableSlot *t = GroupRow(st, static_cast<uint32>(at), false);
    if (fs->sq && fs->sq->ss.ps.ps_ProjInfo && !fs->tmap) {
      ExprContext *tec = fs->sq->ss.ps.ps_ExprContext;
      ResetExprContext(tec);
      tec->ecxt_scantuple = t;
      t = ExecProject(fs->sq->ss.ps.ps_ProjInfo);
    }
    slot_getallattrs(t);
    slot_getallattrs(f);
    ExecClearTuple(scan);
    int nf = f->tts_tupleDescriptor->natts;
    if (fs->tmap) {
      for (int c = 0; c < fs->nt; c++) {
        scan->tts_values[c] = t->tts_values[fs->tmap[c] - 1];
        scan->tts_isnull[c] = t->tts_isnull[fs->tmap[c] - 1];
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
}

void FillExplain(CustomScanState *node, List *, ExplainState *es) {
  FillState *fs = reinterpret_cast<FillState *>(node);
  ExplainPropertyInteger("Fill Keys", nullptr, fs->ng, es);
  if (!es->analyze) return;
  if (fs->fellback) {
    ExplainPropertyText("Fell Back", fs->why, es);
  } else if (!fs->started && node->ss.ps.worker_instrument) {
    ExplainPropertyText("Ran In", "parallel workers, whose counts are not shown", es);
  } else {
    ExplainPropertyFloat("Fill Rows", nullptr, fs->fill_rows, 0, es);
    ExplainPropertyText("Group Lookup", fs->lookup, es);
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
