// KeyTable: key tuples interned to dense ids (key_table.h).
#include "key_table.h"

extern "C" {
#include "postgres.h"

#include "common/hashfn.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
}

namespace ddx::pg::contraction {

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

// Key x's hash: kept for keys hashed by their functions; integers' are
// computed again (HashDatums), cheaper than 4 bytes a key kept.
static inline uint32 HashOf(const KeyTable *t, uint32 x) {
  return t->integers ? HashDatums(t->nkeys, &t->vals[x * t->nkeys], &t->nulls[x * t->nkeys]) : t->hashes[x];
}

// The table's slots, nslots of them, from its keys' hashes.
static void Rehash(MemoryContext cxt, KeyTable *t, uint32 ns) {
  int32 *s = static_cast<int32 *>(Alloc(cxt, sizeof(int32) * ns));
  memset(s, -1, sizeof(int32) * ns);
  for (uint32 x = 0; x < t->n; x++) {
    uint32 j = HashOf(t, x) & (ns - 1);
    while (s[j] >= 0) j = (j + 1) & (ns - 1);
    s[j] = static_cast<int32>(x);
  }
  if (t->slots) pfree(t->slots);
  t->slots = s;
  t->nslots = ns;
}

// Leaves dmap-only mode (KeyTable::hashed): the slots, from the keys.
static void StartHashing(MemoryContext cxt, KeyTable *t) {
  t->hashed = true;  // (only integer keys start without: HashOf computes theirs)
  uint32 ns = 64;
  while (t->n * 2 > ns) ns *= 2;
  Rehash(cxt, t, ns);
}

void KeyInit(MemoryContext cxt, KeyTable *t) {
  t->n = t->cap = 0;
  t->vals = nullptr;
  t->nulls = nullptr;
  t->hashes = nullptr;
  t->slots = nullptr;
  t->nslots = 0;
  t->last = -1;
  t->dmap = nullptr;
  t->dcap = 0;
  t->hashed = !(t->integers && t->nkeys == 1);
  if (t->hashed) Rehash(cxt, t, 64);
}

// Whether dmap holds the integer key u, grown if it may be: while the keys
// stay below a few times their count, or below a few times their rows'
// estimate within dmap_budget (and 2^20).
static bool InDmap(MemoryContext cxt, KeyTable *t, uint64 u) {
  if (u < t->dcap) return true;
  if (u >= (1u << 20)) return false;
  uint32 c = Max(256u, t->dcap);
  while (c <= u) c *= 2;
  bool dense = u < 8 * (static_cast<uint64>(t->n) + 128);
  bool estimated = static_cast<double>(u) < 4 * t->rows_hint && sizeof(int32) * c <= t->dmap_budget;
  if (!dense && !estimated) return false;
  if (t->dmap) pfree(t->dmap);
  t->dmap = static_cast<int32 *>(Alloc(cxt, sizeof(int32) * c));
  memset(t->dmap, -1, sizeof(int32) * c);
  for (uint32 x = 0; x < t->n; x++)
    if (!t->nulls[x] && static_cast<uint64>(t->vals[x]) < c)
      t->dmap[static_cast<uint64>(t->vals[x])] = static_cast<int32>(x);
  t->dcap = c;
  return true;
}

// The id of the key tuple (v, isnull), or -1 where it is not in the table
// (*h its hash and *slot the empty slot it would take).
int32 KeyFind(KeyTable *t, const Datum *v, const bool *isnull, uint32 *hp, uint32 *slot) {
  int nk = t->nkeys;
  // Rows of one group tend to come together (a table's rows in the order
  // they were written, x(i, k) by i): the last id is tried first, without
  // hashing (the matmul's 160k rows of x have 10k groups; the figure that
  // made it worth doing is in bench/RESULTS.md).
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
  if (!t->hashed) return -1;  // (every key of the table is in dmap)
  uint32 h = t->integers ? HashDatums(nk, v, isnull) : HashKeys(t->hash, t->coll, nk, v, isnull);
  uint32 mask = t->nslots - 1, i = h & mask;
  for (;; i = (i + 1) & mask) {
    int32 id = t->slots[i];
    if (id < 0) break;
    if (!t->integers && t->hashes[id] != h) continue;
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
  if (!t->hashed && (isnull[0] || !InDmap(cxt, t, static_cast<uint64>(v[0])))) {
    StartHashing(cxt, t);
    found = KeyFind(t, v, isnull, &h, &i);  // (not there: its hash and slot)
    Assert(found < 0);
  }
  if (t->n == t->cap) {
    uint32 c = Max(64u, t->cap * 2);
    Reserve(cxt, &t->vals, t->cap, c, nk);
    Reserve(cxt, &t->nulls, t->cap, c, nk);
    if (!t->integers) Reserve(cxt, &t->hashes, t->cap, c, 1);
    t->cap = c;
  }
  uint32 id = t->n++;
  MemoryContext old = MemoryContextSwitchTo(cxt);
  for (int k = 0; k < nk; k++) {
    t->nulls[id * nk + k] = isnull[k];
    t->vals[id * nk + k] = isnull[k] ? 0 : datumCopy(v[k], t->byval[k], t->typlen[k]);
  }
  MemoryContextSwitchTo(old);
  t->last = static_cast<int32>(id);
  // (the key into dmap where it may go; in dmap-only mode it is there
  // already: InDmap above)
  if (t->integers && nk == 1 && !isnull[0] && InDmap(cxt, t, static_cast<uint64>(v[0])))
    t->dmap[static_cast<uint64>(v[0])] = static_cast<int32>(id);
  if (!t->hashed) return id;
  if (!t->integers) t->hashes[id] = h;
  t->slots[i] = static_cast<int32>(id);
  if (t->n * 2 > t->nslots) Rehash(cxt, t, t->nslots * 2);  // grow the slots
  return id;
}

}  // namespace ddx::pg::contraction
