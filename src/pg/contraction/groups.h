// The groups: pairs of group ids with their accumulators, in a hash table
// or in dense cells; and the accumulator kinds, one row of a table each, with
// the inline AddPair that both of Build's pairing loops call (groups.cpp).
#pragma once
#include "contraction.h"
#include "key_table.h"

extern "C" {
#include "postgres.h"

#include "utils/float.h"
#include "utils/memutils.h"
}

// Shared by the node's files only: hidden, so that calls bind inside ddx.so
// (as the anonymous namespace of the one file they came from had them).
#pragma GCC visibility push(hidden)

namespace ddx::pg::contraction {

// The groups in a hash table: a pair of group ids (the build side's, the
// probe side's) each, with its nagg accumulator slots. Arrays in the node's
// context.
struct GroupTable {
  uint32 n, cap;
  uint32 *ida, *idb;
  double *sum;  // cap * nagg
  bool *has;
  bool *ok;         // the join's other conditions hold for the group
  uint32 rejected;  // groups where they do not
  uint64 *keys;     // open addressing: (ida << 32 | idb) + 1, 0 empty
  uint32 *at;
  uint32 nslots;
  // Where not 0: the groups are the dense cells, taken over whole at the end
  // of the build (DenseToTable), group `at` the pair (at % cells_na,
  // at / cells_na), every one kept; ida, idb and ok are not allocated.
  uint32 cells_na;
};

inline uint32 GroupIda(const GroupTable &t, uint32 at) { return t.cells_na ? at % t.cells_na : t.ida[at]; }
inline uint32 GroupIdb(const GroupTable &t, uint32 at) { return t.cells_na ? at / t.cells_na : t.idb[at]; }
inline bool GroupOk(const GroupTable &t, uint32 at) { return t.cells_na || t.ok[at]; }

void GroupTableInit(MemoryContext cxt, GroupTable *a);
// The group (ida, idb), created if new (*created): its index.
uint32 GroupFind(MemoryContext cxt, GroupTable *a, int nagg, uint32 ida, uint32 idb, bool *created);

// The groups in dense cells (groups.cpp): per probe group id, a row of one
// cell per build group id, while the build side has few groups.
struct DenseCells {
  bool on;                 // pairs go to the cells (else to the table)
  uint32 na;               // build groups (a row's cells)
  int32 *row;              // probe group id -> its row's first cell, -1 none
  uint32 nrows, rowcap;    // probe group ids with a slot, and room for them
  uint32 ncells, cellcap;  // cells of the rows, and room for them
  double *sum;             // ncells * nagg
  bool *has;               // ncells * nagg
  uint8 *state;            // per cell: 0 no pair yet, 1 a group, 2 rejected by the key conditions
  uint64 touched;          // cells with a pair
  const char *how;         // for EXPLAIN ANALYZE: "dense", "hash", "dense, then hash"
};
void DenseInit(DenseCells *d, uint32 build_groups);
void DenseToTable(MemoryContext cxt, DenseCells *d, GroupTable *t, int nagg, bool last);
bool DenseRow(MemoryContext cxt, DenseCells *d, GroupTable *t, int nagg, uint32 idb, uint32 *base);

// --- accumulator kinds ---------------------------------------------------------
//
// An output aggregate's accumulator adds each pair of rows that joins (a
// build row's factor bv, NULL where bn, and a probe row's, pv and pn) to its
// group's slots: the pair's term (PairTerm), then the term into the slots
// (FoldTerm). An AccKind is one (term, fold) pair, one row of kAccKinds; a
// new accepted form adds a row (and, if it needs one, a Term or a Fold), not
// a flag and a branch in the pairing loop.

// How a pair makes its term: f * g in float8 (float8_mul, which raises on
// overflow and underflow as PostgreSQL's does), in float4 (float4_mul), a 1
// (count), or a guarded value (SelectGuard: the override factor where it is
// not NULL, else the other side's value), or a pair term evaluated by the
// caller (over both rows: its value bv, NULL where bn).
enum class Term { kProduct, kProductFloat4, kOne, kSelect, kPair };
// How the slots take a term: float8_pl, float4_pl, a count, avg's
// float8_accum (N, Sx and Sxx in three slots), or max's and min's
// float8larger and float8smaller.
enum class Fold { kSum, kSumFloat4, kCount, kAvg, kMax, kMin };

// The pair's term into *term; false where the pair adds nothing (a NULL
// term, but under COALESCE(term, 0), whose NULL adds 0).
template <Term T>
inline bool PairTerm(const AccSpec &a, double bv, bool bn, double pv, bool pn, double *term) {
  if constexpr (T == Term::kPair) {
    if (bn && !a.null_zero) return false;
    *term = bn ? 0.0 : bv;
    return true;
  } else if constexpr (T == Term::kSelect) {
    bool on_probe = a.override_side == kProbe;
    bool override_null = on_probe ? pn : bn, value_null = on_probe ? bn : pn;
    if (override_null && value_null && !a.null_zero) return false;
    *term = !override_null ? (on_probe ? pv : bv) : value_null ? 0.0 : (on_probe ? bv : pv);
    return true;
  } else {
    bool null = bn || pn;
    if (null && !a.null_zero) return false;
    if constexpr (T == Term::kProduct) *term = null ? 0.0 : float8_mul(bv, pv);
    if constexpr (T == Term::kProductFloat4)  // (rounded to float4, as float4mul's)
      *term = null ? 0.0 : float4_mul(static_cast<float4>(bv), static_cast<float4>(pv));
    if constexpr (T == Term::kOne) *term = 1.0;  // (its factors are 1 or NULL: NotNullOne)
    return true;
  }
}

void AvgAccum(double *s, bool has, double x);

// The term into the slots s, *has where they have one already.
template <Fold F>
inline void FoldTerm(double *s, bool *has, double term) {
  if constexpr (F == Fold::kAvg) {
    AvgAccum(s, *has, term);  // (Sx's and Sxx's own flags are never read)
    *has = true;
  } else if (!*has) {
    *s = F == Fold::kCount ? 1.0 : term;
    *has = true;
  } else if constexpr (F == Fold::kSum) {
    *s = float8_pl(*s, term);
  } else if constexpr (F == Fold::kSumFloat4) {  // float4pl: the sum rounded to float4
    *s = float4_pl(static_cast<float4>(*s), static_cast<float4>(term));
  } else if constexpr (F == Fold::kMax) {
    // float8larger(state, term), max(float8)'s transition: the state where
    // it is greater (NaN above every number), else the term, so that of
    // equal values (0 and -0) the last one stays, as in PostgreSQL
    *s = float8_gt(*s, term) ? *s : term;
  } else if constexpr (F == Fold::kMin) {
    *s = float8_lt(*s, term) ? *s : term;  // float8smaller(state, term)
  } else {
    *s = *s + 1;
  }
}

// One pair into the slots s, has of an accumulator `a` of the kind (T, F).
template <Term T, Fold F>
inline void AddPair(const AccSpec &a, double bv, bool bn, double pv, bool pn, double *s, bool *has) {
  double term;
  if (PairTerm<T>(a, bv, bn, pv, pn, &term)) FoldTerm<F>(s, has, term);
}

// A row of the table of accumulator kinds (kAccKinds, in AccKind's order).
struct AccKindOps {
  const char *explain;  // the EXPLAIN property that counts the kind's aggregates
  int slots;            // a group's slots for one aggregate (avg: N, Sx, Sxx)
  // One pair: AddPair<T, F>.
  void (*add)(const AccSpec &a, double bv, bool bn, double pv, bool pn, double *s, bool *has);
  // The aggregate's value from its slots s (null where the group has none),
  // has where a term was added.
  void (*emit)(const double *s, bool has, Datum *value, bool *isnull);
};
const AccKindOps &AccOps(AccKind kind);

// A factor's value as a double: a float4 widened exactly (as float48mul and
// float84mul widen it; a float4 product narrows it back exactly).
inline double Factor(Datum d, bool f4) { return f4 ? static_cast<double>(DatumGetFloat4(d)) : DatumGetFloat8(d); }

}  // namespace ddx::pg::contraction

#pragma GCC visibility pop
