// The node's executor state, shared by exec.cpp, build.cpp and explain.cpp;
// and Eval, which reads a row's expressions.
#pragma once
#include "contraction.h"
#include "groups.h"
#include "key_table.h"

extern "C" {
#include "postgres.h"

#include "executor/executor.h"
#include "nodes/execnodes.h"
}

// Shared by the node's files only: hidden, so that calls bind inside ddx.so
// (as the anonymous namespace of the one file they came from had them).
#pragma GCC visibility push(hidden)

namespace ddx::pg::contraction {

// Expressions over a child's tuple (OUTER_VAR), evaluated per input row.
// Where each is a plain Var of the child's output or a constant (the other
// side's 1 of a count or of a sum of one side), its value is read from the
// slot or the Const, not run through ExecEvalExpr: the matmul's 160k probe
// rows evaluate three lists of Vars each (bench/RESULTS.md has the profile).
struct Exprs {
  List *states;  // ExprStates
  int n;
  bool direct;      // every one a Var or a Const
  AttrNumber *att;  // per expression: its attribute, 0 for a Const
  Datum *cval;      // per expression: a Const's value
  bool *cnull;
  bool *float4;      // per expression: a float4 (a factor: Factor widens it)
  AttrNumber natts;  // the highest attribute
};

// An output aggregate's accumulator: its spec, its kind's row of the table,
// and its first slot among a group's nagg slots (and a row's factors).
struct Accumulator {
  AccSpec spec;
  const AccKindOps *ops;
  int slot;
};

// A grouping set's groups (ContractionPlan::sets): its keys interned, a
// group's id its keys' id, and each group's nagg accumulator slots at that
// id. Arrays in the node's context.
struct GroupingSet {
  int nkeys;
  int *key;         // per key: its place among the group keys (the scan tuple's column)
  int32 *grouping;  // per GROUPING() call: its value in this set
  KeyTable keys;
  uint32 cap;   // groups with room for their slots
  double *sum;  // cap * nagg
  bool *has;
};

// The node while it runs: what Begin read from the plan (expressions,
// functions, accumulators), the build side's rows, the key tables and the
// groups, in the node's memory context (cxt, reset by a fallback or a
// rescan), and what EXPLAIN ANALYZE reports.
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
  // The output aggregates' accumulators: nout of them, taking nagg slots
  // of a group (the "sums" below) and nagg factors of a row.
  int nout;
  Accumulator *accs;
  bool plain;  // one accumulator, a float8 sum (the pairing loop's fast path)
  // Per accumulator, its pair term's state (ContractionPlan::pair_terms),
  // or null; any_pair where one has one. Evaluated in lec over the build
  // row (lslot, inner) and the probe row (outer).
  ExprState **pair;
  bool any_pair;
  double *ptv;  // a pair's terms (nagg), NULL where ptn
  bool *ptn;
  int16 *klen;  // the build side's join keys' types
  bool *kbyval;
  // the build side's rows
  uint32 nrows, rowcap;
  uint32 *rhash, *rgid;
  int32 *rnext;
  Datum *rkeys;  // rowcap * nk
  double *rf;    // rowcap * nagg
  bool *rfnull;
  // Lazy factors (ContractionPlan::lazy_factors): each build row's child tuple (bnatts
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
  uint32 *rkid;       // per build row: its key's id (before the runs are formed)
  uint32 *run;        // jk.n + 1 starts
  bool *run_null;     // per run: a NULL factor in one of its rows
  KeyTable g[2];      // group ids of the build and the probe side
  GroupTable groups;  // the groups, returned from here
  DenseCells dense;   // where the build side has few groups, until the end
  bool numbered;      // row_number() OVER () as the scan tuple's last column (NumberGroups)
  int64 rownum;       // the last group's
  bool built, fellback;
  bool emitted;  // a row returned since the last (re)start
  uint32 emit;
  double pairs;
  size_t limit, peak;
  PlanState *fallback;
  // What each side (kBuild, kProbe) is read from: its child, or that
  // child's subplan where the child is a Subquery Scan that only picks
  // columns (ReadThrough); through[side] says which.
  PlanState *input[2];
  bool through[2];
  // GROUP BY GROUPING SETS of one relation: nsets sets (0: a plain GROUP
  // BY), each probe row into one group of each; ngrouping GROUPING()
  // columns after the aggregates; the set being emitted.
  int nsets, ngrouping;
  GroupingSet *sets;
  int emit_set;
};

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

void KeysToSlot(State *st, TupleTableSlot *slot, uint32 ida, uint32 idb);
bool Build(State *st);
// The scan tuple in `slot` as a node of ours returns it: projected where
// its plan projects.
TupleTableSlot *Projected(CustomScanState *node, TupleTableSlot *slot);
// The row of group `id` of grouping set `set` (exec.cpp).
TupleTableSlot *SetRow(State *st, int set, uint32 id);
// The groups built (Build), or PostgreSQL's plan taken over (FallBack):
// true where the groups are there to read (exec.cpp).
bool EnsureBuilt(State *st);
// A custom node's children (custom_ps) rescanned, told which parameters
// changed; now[i], the ith rescanned at once (one that never runs its own
// ExecProcNode); and ended (exec.cpp).
void RescanChildren(CustomScanState *node, const bool *now, int nnow);
void EndChildren(CustomScanState *node);
// Where a Subquery Scan only picks columns of its subplan (no condition,
// each column a Var of the subplan's): its column c is the subplan's
// map[c - 1]; else nullptr (exec.cpp).
const AttrNumber *PickedColumns(SubqueryScanState *sq);
// The node's row of the group `at` (none: the row of a plain aggregate
// that joined no pair), as Exec returns it: projected, numbered.
TupleTableSlot *GroupRow(State *st, uint32 at, bool none);

}  // namespace ddx::pg::contraction

#pragma GCC visibility pop
