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
    st->rf[r * st->nagg + a] = st->lfn[a] ? 0 : Factor(st->lfv[a], st->bfactors.float4[a]);
  }
  st->rdone[r] = true;
}

}  // namespace

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
  GroupTableInit(cxt, &st->groups);
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
      st->rf[r * nagg + a] = fn[a] ? 0 : Factor(fv[a], st->bfactors.float4[a]);
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
  DenseInit(&st->dense, st->g[0].n);
  double *pf = static_cast<double *>(Alloc(cxt, sizeof(double) * (nagg + 1)));
  uint32 gid = 0, base = 0;
  bool pdone = false;  // the probe row's factors computed
  // The probe row's factors: on its first pair, or, with key conditions, on
  // its first pair they keep. PostgreSQL computes an aggregate's argument
  // only for the pairs the join's conditions keep: a factor that raises on a
  // row whose pairs the conditions all reject must not raise.
  auto probe_factors = [&]() {
    Eval(st->pfactors, ec, fv, fn);
    for (int a = 0; a < nagg; a++) pf[a] = fn[a] ? 0 : Factor(fv[a], st->pfactors.float4[a]);
    pdone = true;
  };
  // One pair: build row r with the probe row's group gid (its dense row at
  // base) and factors pf, fn. False where memory ran out.
  auto pair = [&](uint32 r) -> bool {
    double *sums;
    bool *hass;
    if (st->dense.on) {
      uint32 c = base + st->rgid[r];
      if (st->dense.state[c] == 0) {
        st->dense.state[c] = st->quals && !QualsHold(st, st->rgid[r], gid) ? 2 : 1;
        st->dense.touched++;
      }
      if (st->dense.state[c] == 2) return true;
      sums = &st->dense.sum[static_cast<size_t>(c) * nagg];
      hass = &st->dense.has[static_cast<size_t>(c) * nagg];
    } else {
      bool created;
      uint32 at = GroupFind(cxt, &st->groups, nagg, st->rgid[r], gid, &created);
      if (created && st->quals && !QualsHold(st, st->rgid[r], gid)) {
        st->groups.ok[at] = false;
        st->groups.rejected++;
      }
      if (!st->groups.ok[at]) return true;
      sums = &st->groups.sum[at * nagg];
      hass = &st->groups.has[at * nagg];
    }
    if (!pdone) probe_factors();                        // (a pair the key conditions kept)
    if (st->lazy && !st->rdone[r]) LazyFactors(st, r);  // (likewise)
    for (int o = 0; o < st->nout; o++) {
      const Accumulator &acc = st->accs[o];
      int a = acc.slot;
      acc.ops->add(acc.spec, st->rf[r * nagg + a], st->rfnull[r * nagg + a], pf[a], fn[a], &sums[a], &hass[a]);
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
    if (st->dense.on) (void)DenseRow(cxt, &st->dense, &st->groups, nagg, gid, &base);
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
      if (st->dense.on && !st->quals && nagg == 1 && st->plain && !fn[0] && !st->lazy && !st->run_null[kid]) {
        // The common case, without the general pair's branches: one float8
        // sum of factors that are not NULL, into dense cells. float8_mul
        // and float8_pl raise on overflow and underflow as PostgreSQL's do.
        double p = pf[0];
        const uint32 *rg = st->rgid;
        const double *rf = st->rf;
        uint8 *state = st->dense.state;
        double *sum = st->dense.sum;
        bool *has = st->dense.has;
        uint64 touched = 0;
        const AccSpec &spec = st->accs[0].spec;
        for (uint32 r = from; r < to; r++) {
          uint32 c = base + rg[r];
          if (state[c] == 0) {
            state[c] = 1;
            touched++;
          }
          // (the general loop's AddPair, with factors known not NULL; a
          // cell may have pairs but no sum yet: its earlier pairs' products
          // were NULL, through the general path)
          AddPair<Term::kProduct, Fold::kSum>(spec, rf[r], false, p, false, &sum[c], &has[c]);
        }
        st->dense.touched += touched;
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
  if (st->dense.on) DenseToTable(cxt, &st->dense, &st->groups, nagg, true);
  OverLimit(st);
  return true;
}

}  // namespace ddx::pg::contraction
