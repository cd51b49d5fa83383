// The relation graph: the relations in topological order with their ids,
// which of them are materialized, and the analysis a Pass runs before any
// SQL is written (see pass.h).
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "ddx/core/shift.h"
#include "pass.h"

namespace ddx::core {

void CheckRanks(const Pass &p);                             // facts.cpp
std::vector<bool> NotNullOf(const Pass &p, const Rel *r);   // facts.cpp
std::vector<bool> ActivityOf(const Pass &p, const Rel *r);  // facts.cpp

namespace {

constexpr int kSavedLeaves = 4;   // see DecideMaterialized
constexpr int kSharedLeaves = 3;  // see SaveSharedRowLocal

std::vector<ExprP> Exprs(const Rel *r) {
  std::vector<ExprP> exprs;
  if (r->kind != RelKind::Function) exprs = r->exprs;
  if (r->cond) exprs.push_back(r->cond);
  for (const auto &row : r->rows) exprs.insert(exprs.end(), row.begin(), row.end());
  return exprs;
}

}  // namespace

Pass::Pass(const RelP &l, const std::vector<Tangent> *t, bool in_place, bool node)
    : tangents(t), citus_in_place(in_place), contraction_node(node), loss(l) {
  // (tangent relations first: a scan with a parameter reads them)
  if (tangents)
    for (const Tangent &tg : *tangents)
      if (tg.rel) Visit(tg.rel);
  Visit(loss);
  CheckRanks(*this);
  // A softmax's max, constant (shift.h) where the loss provably does not
  // depend on it; forward mode follows every tangent instead.
  if (!tangents) held = HeldMaxima(loss.get(), order);
  for (Rel *r : order) active[r] = ActivityOf(*this, r);
  for (Rel *r : order) notnull[r] = NotNullOf(*this, r);
  DecideMaterialized();
  // Each step's region, decided before any SQL is written: a materialized
  // row-local relation's own, a window's or an aggregate's input's.
  for (Rel *r : order) {
    if (!mat.count(r) || direct.count(r)) continue;
    RegionOf of = RuleOf(*r).region;
    if (of != RegionOf::None) regions[r] = of == RegionOf::Self ? Compile(r, true) : Compile(r->inputs[0].get(), false);
  }
}

void Pass::Visit(const RelP &r) {
  if (id.count(r.get())) return;
  id[r.get()] = -1;
  for (const auto &in : r->inputs) Visit(in);
  for (const auto &e : Exprs(r.get())) VisitSublinks(e);
  id[r.get()] = next_id++;
  order.push_back(r.get());
}

void Pass::VisitSublinks(const ExprP &e) {
  if (!e) return;
  if (e->kind == ExprKind::Sublink) {
    Visit(e->sub);
    sublink_rels.insert(e->sub.get());
  }
  for (const auto &a : e->args) VisitSublinks(a);
  VisitSublinks(e->test);
  VisitSublinks(e->corr);
}

// Which relations are CTEs; the others are compiled into their readers'
// regions. `direct`: the scans read in place; `recomputed`: the saved
// relations each reader computes again (Citus in place).
void Pass::DecideMaterialized() {
  std::set<const Rel *> cte;  // read by name (rid, c<j>), not through a region
  for (Rel *r : order) {
    if (RowLocal(r)) continue;
    mat.insert(r);
    // Set operations, LIMIT, scalar subqueries and FULL joins read saved inputs.
    if (r->kind != RelKind::Aggregate && r->kind != RelKind::Window)
      for (const auto &in : r->inputs) mat.insert(in.get()), cte.insert(in.get());
  }
  SaveContractionSides();
  SaveSharedRowLocal();
  mat.insert(loss.get());
  cte.insert(loss.get());
  // Forward mode: the tangent relations are read by name, and every scan
  // with a parameter is saved with its tangents (joined to it by key).
  if (tangents)
    for (const Tangent &tg : *tangents)
      if (tg.rel) mat.insert(tg.rel.get()), cte.insert(tg.rel.get());
  for (Rel *r : order)
    if (tangents && r->kind == RelKind::Scan && AnyActive(r)) cte.insert(r);
  for (const Rel *s : sublink_rels) mat.insert(const_cast<Rel *>(s)), cte.insert(s);
  // Scans that only regions read are read in place: no copy of the table,
  // the planner sees its statistics, and ctid is the row's rid.
  // On Citus in place (program.h), so are Citus tables without parameters:
  // their ctid serves only as a row's presence (a left join's NULL test),
  // never as its identity, since no cotangent is summed by it.
  for (Rel *r : order) {
    if (r->kind != RelKind::Scan || cte.count(r)) continue;
    bool param = false;
    for (int k : r->param) param = param || k >= 0;
    if (r->single || (citus_in_place && r->citus && !param)) direct.insert(r);
  }
  if (citus_in_place) RecomputeOnWorkers();
  BoundProjectionChains();
}

// How many saved relations (leaves) r is compiled over: 1 for a saved one.
int Pass::SavedLeaves(const Rel *r) const {
  if (mat.count(r)) return 1;
  int n = 0;
  for (const auto &in : r->inputs) n += SavedLeaves(in.get());
  return n;
}

// A compound row-local relation (LayerNorm's output over the residual
// stream: ten leaves at one layer) that is one side of a contraction (an
// aggregate grouped by keys of both sides of a join, so that each row of
// one side is repeated for each matching row of the other) is saved, once
// per its own row: compiled into the contraction's region it was
// recomputed from all its leaves for every joined row (the GPT's logits
// read a 1,024-row LayerNorm in 77,824 joined rows; saving it cut the
// gradient's time by more than half, bench/RESULTS.md). Relations of fewer
// leaves (attention's p = e / z, a matmul's inputs) stay compiled into
// their readers, where a costly value is computed below the join; a join
// that does not repeat rows (a loss's average over samples) saves nothing.
//   Forward mode also saves a side that computes a costly value (the GPT's
// GELU before its down projection): its value and its tangent, whose
// partials repeat the value, were computed for every joined row (tanh five
// times in each of 65,536 rows, the jvp's largest step) instead of once per
// row of the side. So does reverse mode, for a side of two leaves or more,
// where the contraction node runs the program: the MLP's hidden layer
// tanh(hp.z + b1.val) and attention's p = e / z. Compiled into the
// contraction's region, the side's leaves were differentiated through the
// costly value inside the sum (its derivative reads the leaf), which the
// transpose cannot move below the join (contraction.cpp), so the region
// was recomputed once more for every joined row (the MLP: 524k rows
// grouped by two grouping sets, spilling). Saved, the contraction's both
// sides are transposed, and the side's own reverse rule runs once per its
// row. Without the node the compiled region is faster (attention's
// gradient, bench/RESULTS.md), so the program differs by ddx.contraction
// (program.h).
//   With the node, reverse mode saves a side of one leaf too where it
// computes a costly value and receives gradient: a hidden layer without a
// bias, tanh(x·w1) or the GELU of a bias-free MLP, whose reverse, compiled
// into the contraction's region, computed the derivative once per joined
// row: an MLP without its hidden bias took twice the time of the same MLP
// with it, and a bias-free GPT's GELU pass joined 2M rows where the layer
// has 65k (bench/RESULTS.md).
//   With the node, reverse mode also saves a side of two leaves or more
// that receives gradient, costly or not: attention's q = x·Wq + bq. Its
// leaves' transposes each joined the other leaves (the other side among
// them) with the cotangents, so bq's re-formed the scores' join, q ⋈ k,
// for every layer (270k rows at 2 layers, 64 wide, T=32, B=8, spilling
// at the default work_mem), and bk's, bv's the same. Saved, the
// contraction has two leaves, each transposed against the other alone,
// and the side's own reverse rule runs once per its row.
void Pass::SaveContractionSides() {
  std::function<bool(const ExprP &)> has_costly = [&](const ExprP &e) {
    if (!e) return false;
    if (Costly(e)) return true;
    for (const auto &a : e->args)
      if (has_costly(a)) return true;
    return false;
  };
  auto costly = [&](const Rel *x) {
    for (const auto &e : Compile(x, true).item.cols)
      if (has_costly(e)) return true;
    return false;
  };
  for (Rel *r : order) {
    if (r->kind != RelKind::Aggregate || r->nkeys == 0) continue;
    // the group keys as columns of the first join below, through projections and filters
    const Rel *x = r->inputs[0].get();
    std::vector<int> keys;
    for (int k = 0; k < r->nkeys; k++) keys.push_back(k);
    while (!mat.count(x) && (x->kind == RelKind::Project || x->kind == RelKind::Filter)) {
      if (x->kind == RelKind::Project)
        for (int &k : keys) {
          const ExprP &e = x->exprs.at(k);
          k = e->kind == ExprKind::Col && e->side == 0 ? e->col : -1;
        }
      x = x->inputs[0].get();
    }
    if (mat.count(x) || x->kind != RelKind::Join || x->join != JoinKind::Inner) continue;
    int nl = static_cast<int>(x->inputs[0]->cols.size());
    bool left = false, right = false;
    for (int k : keys)
      if (k >= 0) (k < nl ? left : right) = true;
    if (!left || !right) continue;
    for (const auto &side : x->inputs) {
      if (!RowLocal(side.get())) continue;
      int n = SavedLeaves(side.get());
      bool node_saves = contraction_node && ((n >= 2 && (costly(side.get()) || (!tangents && AnyActive(side.get())))) ||
                                             (n == 1 && !tangents && AnyActive(side.get()) && costly(side.get())));
      if (n >= kSavedLeaves || (tangents && costly(side.get())) || node_saves) mat.insert(side.get());
    }
  }
}

// A row-local relation of kSharedLeaves leaves or more that two relations
// or more read is saved: compiled into each reader's region, its leaves
// were joined again in every one. The GPT's residual stream, x + attn(x) (token
// and position embeddings, the attention's projection and its bias) and
// that + mlp(...), is read by its LayerNorm's statistics, the LayerNorm
// itself and the next sum: at one layer the final LayerNorm's step joined
// ten leaves, its statistics seven, the second LayerNorm eight and its
// statistics five, each a 16k-row relation on (b, t, e) at 4 heads, 32
// wide, T=32, B=16, and the backward's regions joined them again (saved,
// the gradient 1.10x faster there, 1.25x at 2 layers: bench/RESULTS.md);
// so did the first residual, the embeddings' sum of three leaves (1.04x
// more). A relation of two leaves (attention's e = exp(s - m), read by its
// sum and by p) is one join, cheaper to do again than to store and read. Not on
// Citus in place, where a saved relation of per-sample rows is gathered to
// the coordinator (RecomputeOnWorkers).
void Pass::SaveSharedRowLocal() {
  if (citus_in_place) return;
  std::map<const Rel *, int> readers;
  for (Rel *r : order)
    for (const auto &in : r->inputs) readers[in.get()]++;
  // (in order, inputs first: a saved relation is one leaf of its readers)
  for (Rel *r : order)
    if (!mat.count(r) && RowLocal(r) && readers[r] >= 2 && SavedLeaves(r) >= kSharedLeaves) mat.insert(r);
}

// In place on Citus, a saved relation of per-sample rows (a prediction
// per sample, a hidden layer per sample and unit) would be a Citus
// subplan: gathered to the coordinator and sent back to every worker
// (the linear model's 4,096 predictions and their cotangents, every step).
// Recomputed instead by each reader (NOT MATERIALIZED), it stays on the
// workers, where the reader's join on its rid is a join on the
// distribution column; only the partial sums of the reductions cross the
// network. That needs a rid that does not depend on the order its rows
// come in (an aggregate's rid of its keys, ops/aggregate.cpp), and
// readers that only compute with its values: a recomputed value may
// differ in its last bits from the one another reader computed (its sum
// in another order), which a max's or a window's comparisons would turn
// into a wrong answer, so a program with those recomputes nothing. A
// reduction to one row (a loss) stays saved: it is what the workers need.
void Pass::RecomputeOnWorkers() {
  bool compares = false;
  for (const Rel *r : order) {
    if (r->kind == RelKind::Window) compares = true;
    if (r->kind == RelKind::Aggregate)
      for (const auto &a : r->aggs) compares = compares || FlowOf(a.fn) == AggFlow::Attained;
    if (r->kind == RelKind::Aggregate && r->distinct) compares = true;
  }
  if (compares) return;
  std::set<const Rel *> per_sample;
  for (Rel *r : order) {
    bool reads = r->kind == RelKind::Scan && r->citus && direct.count(r);
    for (const auto &in : r->inputs) reads = reads || per_sample.count(in.get());
    if (r->kind == RelKind::Aggregate && r->nkeys == 0) reads = false;
    if (reads) per_sample.insert(r);
  }
  for (const Rel *r : per_sample)
    if (mat.count(r) && !direct.count(r) && r != loss.get() && r->kind == RelKind::Aggregate && RidOfKeys(*this, *r))
      recomputed.insert(r);
}

// Composition inlines a projection's expressions into every use: keep
// chains of projections from growing without bound.
void Pass::BoundProjectionChains() {
  for (Rel *r : order) {
    if (mat.count(r) || r->kind != RelKind::Project) continue;
    Region reg = Compile(r, true);
    size_t biggest = 0;
    for (const auto &e : reg.item.cols) biggest = std::max(biggest, ExprSize(e));
    if (biggest > 64) mat.insert(r);
  }
}

}  // namespace ddx::core
