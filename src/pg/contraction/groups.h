// The groups: pairs of group ids with their sums, in a hash table or in
// dense cells, and avg's accumulation (groups.cpp).
#pragma once

extern "C" {
#include "postgres.h"

#include "utils/memutils.h"
}

// Shared by the node's files only: hidden, so that calls bind inside ddx.so
// (as the anonymous namespace of the one file they came from had them).
#pragma GCC visibility push(hidden)

namespace ddx::pg::contraction {

struct State;

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

void AccInit(MemoryContext cxt, Acc *a);
uint32 AccFind(MemoryContext cxt, Acc *a, int nagg, uint32 ida, uint32 idb, bool *created);
void AvgAccum(double *s, bool has, double x);

// A factor's value as a double: a float4 widened exactly (as float48mul and
// float84mul widen it; a float4 product narrows it back exactly).
inline double Factor(Datum d, bool f4) { return f4 ? static_cast<double>(DatumGetFloat4(d)) : DatumGetFloat8(d); }

void DenseInit(State *st);
void DenseToAcc(State *st, bool last = false);
bool DenseRow(State *st, uint32 idb, uint32 *base);

}  // namespace ddx::pg::contraction

#pragma GCC visibility pop
