// Build: the node's work, the build side read and the probe side streamed
// into the groups (exec.h).
#include "exec.h"

extern "C" {
#include "postgres.h"

#include "miscadmin.h"
#include "utils/datum.h"
#include "utils/float.h"
}

namespace ddx::pg::contraction {

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

namespace {

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

bool OverLimit(State *st) {
  size_t used = MemoryContextMemAllocated(st->cxt, true);
  if (used > st->peak) st->peak = used;
  return used > st->limit;
}

// Build row r's kept values (lazy_factors) in lslot, with lec reset for
// expressions over it.
TupleTableSlot *KeptRow(State *st, uint32 r) {
  ResetExprContext(st->lec);
  TupleTableSlot *s = st->lslot;
  ExecClearTuple(s);
  memcpy(s->tts_values, &st->rvals[static_cast<Size>(r) * st->bnatts], sizeof(Datum) * st->bnatts);
  memcpy(s->tts_isnull, &st->rvnull[static_cast<Size>(r) * st->bnatts], st->bnatts);
  ExecStoreVirtualTuple(s);
  return s;
}

// A build row's factors, on its first pair (lazy_factors): from its child
// tuple's values, kept at the build. PostgreSQL computes an aggregate's
// argument only for the join's rows, after the join's other conditions: so
// does this, called for a pair the key conditions kept.
void LazyFactors(State *st, uint32 r) {
  ExprContext *lec = st->lec;
  lec->ecxt_outertuple = KeptRow(st, r);
  Eval(st->bfactors, lec, st->lfv, st->lfn);
  for (int a = 0; a < st->nagg; a++) {
    st->rfnull[r * st->nagg + a] = st->lfn[a];
    st->rf[r * st->nagg + a] = st->lfn[a] ? 0 : Factor(st->lfv[a], st->bfactors.float4[a]);
  }
  st->rdone[r] = true;
}

// The pair terms of build row r with the probe row `probe` into ptv, ptn
// (each at its accumulator's slot): over the build row's kept values
// (inner) and the probe row (outer), in lec. PostgreSQL evaluates an
// aggregate's argument for each row of the join, after the join's
// conditions: so does this, for each pair the key conditions kept.
void PairTerms(State *st, uint32 r, TupleTableSlot *probe) {
  ExprContext *lec = st->lec;
  lec->ecxt_innertuple = KeptRow(st, r);
  lec->ecxt_outertuple = probe;
  for (int o = 0; o < st->nout; o++) {
    if (!st->pair[o]) continue;
    int a = st->accs[o].slot;
    bool isnull;
    Datum v = ExecEvalExprSwitchContext(st->pair[o], lec, &isnull);
    st->ptn[a] = isnull;
    st->ptv[a] = isnull ? 0.0 : DatumGetFloat8(v);
  }
}

// The arrays Build evaluates an input row into, in the node's context: its
// join keys (kv, kn), its group keys (gv, gn) and its factors (fv, fn); and
// the probe row's factors as doubles (pf).
struct Scratch {
  Datum *kv, *gv, *fv;
  bool *kn, *gn, *fn;
  double *pf;
};

// The probe row being paired: its group id, the first of its dense cells
// (base), whether its factors are in pf and fn yet, and its tuple.
struct ProbeRow {
  uint32 gid, base;
  bool factors_done;
  TupleTableSlot *slot;
};

// Allocates Build's scratch and starts its tables, in the order the build
// always had (the node's memory is measured: OverLimit, Peak Memory).
void BuildStart(State *st, Scratch *x) {
  MemoryContext cxt = st->cxt;
  int nk = st->nk, nagg = st->nagg;
  x->kv = static_cast<Datum *>(Alloc(cxt, sizeof(Datum) * (nk + 1)));
  x->kn = static_cast<bool *>(Alloc(cxt, nk + 1));
  x->gv = static_cast<Datum *>(Alloc(cxt, sizeof(Datum) * (st->ng + 1)));
  x->gn = static_cast<bool *>(Alloc(cxt, st->ng + 1));
  x->fv = static_cast<Datum *>(Alloc(cxt, sizeof(Datum) * (nagg + 1)));
  x->fn = static_cast<bool *>(Alloc(cxt, nagg + 1));
  x->pf = nullptr;  // (with the probe side)
  for (int side = 0; side < 2; side++) {
    st->g[side].rows_hint = st->input[side]->plan->plan_rows;
    st->g[side].dmap_budget = st->limit / 4;
    KeyInit(cxt, &st->g[side]);
  }
  GroupTableInit(cxt, &st->groups);
  for (int set = 0; set < st->nsets; set++) {
    GroupingSet *gs = &st->sets[set];
    gs->keys.rows_hint = st->input[kProbe]->plan->plan_rows;
    gs->keys.dmap_budget = st->limit / 4;
    KeyInit(cxt, &gs->keys);
    gs->cap = 0;
    gs->sum = nullptr;
    gs->has = nullptr;
  }
  if (st->int_keys) {
    KeyTable *t = &st->jk;
    memset(t, 0, sizeof *t);
    t->nkeys = nk;
    t->integers = true;
    t->typlen = st->klen;
    t->byval = st->kbyval;
    t->rows_hint = st->input[kBuild]->plan->plan_rows;
    t->dmap_budget = st->limit / 4;
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
}

// Evaluates the row's join keys `keys` into x: false where one is NULL (a
// strict equality never holds).
inline bool EvalJoinKeys(const Exprs &keys, int nk, ExprContext *ec, Scratch *x) {
  Eval(keys, ec, x->kv, x->kn);
  bool null_key = false;
  for (int k = 0; k < nk; k++) null_key = null_key || x->kn[k];
  return !null_key;
}

// Whether to stop reading: every 1024 rows of either side, interrupts are
// checked, and memory past the limit stops the build.
inline bool OverLimitAt(State *st, uint64 *count) {
  if ((++*count & 1023) != 0) return false;
  CHECK_FOR_INTERRUPTS();
  return OverLimit(st);
}

// Room for one more build row.
void GrowRows(State *st) {
  MemoryContext cxt = st->cxt;
  int nk = st->nk, nagg = st->nagg;
  uint32 c = Max(1024u, st->rowcap * 2);
  if (st->int_keys) {
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

// Keeps the build row in `slot`, of group gid, with its values in x: its
// join key's id in jk (int_keys) or its join keys and their hash, and its
// factors, or (lazy) its child tuple's values for them.
void KeepBuildRow(State *st, TupleTableSlot *slot, const Scratch *x, uint32 gid) {
  MemoryContext cxt = st->cxt;
  int nk = st->nk, nagg = st->nagg;
  if (st->nrows == st->rowcap) GrowRows(st);
  uint32 r = st->nrows++;
  if (st->int_keys) {
    st->rkid[r] = KeyIntern(cxt, &st->jk, x->kv, x->kn);
  } else {
    st->rhash[r] = HashKeys(st->bhash, st->kcoll, nk, x->kv, x->kn);
    MemoryContext old = MemoryContextSwitchTo(cxt);
    for (int k = 0; k < nk; k++) st->rkeys[r * nk + k] = datumCopy(x->kv[k], st->kbyval[k], st->klen[k]);
    MemoryContextSwitchTo(old);
  }
  st->rgid[r] = gid;
  if (st->lazy) {  // the row's values, its factors computed on its first pair
    slot_getallattrs(slot);
    MemoryContext old = MemoryContextSwitchTo(cxt);
    for (int v = 0; v < st->bnatts; v++) {
      Form_pg_attribute att = TupleDescAttr(st->btd, v);
      bool isnull = slot->tts_isnull[v];
      st->rvnull[r * st->bnatts + v] = isnull;
      st->rvals[r * st->bnatts + v] = isnull ? 0 : datumCopy(slot->tts_values[v], att->attbyval, att->attlen);
    }
    MemoryContextSwitchTo(old);
    st->rdone[r] = false;
    for (int a = 0; a < nagg; a++) {
      st->rfnull[r * nagg + a] = false;
      st->rf[r * nagg + a] = 0;
    }
    return;
  }
  for (int a = 0; a < nagg; a++) {
    st->rfnull[r * nagg + a] = x->fn[a];
    st->rf[r * nagg + a] = x->fn[a] ? 0 : Factor(x->fv[a], st->bfactors.float4[a]);
  }
}

// Reads the build side into its rows; false where memory ran past the
// limit.
bool BuildSide(State *st, Scratch *x, uint64 *count) {
  ExprContext *ec = st->css.ss.ps.ps_ExprContext;
  PlanState *child = st->input[kBuild];
  for (;;) {
    TupleTableSlot *slot = ExecProcNode(child);
    if (TupIsNull(slot)) break;
    if (OverLimitAt(st, count)) return false;
    ResetExprContext(ec);
    ec->ecxt_outertuple = slot;
    if (!EvalJoinKeys(st->bkeys, st->nk, ec, x)) continue;
    Eval(st->gx[0], ec, x->gv, x->gn);
    uint32 gid = KeyIntern(st->cxt, &st->g[0], x->gv, x->gn);
    if (!st->lazy) Eval(st->bfactors, ec, x->fv, x->fn);
    KeepBuildRow(st, slot, x, gid);
  }
  return true;
}

// The build rows in runs of one join key (int_keys), in the order of the
// keys' ids in jk: a counting sort, stable. run[id] .. run[id + 1] - 1 are
// the rows of key id; run_null[id], whether one of them has a NULL factor.
void SortRuns(State *st) {
  MemoryContext cxt = st->cxt;
  int nagg = st->nagg;
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
  Datum *vals =
      st->lazy ? static_cast<Datum *>(Alloc(cxt, sizeof(Datum) * (static_cast<Size>(st->nrows) * bn + 1))) : nullptr;
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
}

// The build rows in hash buckets by their join keys' hash (chained by
// rnext), where the keys are not all integers.
void HashBuckets(State *st) {
  uint32 nb = 1;
  while (nb < st->nrows) nb <<= 1;
  st->nbuckets = nb;
  st->buckets = static_cast<int32 *>(Alloc(st->cxt, sizeof(int32) * nb));
  memset(st->buckets, -1, sizeof(int32) * nb);
  for (uint32 r = 0; r < st->nrows; r++) {
    uint32 b = st->rhash[r] & (nb - 1);
    st->rnext[r] = st->buckets[b];
    st->buckets[b] = static_cast<int32>(r);
  }
}

// The probe row's factors: on its first pair, or, with key conditions, on
// its first pair they keep. PostgreSQL computes an aggregate's argument
// only for the pairs the join's conditions keep: a factor that raises on a
// row whose pairs the conditions all reject must not raise.
void ProbeFactors(State *st, Scratch *x, ProbeRow *p) {
  Eval(st->pfactors, st->css.ss.ps.ps_ExprContext, x->fv, x->fn);
  for (int a = 0; a < st->nagg; a++) x->pf[a] = x->fn[a] ? 0 : Factor(x->fv[a], st->pfactors.float4[a]);
  p->factors_done = true;
}

// The probe row's group, on its first pair (and its factors where no key
// condition may reject the pair).
void StartProbeRow(State *st, Scratch *x, ProbeRow *p) {
  Eval(st->gx[1], st->css.ss.ps.ps_ExprContext, x->gv, x->gn);
  p->gid = KeyIntern(st->cxt, &st->g[1], x->gv, x->gn);
  p->factors_done = false;
  if (!st->quals) ProbeFactors(st, x, p);
  if (st->dense.on) (void)DenseRow(st->cxt, &st->dense, &st->groups, st->nagg, p->gid, &p->base);
}

// One pair: build row r with the probe row p (factors pf, fn), into its
// group's accumulators, each by its kind's AddPair. False where memory ran
// out.
bool Pair(State *st, Scratch *x, ProbeRow *p, uint32 r) {
  int nagg = st->nagg;
  double *sums;
  bool *hass;
  if (st->dense.on) {
    uint32 c = p->base + st->rgid[r];
    if (st->dense.state[c] == 0) {
      st->dense.state[c] = st->quals && !QualsHold(st, st->rgid[r], p->gid) ? 2 : 1;
      st->dense.touched++;
    }
    if (st->dense.state[c] == 2) return true;
    sums = &st->dense.sum[static_cast<size_t>(c) * nagg];
    hass = &st->dense.has[static_cast<size_t>(c) * nagg];
  } else {
    bool created;
    uint32 at = GroupFind(st->cxt, &st->groups, nagg, st->rgid[r], p->gid, &created);
    if (created && st->quals && !QualsHold(st, st->rgid[r], p->gid)) {
      st->groups.ok[at] = false;
      st->groups.rejected++;
    }
    if (!st->groups.ok[at]) return true;
    sums = &st->groups.sum[at * nagg];
    hass = &st->groups.has[at * nagg];
  }
  if (!p->factors_done) ProbeFactors(st, x, p);       // (a pair the key conditions kept)
  if (st->lazy && !st->rdone[r]) LazyFactors(st, r);  // (likewise)
  if (st->any_pair) PairTerms(st, r, p->slot);
  for (int o = 0; o < st->nout; o++) {
    const Accumulator &acc = st->accs[o];
    int a = acc.slot;
    if (st->pair[o])  // (its term as the build side's value)
      acc.ops->add(acc.spec, st->ptv[a], st->ptn[a], 1.0, false, &sums[a], &hass[a]);
    else
      acc.ops->add(acc.spec, st->rf[r * nagg + a], st->rfnull[r * nagg + a], x->pf[a], x->fn[a], &sums[a], &hass[a]);
  }
  st->pairs++;
  if ((static_cast<uint64>(st->pairs) & 65535) == 0) {
    CHECK_FOR_INTERRUPTS();
    if (OverLimit(st)) return false;
  }
  return true;
}

// The pairs of the probe row p with the build rows from .. to - 1, the run
// of its join key, in the common case, without Pair's branches: one float8
// sum of factors that are not NULL, into dense cells, by the same AddPair,
// with NULLs known false (PlainRuns says when). False where memory ran out.
inline bool PlainRun(State *st, const Scratch *x, const ProbeRow *p, uint32 from, uint32 to) {
  double pv = x->pf[0];
  const uint32 *rg = st->rgid;
  const double *rf = st->rf;
  uint8 *state = st->dense.state;
  double *sum = st->dense.sum;
  bool *has = st->dense.has;
  uint64 touched = 0;
  const AccSpec &spec = st->accs[0].spec;
  for (uint32 r = from; r < to; r++) {
    uint32 c = p->base + rg[r];
    if (state[c] == 0) {
      state[c] = 1;
      touched++;
    }
    // (a cell may have pairs but no sum yet: its earlier pairs' products
    // were NULL, through Pair)
    AddPair<Term::kProduct, Fold::kSum>(spec, rf[r], false, pv, false, &sum[c], &has[c]);
  }
  st->dense.touched += touched;
  uint64 before = static_cast<uint64>(st->pairs);
  st->pairs += to - from;
  if ((before >> 16) != (static_cast<uint64>(st->pairs) >> 16)) {
    CHECK_FOR_INTERRUPTS();
    if (OverLimit(st)) return false;
  }
  return true;
}

// Whether PlainRun may pair the probe row with the run `kid`: dense cells,
// no key conditions, one float8 sum, no NULL factor on either side, the
// build side's factors computed.
inline bool PlainRuns(const State *st, const Scratch *x, int32 kid) {
  return st->dense.on && !st->quals && st->nagg == 1 && st->plain && !x->fn[0] && !st->lazy && !st->run_null[kid];
}

// The run of the probe row's join key, its values in x (int_keys); -1 where
// no build row has it.
inline int32 RunOf(State *st, const Scratch *x) {
  if (st->nk == 0) return 0;  // a cross join: every build row in run 0 (KeyIntern)
  if (st->jk.dcap > 0 && static_cast<uint64>(x->kv[0]) < st->jk.dcap)
    return st->jk.dmap[static_cast<uint64>(x->kv[0])];  // (every key below dcap is in dmap)
  uint32 h, slot_at;
  return KeyFind(&st->jk, x->kv, x->kn, &h, &slot_at);
}

// Whether build row r's join keys equal the probe row's, kv (not all
// integers: compared by their equality functions).
inline bool KeysMatch(const State *st, int32 r, const Datum *kv) {
  int nk = st->nk;
  for (int k = 0; k < nk; k++) {
    Datum b = st->rkeys[r * nk + k], p = kv[k];
    bool match;
    if (st->datum_eq[k])
      match = b == p;
    else
      match = DatumGetBool(st->probe_first[k] ? FunctionCall2Coll(&st->eq[k], st->kcoll[k], p, b)
                                              : FunctionCall2Coll(&st->eq[k], st->kcoll[k], b, p));
    if (!match) return false;
  }
  return true;
}

// Streams the probe side into the groups: each row's pairs with the build
// rows of its join key, found in its run or its hash bucket. False where
// memory ran past the limit.
bool ProbeSide(State *st, Scratch *x, uint64 *count) {
  ExprContext *ec = st->css.ss.ps.ps_ExprContext;
  PlanState *child = st->input[kProbe];
  DenseInit(&st->dense, st->g[0].n);
  x->pf = static_cast<double *>(Alloc(st->cxt, sizeof(double) * (st->nagg + 1)));
  ProbeRow p = {0, 0, false, nullptr};
  for (;;) {
    TupleTableSlot *slot = ExecProcNode(child);
    if (TupIsNull(slot)) break;
    p.slot = slot;
    if (OverLimitAt(st, count)) return false;
    if (st->nrows == 0) continue;  // (read to the end all the same: rescans expect it)
    ResetExprContext(ec);
    ec->ecxt_outertuple = slot;
    if (!EvalJoinKeys(st->pkeys, st->nk, ec, x)) continue;
    if (st->int_keys) {
      int32 kid = RunOf(st, x);
      if (kid < 0) continue;
      uint32 from = st->run[kid], to = st->run[kid + 1];
      StartProbeRow(st, x, &p);
      if (PlainRuns(st, x, kid)) {
        if (!PlainRun(st, x, &p, from, to)) return false;
        continue;
      }
      for (uint32 r = from; r < to; r++)
        if (!Pair(st, x, &p, r)) return false;
      continue;
    }
    uint32 h = HashKeys(st->phash, st->kcoll, st->nk, x->kv, x->kn);
    bool started = false;
    for (int32 r = st->buckets[h & (st->nbuckets - 1)]; r >= 0; r = st->rnext[r]) {
      if (st->rhash[r] != h || !KeysMatch(st, r, x->kv)) continue;
      if (!started) {
        StartProbeRow(st, x, &p);
        started = true;
      }
      if (!Pair(st, x, &p, static_cast<uint32>(r))) return false;
    }
  }
  return true;
}

// Grouping sets of one relation (st->nsets): streams the relation (the
// probe side; the build side is its one row of 1s) into each set's groups.
// Each row's group keys and factors are evaluated once; each set interns
// its keys (a group's id is its keys' id) and adds the row to that group's
// accumulators by the same AddPair as a pair: the terms of each group in
// the rows' order, as PostgreSQL's aggregate adds them. False where memory
// ran past the limit.
bool ProbeSets(State *st, Scratch *x, uint64 *count) {
  ExprContext *ec = st->css.ss.ps.ps_ExprContext;
  PlanState *child = st->input[kProbe];
  MemoryContext cxt = st->cxt;
  int nagg = st->nagg;
  st->dense.how = "by key, per grouping set";
  x->pf = static_cast<double *>(Alloc(cxt, sizeof(double) * (nagg + 1)));
  int maxkeys = 1;
  for (int set = 0; set < st->nsets; set++) maxkeys = Max(maxkeys, st->sets[set].nkeys);
  Datum *kv = static_cast<Datum *>(Alloc(cxt, sizeof(Datum) * maxkeys));
  bool *kn = static_cast<bool *>(Alloc(cxt, maxkeys));
  for (;;) {
    TupleTableSlot *slot = ExecProcNode(child);
    if (TupIsNull(slot)) break;
    if (OverLimitAt(st, count)) return false;
    if (st->nrows == 0) continue;  // (read to the end all the same: rescans expect it)
    ResetExprContext(ec);
    ec->ecxt_outertuple = slot;
    Eval(st->gx[kProbe], ec, x->gv, x->gn);
    Eval(st->pfactors, ec, x->fv, x->fn);
    for (int a = 0; a < nagg; a++) x->pf[a] = x->fn[a] ? 0 : Factor(x->fv[a], st->pfactors.float4[a]);
    for (int set = 0; set < st->nsets; set++) {
      GroupingSet *gs = &st->sets[set];
      for (int i = 0; i < gs->nkeys; i++) {
        kv[i] = x->gv[st->gpos[gs->key[i]]];
        kn[i] = x->gn[st->gpos[gs->key[i]]];
      }
      uint32 id = KeyIntern(cxt, &gs->keys, kv, kn);
      if (id >= gs->cap) {
        uint32 c = Max(1024u, gs->cap * 2);
        Reserve(cxt, &gs->sum, gs->cap, c, nagg);
        Reserve(cxt, &gs->has, gs->cap, c, nagg);
        memset(&gs->has[static_cast<size_t>(gs->cap) * nagg], 0, static_cast<size_t>(c - gs->cap) * nagg);
        gs->cap = c;
      }
      double *sums = &gs->sum[static_cast<size_t>(id) * nagg];
      bool *hass = &gs->has[static_cast<size_t>(id) * nagg];
      for (int o = 0; o < st->nout; o++) {
        const Accumulator &acc = st->accs[o];
        int a = acc.slot;
        acc.ops->add(acc.spec, st->rf[a], st->rfnull[a], x->pf[a], x->fn[a], &sums[a], &hass[a]);
      }
    }
    st->pairs++;
  }
  return true;
}

}  // namespace

// Reads the build side and streams the probe side into the groups; false
// when memory ran past the limit (nothing returned yet).
bool Build(State *st) {
  Scratch x;
  BuildStart(st, &x);
  uint64 count = 0;  // rows read from both sides
  if (!BuildSide(st, &x, &count)) return false;
  if (st->nsets) {
    if (!ProbeSets(st, &x, &count)) return false;
    OverLimit(st);
    return true;
  }
  if (st->int_keys && st->nrows > 0)
    SortRuns(st);
  else if (!st->int_keys)
    HashBuckets(st);
  if (OverLimit(st)) return false;
  if (!ProbeSide(st, &x, &count)) return false;
  if (st->dense.on) DenseToTable(st->cxt, &st->dense, &st->groups, st->nagg, true);
  OverLimit(st);
  return true;
}

}  // namespace ddx::pg::contraction
