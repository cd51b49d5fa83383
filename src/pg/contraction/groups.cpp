// The groups' two stores, the hash table and the dense cells, and the table
// of accumulator kinds with their emit functions (groups.h).
#include <cmath>
#include "groups.h"

extern "C" {
#include "postgres.h"

#include "utils/float.h"
}

namespace ddx::pg::contraction {

namespace {

// Room for `cap` groups in t.
void GrowGroups(MemoryContext cxt, GroupTable *t, int nagg, uint32 cap) {
  Reserve(cxt, &t->ida, t->cap, cap, 1);
  Reserve(cxt, &t->idb, t->cap, cap, 1);
  Reserve(cxt, &t->sum, t->cap, cap, nagg);
  Reserve(cxt, &t->has, t->cap, cap, nagg);
  Reserve(cxt, &t->ok, t->cap, cap, 1);
  t->cap = cap;
}

}  // namespace

void GroupTableInit(MemoryContext cxt, GroupTable *a) {
  memset(a, 0, sizeof *a);
  a->nslots = 1024;
  a->keys = static_cast<uint64 *>(Alloc(cxt, sizeof(uint64) * a->nslots));
  a->at = static_cast<uint32 *>(Alloc(cxt, sizeof(uint32) * a->nslots));
  memset(a->keys, 0, sizeof(uint64) * a->nslots);
}

uint32 GroupFind(MemoryContext cxt, GroupTable *a, int nagg, uint32 ida, uint32 idb, bool *created) {
  uint64 key = ((static_cast<uint64>(ida) << 32) | idb) + 1;
  uint32 mask = a->nslots - 1, i = Mix64(key) & mask;
  *created = false;
  for (; a->keys[i] != 0; i = (i + 1) & mask)
    if (a->keys[i] == key) return a->at[i];
  *created = true;
  if (a->n == a->cap) GrowGroups(cxt, a, nagg, Max(256u, a->cap * 2));
  uint32 at = a->n++;
  a->ok[at] = true;
  a->ida[at] = ida;
  a->idb[at] = idb;
  for (int k = 0; k < nagg; k++) {
    a->sum[at * nagg + k] = 0;
    a->has[at * nagg + k] = false;
  }
  a->keys[i] = key;
  a->at[i] = at;
  if (a->n * 2 > a->nslots) {
    uint32 ns = a->nslots * 2;
    uint64 *keys = static_cast<uint64 *>(Alloc(cxt, sizeof(uint64) * ns));
    uint32 *ats = static_cast<uint32 *>(Alloc(cxt, sizeof(uint32) * ns));
    memset(keys, 0, sizeof(uint64) * ns);
    for (uint32 x = 0; x < a->nslots; x++) {
      if (!a->keys[x]) continue;
      uint32 j = Mix64(a->keys[x]) & (ns - 1);
      while (keys[j]) j = (j + 1) & (ns - 1);
      keys[j] = a->keys[x];
      ats[j] = a->at[x];
    }
    pfree(a->keys);
    pfree(a->at);
    a->keys = keys;
    a->at = ats;
    a->nslots = ns;
  }
  return at;
}

// float8_accum (and float4_accum, whose float4 input is widened), utils/adt/
// float.c, PostgreSQL 15: one value x into (N, Sx, Sxx) at s, empty where
// !has. Sxx is kept as PostgreSQL keeps it only so that its overflow raises
// where PostgreSQL's would (avg reads Sx / N).
void AvgAccum(double *s, bool has, double x) {
  double n0 = has ? s[0] : 0.0, sx0 = has ? s[1] : 0.0, sxx = has ? s[2] : 0.0;
  double n = n0 + 1.0, sx = sx0 + x;
  if (n0 > 0.0) {
    double tmp = x * n - sx;
    sxx += tmp * tmp / (n * n0);
    if (std::isinf(sx) || std::isinf(sxx)) {
      if (!std::isinf(sx0) && !std::isinf(x)) float_overflow_error();
      sxx = get_float8_nan();
    }
  } else if (std::isnan(x) || std::isinf(x)) {
    sxx = get_float8_nan();
  }
  s[0] = n;
  s[1] = sx;
  s[2] = sxx;
}

namespace {

void EmitFloat8(const double *s, bool has, Datum *value, bool *isnull) {
  *isnull = !has;
  *value = Float8GetDatum(has ? s[0] : 0.0);
}

void EmitFloat4(const double *s, bool has, Datum *value, bool *isnull) {
  *isnull = !has;
  *value = Float4GetDatum(static_cast<float4>(has ? s[0] : 0.0));
}

// float8_avg: Sx / N, NULL where N = 0.
void EmitAvg(const double *s, bool has, Datum *value, bool *isnull) {
  *isnull = !has || s[0] == 0.0;
  *value = Float8GetDatum(*isnull ? 0.0 : s[1] / s[0]);
}

// (a group has pairs: 0 where none counted)
void EmitCount(const double *s, bool has, Datum *value, bool *isnull) {
  *isnull = false;
  *value = Int64GetDatum(has ? static_cast<int64>(s[0]) : 0);
}

const AccKindOps kAccKinds[] = {
    /* kSum */ {"Sums", 1, AddPair<Term::kProduct, Fold::kSum>, EmitFloat8},
    /* kSumFloat4 */ {"Sums", 1, AddPair<Term::kProductFloat4, Fold::kSumFloat4>, EmitFloat4},
    /* kAvg */ {"Averages", 3, AddPair<Term::kProduct, Fold::kAvg>, EmitAvg},
    /* kAvgFloat4 */ {"Averages", 3, AddPair<Term::kProductFloat4, Fold::kAvg>, EmitAvg},
    /* kCount */ {"Counts", 1, AddPair<Term::kOne, Fold::kCount>, EmitCount},
    /* kSumSelect */ {"Sums", 1, AddPair<Term::kSelect, Fold::kSum>, EmitFloat8},
    /* kAvgSelect */ {"Averages", 3, AddPair<Term::kSelect, Fold::kAvg>, EmitAvg},
    /* kMax */ {"Maxima", 1, AddPair<Term::kProduct, Fold::kMax>, EmitFloat8},
    /* kMin */ {"Minima", 1, AddPair<Term::kProduct, Fold::kMin>, EmitFloat8},
    /* kSumPair */ {"Sums", 1, AddPair<Term::kPair, Fold::kSum>, EmitFloat8},
    /* kAvgPair */ {"Averages", 3, AddPair<Term::kPair, Fold::kAvg>, EmitAvg},
    /* kMaxPair */ {"Maxima", 1, AddPair<Term::kPair, Fold::kMax>, EmitFloat8},
    /* kMinPair */ {"Minima", 1, AddPair<Term::kPair, Fold::kMin>, EmitFloat8},
};
static_assert(sizeof kAccKinds / sizeof kAccKinds[0] == static_cast<size_t>(AccKind::kMinPair) + 1,
              "one row per AccKind");

}  // namespace

const AccKindOps &AccOps(AccKind kind) { return kAccKinds[static_cast<int>(kind)]; }

// Dense groups. After the build, the build side's groups are known; where
// they are few (kDenseMax), each probe group gets a row of one cell per build
// group, and a pair's sum is at row + build group id: no hashing per pair,
// and the pairs of one probe row write to one row. A row costs its cells
// whether they get pairs or not, so where fewer than a quarter of a large
// set of cells has pairs, the cells go to the hash table (GroupTable) and
// the rest of the probe side is hashed. At the end the groups go to the
// table all the same
// (once per group, not per pair), from which they are returned.
constexpr uint32 kDenseMax = 4096;
constexpr uint32 kDenseSparseCheck = 1u << 20;  // cells

void DenseInit(DenseCells *d, uint32 build_groups) {
  d->na = build_groups;
  d->on = d->na > 0 && d->na <= kDenseMax;
  d->how = d->on ? "dense" : "hash";
  d->row = nullptr;
  d->nrows = d->rowcap = d->ncells = d->cellcap = 0;
  d->sum = nullptr;
  d->has = nullptr;
  d->state = nullptr;
  d->touched = 0;
}

// Frees the cells' arrays and leaves dense mode.
static void DenseFree(DenseCells *d) {
  if (d->row) pfree(d->row);
  if (d->sum) pfree(d->sum);
  if (d->has) pfree(d->has);
  if (d->state) pfree(d->state);
  d->row = nullptr;
  d->sum = nullptr;
  d->has = nullptr;
  d->state = nullptr;
  d->on = false;
}

// Where every cell is a group kept (each has a pair, none rejected) and the
// rows are in the order of their probe group ids (as StartProbeRow makes
// them: a new id's row at once), the cells are the table as DenseToTable
// would fill it: their sums become the table's, with no copy (a grouping of
// one relation into one group a row held its groups twice at the end, and
// attention's 131k scores ran past work_mem: bench/RESULTS.md).
static bool TakeOver(DenseCells *d, GroupTable *t) {
  if (t->n != 0 || d->na == 0 || d->touched != d->ncells || static_cast<uint64>(d->nrows) * d->na != d->ncells)
    return false;
  for (uint32 idb = 0; idb < d->nrows; idb++)
    if (d->row[idb] != static_cast<int32>(idb * d->na)) return false;
  for (uint32 c = 0; c < d->ncells; c++)
    if (d->state[c] != 1) return false;
  if (t->sum) pfree(t->sum);
  if (t->has) pfree(t->has);
  t->sum = d->sum;
  t->has = d->has;
  t->n = d->ncells;
  t->cap = d->cellcap;
  t->cells_na = d->na;
  d->sum = nullptr;
  d->has = nullptr;
  DenseFree(d);
  return true;
}

// Moves the dense cells with pairs into the table t, and leaves dense mode.
// A rejected cell goes too, marked: pairs of it that come after a move to
// the hash table must find it rejected, not test it again and count it twice.
// `last`: the build is over and nothing looks a group up again, so the
// groups are appended without their hash (each pair of ids is in one cell):
// the matmul's 80k groups went through GroupFind, a visible part of its
// forward (bench/RESULTS.md).
void DenseToTable(MemoryContext cxt, DenseCells *d, GroupTable *t, int nagg, bool last) {
  if (last && TakeOver(d, t)) return;
  if (last) {  // (room for every cell with a pair: d->touched of them)
    uint32 cells = static_cast<uint32>(d->touched);
    if (t->n + cells > t->cap) {
      GrowGroups(cxt, t, nagg, Max(256u, t->n + cells));
    }
  }
  for (uint32 idb = 0; idb < d->nrows; idb++) {
    if (d->row[idb] < 0) continue;
    for (uint32 ida = 0; ida < d->na; ida++) {
      uint32 c = static_cast<uint32>(d->row[idb]) + ida;
      if (d->state[c] == 0) continue;
      bool created;
      uint32 at;
      if (last) {
        at = t->n++;
        t->ida[at] = ida;
        t->idb[at] = idb;
      } else {
        at = GroupFind(cxt, t, nagg, ida, idb, &created);
      }
      t->ok[at] = d->state[c] == 1;
      if (d->state[c] == 2) t->rejected++;
      for (int a = 0; a < nagg; a++) {
        t->sum[at * nagg + a] = d->sum[c * nagg + a];
        t->has[at * nagg + a] = d->has[c * nagg + a];
      }
    }
  }
  DenseFree(d);
}

// The first cell of probe group idb's row, made if new; false where the
// cells went to the table t instead (too sparse).
bool DenseRow(MemoryContext cxt, DenseCells *d, GroupTable *t, int nagg, uint32 idb, uint32 *base) {
  if (idb >= d->rowcap) {
    uint32 c = Max(1024u, d->rowcap * 2);
    while (c <= idb) c *= 2;
    Reserve(cxt, &d->row, d->rowcap, c, 1);
    for (uint32 i = d->rowcap; i < c; i++) d->row[i] = -1;
    d->rowcap = c;
  }
  if (idb >= d->nrows) d->nrows = idb + 1;
  if (d->row[idb] < 0) {
    if (d->ncells >= kDenseSparseCheck && d->touched * 4 < d->ncells) {
      DenseToTable(cxt, d, t, nagg, false);
      d->how = "dense, then hash";
      return false;
    }
    if (d->ncells + d->na > d->cellcap) {
      uint32 c = Max(d->na * 64, d->cellcap * 2);
      Reserve(cxt, &d->sum, d->cellcap, c, nagg);
      Reserve(cxt, &d->has, d->cellcap, c, nagg);
      Reserve(cxt, &d->state, d->cellcap, c, 1);
      d->cellcap = c;
    }
    d->row[idb] = static_cast<int32>(d->ncells);
    memset(&d->has[static_cast<size_t>(d->ncells) * nagg], 0, static_cast<size_t>(d->na) * nagg);
    memset(&d->state[d->ncells], 0, d->na);
    d->ncells += d->na;
  }
  *base = static_cast<uint32>(d->row[idb]);
  return true;
}

}  // namespace ddx::pg::contraction
