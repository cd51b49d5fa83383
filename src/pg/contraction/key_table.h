// Interned tuples of key values, and the hashing and growable arrays in the
// node's memory context that its tables share (key_table.cpp).
#pragma once

extern "C" {
#include "postgres.h"

#include "fmgr.h"
#include "utils/memutils.h"
}

// Shared by the node's files only: hidden, so that calls bind inside ddx.so
// (as the anonymous namespace of the one file they came from had them).
#pragma GCC visibility push(hidden)

namespace ddx::pg::contraction {

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
  uint32 *hashes;  // (not kept for integers: HashOf)
  int32 *slots;    // open addressing, -1 empty
  uint32 nslots;
  int32 last;  // the id found last (integers): rows of a group come together
  // One integer key of small values (0 <= v < dcap): its id at dmap[v], -1
  // none, without hashing; grown while the values stay within a few times
  // the keys' count (the matmul's backward meets x's 16 column ids in turn,
  // and each probe row's join key is looked up in jk through it; the
  // profile that asked for it is in bench/RESULTS.md). Every key below dcap
  // is in dmap: a miss there is a miss.
  int32 *dmap;
  uint32 dcap;
  // The rows the keys come from, as the planner estimates them: dmap may
  // also hold keys below a few times that, where they come in no order (a
  // program's row ids out of a hash aggregate), while it takes no more than
  // dmap_budget bytes (a quarter of the node's memory limit: sparse keys
  // under a high estimate must not make the node fall back).
  double rows_hint;
  size_t dmap_budget;
  // Whether the slots are kept. Not for one integer key while every key
  // interned is in dmap (a program's row ids, a token's position): there a
  // key is found in dmap or is not in the table, and the slots (with the
  // hashes integers no longer keep) were a third of the node's memory (131k
  // groups of attention's scores at T = 512 ran past work_mem and fell back:
  // bench/RESULTS.md). They are built from the keys when one comes that dmap
  // cannot hold.
  bool hashed;
};

inline void *Alloc(MemoryContext cxt, Size n) { return MemoryContextAllocHuge(cxt, Max(n, 1)); }

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

inline uint32 Mix64(uint64 k) {
  k ^= k >> 33;
  k *= UINT64CONST(0xff51afd7ed558ccd);
  k ^= k >> 33;
  return static_cast<uint32>(k);
}

uint32 HashDatums(int n, const Datum *v, const bool *isnull);
bool IntegerEquality(Oid f);
uint32 HashKeys(FmgrInfo *fns, const Oid *coll, int n, const Datum *v, const bool *isnull);
void KeyInit(MemoryContext cxt, KeyTable *t);
int32 KeyFind(KeyTable *t, const Datum *v, const bool *isnull, uint32 *hp, uint32 *slot);
uint32 KeyIntern(MemoryContext cxt, KeyTable *t, const Datum *v, const bool *isnull);

}  // namespace ddx::pg::contraction

#pragma GCC visibility pop
