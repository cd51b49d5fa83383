// Cotangents: each relation's b<id>, the sum of its readers' contributions,
// and the contributions of a region's rows to its leaves (see pass.h).
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "lets.h"
#include "pass.h"

namespace ddx::core {

namespace {

// Transposes of one relation that join the same relation on the same
// columns (the same head and tail: the query, key and value projections
// of one LayerNorm's output; LLaMA's gate and up of one RMSNorm's) summed
// before that one join: each joined the relation's saved rows, and their
// rows were then summed by rid.
std::vector<Contrib> SumTransposes(std::vector<Contrib> cs) {
  std::vector<Contrib> out;
  std::vector<bool> done(cs.size(), false);
  for (size_t i = 0; i < cs.size(); i++) {
    if (done[i]) continue;
    std::vector<size_t> same{i};
    for (size_t j = i + 1; !cs[i].pre.empty() && j < cs.size(); j++)
      if (!done[j] && !cs[j].pre.empty() && cs[j].head == cs[i].head && cs[j].tail == cs[i].tail &&
          cs[j].by == cs[i].by && cs[j].cols == cs[i].cols && cs[j].carries == cs[i].carries)
        same.push_back(j), done[j] = true;
    if (same.size() == 1) {
      out.push_back(cs[i]);
      continue;
    }
    Contrib m = cs[i];
    std::vector<std::string> pres, sel;
    for (const auto &b : m.by) sel.push_back("u." + b);
    for (int c : m.cols) sel.push_back("sum(u." + D(c) + ") AS " + D(c));
    for (size_t k : same) {
      pres.push_back(cs[k].pre);
      if (k != i) m.reads.insert(m.reads.end(), cs[k].reads.begin(), cs[k].reads.end());
    }
    std::vector<std::string> by;
    for (const auto &b : m.by) by.push_back("u." + b);
    m.pre = "SELECT " + Join(sel, ", ") + " FROM (" + Join(pres, " UNION ALL ") + ") u" +
            (by.empty() ? "" : " GROUP BY " + Join(by, ", "));
    m.sql = m.head + "(" + m.pre + ") t " + m.tail;
    out.push_back(m);
  }
  return out;
}

}  // namespace

// The cotangent step b<id> of a relation: the sum of its readers'
// contributions.
bool Pass::MakeCotangent(const Rel *r, std::vector<Step> &ctes) {
  auto it = contribs.find(r);
  if (it == contribs.end() || it->second.empty()) return false;
  it->second = SumTransposes(std::move(it->second));
  auto &cs = it->second;
  std::set<int> cols;
  Refs reads;  // every contribution's, each printed once below
  for (const auto &c : cs) {
    cols.insert(c.cols.begin(), c.cols.end());
    reads.insert(reads.end(), c.reads.begin(), c.reads.end());
  }
  std::string sql;
  // The rid's keys (RidKeys) where every contribution has them.
  bool with_keys = true;
  for (const auto &c : cs) with_keys = with_keys && c.keyed;
  if (with_keys) keyed.insert(r);
  if (cs.size() == 1) {
    sql = cs[0].sql;
    if (cs[0].carries) carried.insert(r);
  } else {
    std::vector<std::string> parts, sums, by{"z.rid"}, qkeys{"q.rid"};
    for (size_t i = 0; with_keys && i < RidKeys(*this, r).size(); i++) {
      by.push_back("z.rk" + std::to_string(i));
      qkeys.push_back("q.rk" + std::to_string(i));
    }
    for (const auto &c : cs) {
      std::vector<std::string> sel = qkeys;
      for (int j : cols) sel.push_back((c.cols.count(j) ? "q." + D(j) : "NULL::float8") + " AS " + D(j));
      parts.push_back("SELECT " + Join(sel, ", ") + " FROM (" + c.sql + ") q");
    }
    for (int j : cols) sums.push_back("sum(z." + D(j) + ") AS " + D(j));
    sql = "SELECT " + Join(by, ", ") + ", " + Join(sums, ", ") + " FROM (" + Join(parts, " UNION ALL ") +
          ") z GROUP BY " + Join(by, ", ");
  }
  ctes.push_back({B(r), sql, reads});
  bcols[r] = cols;
  return true;
}

std::string SumTerms(const std::vector<std::string> &terms) {
  std::vector<std::string> t;
  for (const auto &x : terms) t.push_back("COALESCE(" + x + ", 0::float8)");
  return "(" + Join(t, " + ") + ")";
}

bool Pass::AnyActive(const Rel *r) const {
  for (bool a : active.at(r))
    if (a) return true;
  return false;
}

void Pass::Contribute(const Rel *to, std::string sql, Refs reads, std::set<int> cols, bool carries, bool keyed) {
  if (cols.empty() || !AnyActive(to)) return;
  contribs[to].push_back({std::move(sql), std::move(reads), std::move(cols), carries, keyed});
}

void Pass::ContributeTransposed(const Rel *to, std::string head, std::string pre, std::string tail,
                                std::vector<std::string> by, Refs reads, std::set<int> cols, bool carries) {
  if (cols.empty() || !AnyActive(to)) return;
  std::string sql = head + "(" + pre + ") t " + tail;
  contribs[to].push_back({std::move(sql), std::move(reads), std::move(cols), carries, false, std::move(head),
                          std::move(pre), std::move(tail), std::move(by)});
}

// An aggregate whose cotangent may carry its saved columns c<j> beside
// rid and d<j>, so that Groups reads the cotangent alone: joined with the
// saved rows on rid, without statistics, the planner estimated the
// matmul's 80k groups at 32M rows and hashed the other side of the next
// join instead (in two batches). A reader whose rows are the aggregate's
// rows one to one (a `once` contribution, the transposed rule's final
// join) adds them; with one such reader the cotangent is that query.
// (Averages' counts n<k> are not carried: such aggregates keep the join.)
bool Carries(const Rel *r) {
  if (r->kind != RelKind::Aggregate || r->nkeys == 0) return false;
  for (const auto &a : r->aggs)
    if (Counted(a.fn)) return false;
  return true;
}

namespace {

using PerLeaf = std::map<int, std::map<int, std::string>>;  // leaf -> col -> summed term
using LeafRid = std::function<std::string(int k)>;

std::string T(int k, int col) { return "t" + std::to_string(k) + "_" + std::to_string(col); }

// Leaf k's rid keys (RidKeys) as the rows have them, or none.
std::vector<std::string> KeysOf(const Pass &p, const Region &reg, int k, const LeafKeys &leaf_keys) {
  if (!leaf_keys || RidKeys(p, reg.leaves[k]).empty()) return {};
  std::vector<std::string> v = leaf_keys(k);
  return v.size() == RidKeys(p, reg.leaves[k]).size() ? v : std::vector<std::string>{};
}
// Leaf k's saved columns as the rows have them, where its cotangent may
// carry them (Carries) and `value` has every one (a region's saved rows
// have only the columns its expressions read: "" for the others), or none.
std::vector<std::string> CarriedCols(const Region &reg, int k, const Resolver &value) {
  const Rel *leaf = reg.leaves[k];
  if (!value || !Carries(leaf)) return {};
  std::vector<std::string> v;
  for (size_t j = 0; j < leaf->cols.size(); j++) {
    v.push_back(value(kLeafSide + k, static_cast<int>(j)));
    if (v.back().empty()) return {};
  }
  return v;
}
// Each value beside its name, prefix<i>.
std::vector<std::pair<std::string, std::string>> Named(const std::vector<std::string> &v, const std::string &prefix) {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; i < v.size(); i++) out.push_back({v[i], prefix + std::to_string(i)});
  return out;
}

// Several leaves, some in at most one row of the source each (`once`: the
// only root, OnceLeaves): the source's rows stored as they are, those
// leaves' terms read from them, the others' summed by their rids (GROUPING
// SETS would also hash a set of as many groups as rows: attention's softmax
// backward, 33k rows into 33k groups beside 256 for z, which slowed the
// whole program; measured: bench/RESULTS.md, 'Figures from code
// comments'). The `carriers`' rows are the source's one to one, so their
// saved columns are carried as OneLeaf carries them (Carries): the MLP's
// hidden layer tanh(hp.z + b1.val) gave hp's cotangent, whose transpose
// then joined hp's 131k saved rows on rid again.
void OnlyRoot(Pass &p, Steps &s, const Region &reg, const std::string &source, const Refs &reads,
              const PerLeaf &per_leaf, const LeafRid &leaf_rid, const std::string &shared_name,
              const std::set<int> &once, const std::set<int> &carriers, const Resolver &value,
              const LeafKeys &leaf_keys) {
  std::vector<std::string> cols, again;
  std::map<std::string, std::string> first;         // a sum's SQL -> the column that has it
  std::map<int, std::vector<std::string>> carried;  // carrier -> its saved columns (CarriedCols)
  for (int k : carriers) carried[k] = CarriedCols(reg, k, value);
  for (const auto &[k, terms_k] : per_leaf) {
    cols.push_back(leaf_rid(k) + " AS r" + std::to_string(k));
    for (const auto &kv : Named(KeysOf(p, reg, k, leaf_keys), "rk" + std::to_string(k) + "_"))
      cols.push_back(kv.first + " AS " + kv.second);
    for (const auto &[col, sum] : terms_k) {
      auto [at, fresh] = first.emplace(sum, T(k, col));
      (fresh ? cols : again).push_back((fresh ? sum : "q." + at->second) + " AS " + T(k, col));
    }
  }
  for (const auto &[k, cc] : carried)
    for (size_t j = 0; j < cc.size(); j++)
      cols.push_back(cc[j] + " AS x" + std::to_string(k) + "_" + C(static_cast<int>(j)));
  // Leaves of one sum get the same adjoint (x + b: the GPT's GELU over
  // fc + bfc wrote its derivative's five terms once for each, and
  // LayerNorm's statistics ten times), and PostgreSQL computes it as often
  // as it is written: each is computed once, in a layer the planner cannot
  // pull up (Fence), and copied. (On Citus in place there is no fence, the
  // layers are pulled up and each copy computed again: as before, no worse.)
  std::string sql = "SELECT " + Join(cols, ", ") + source;
  if (!again.empty())
    sql = "SELECT q.*, " + Join(again, ", ") + " FROM (SELECT * FROM (" + sql + ") q0" + p.Fence() + ") q";
  s.ctes.push_back({shared_name, sql, reads});
  for (const auto &[k, terms_k] : per_leaf) {
    std::string rk = "r" + std::to_string(k);
    std::vector<std::string> sel{rk + " AS rid"}, by{rk};
    auto keys = Named(KeysOf(p, reg, k, leaf_keys), "rk" + std::to_string(k) + "_");
    for (size_t i = 0; i < keys.size(); i++) {
      sel.push_back(keys[i].second + " AS rk" + std::to_string(i));
      by.push_back(keys[i].second);
    }
    std::set<int> cs;
    bool single = once.count(k) > 0;
    for (const auto &[col, sum] : terms_k) {
      sel.push_back((single ? T(k, col) : "sum(" + T(k, col) + ")") + " AS " + D(col));
      cs.insert(col);
    }
    size_t nc = carried.count(k) ? carried.at(k).size() : 0;
    for (size_t j = 0; j < nc; j++)
      sel.push_back("x" + std::to_string(k) + "_" + C(static_cast<int>(j)) + " AS " + C(static_cast<int>(j)));
    p.Contribute(reg.leaves[k],
                 "SELECT " + Join(sel, ", ") + " FROM " + shared_name + " WHERE " + rk + " IS NOT NULL" +
                     (single ? "" : " GROUP BY " + Join(by, ", ")),
                 {shared_name}, cs, nc > 0, !keys.empty());
  }
}

// One leaf: its terms summed by its rid (not summed when it is in at most
// one row of the source, `once`), its saved columns carried where it is the
// only root (`carrier`) and its cotangent may carry them.
void OneLeaf(Pass &p, const Region &reg, const std::string &source, const Refs &reads, const PerLeaf &per_leaf,
             const LeafRid &leaf_rid, const std::set<int> &once, int carrier, const Resolver &value,
             const LeafKeys &leaf_keys) {
  for (const auto &[k, cols] : per_leaf) {
    bool single = once.count(k) > 0;
    std::vector<std::string> inner{leaf_rid(k) + " AS rid"}, outer{"q.rid"};
    auto keys = Named(KeysOf(p, reg, k, leaf_keys), "rk");
    for (const auto &kv : keys) {
      inner.push_back(kv.first + " AS " + kv.second);
      outer.push_back("q." + kv.second);
    }
    std::vector<std::string> by(outer);
    std::set<int> cs;
    for (const auto &[col, sum] : cols) {
      inner.push_back(sum + " AS " + D(col));
      outer.push_back((single ? "q." + D(col) : "sum(q." + D(col) + ")") + " AS " + D(col));
      cs.insert(col);
    }
    std::vector<std::string> carried = k == carrier ? CarriedCols(reg, k, value) : std::vector<std::string>{};
    bool carry = !carried.empty();
    for (size_t j = 0; j < carried.size(); j++) {
      inner.push_back(carried[j] + " AS " + C(static_cast<int>(j)));
      outer.push_back("q." + C(static_cast<int>(j)));
    }
    p.Contribute(reg.leaves[k],
                 "SELECT " + Join(outer, ", ") + " FROM (SELECT " + Join(inner, ", ") + source +
                     ") q WHERE q.rid IS NOT NULL" + (single ? "" : " GROUP BY " + Join(by, ", ")),
                 reads, cs, carry, !keys.empty());
  }
}

// The one pass over a region with GROUPING SETS: the region rows' columns
// (inner), the grouped columns (outer), the grouping keys and the sets.
struct GroupingSets {
  std::vector<std::string> inner, outer, keys;
  std::set<std::string> have;
  std::vector<std::vector<std::string>> sets;

  void Key(const std::string &sql, const std::string &name) {
    if (!have.insert(name).second) return;
    inner.push_back(sql + " AS " + name);
    outer.push_back("q." + name);
    keys.push_back(name);
  }
  // GROUPING(keys) of a set: bit set = key aggregated away; the first key
  // is the most significant bit.
  std::string Mask(const std::vector<std::string> &in_set) const {
    int n = static_cast<int>(keys.size()), m = 0;
    for (int i = 0; i < n; i++)
      if (std::find(in_set.begin(), in_set.end(), keys[i]) == in_set.end()) m |= 1 << (n - 1 - i);
    return std::to_string(m);
  }
  // In place on Citus, one step of its own per set, a plain GROUP BY
  // (Set names it): Citus plans no GROUPING(), and a program with one fell
  // back to saving every step on the coordinator (the MLP's first layer in
  // place moved several times the intermediate results; measured:
  // bench/RESULTS.md, 'Figures from code comments'); a step that each set's
  // reader alone reads is recomputed inside it, on the workers, where a
  // shared one would be a Citus subplan, gathered. Each recomputes the
  // region.
  std::vector<Step> Steps(const std::string &name, const std::string &source, const Refs &reads) const {
    std::vector<std::string> gkeys, ss, out = outer;
    for (const auto &k : keys) gkeys.push_back("q." + k);
    if (per_set_) {
      std::vector<Step> steps;
      for (const auto &c : sets) {
        std::vector<std::string> sel{Mask(c) + " AS gs"}, by;
        for (const auto &x : c) sel.push_back("q." + x), by.push_back("q." + x);
        for (const auto &o : outer)
          if (o.rfind("q.", 0) != 0) sel.push_back(o);
        steps.push_back({Set(name, c),
                         "SELECT " + Join(sel, ", ") + " FROM (SELECT " + Join(inner, ", ") + source + ") q GROUP BY " +
                             Join(by, ", "),
                         reads});
      }
      return steps;
    }
    for (const auto &c : sets) {
      std::vector<std::string> qc;
      for (const auto &x : c) qc.push_back("q." + x);
      ss.push_back("(" + Join(qc, ", ") + ")");
    }
    out.insert(out.begin(), "GROUPING(" + Join(gkeys, ", ") + ") AS gs");
    return {{name,
             "SELECT " + Join(out, ", ") + " FROM (SELECT " + Join(inner, ", ") + source +
                 ") q GROUP BY GROUPING SETS (" + Join(ss, ", ") + ")",
             reads}};
  }
  // The step that holds set c's rows: the shared one, or (per set) its own.
  std::string Set(const std::string &name, const std::vector<std::string> &c) const {
    return per_set_ ? name + "__" + Mask(c) : name;
  }
  bool per_set_ = false;  // in place on Citus: Steps writes one step per set
};

// How a deferred factor's grouped rows are found again: by the rids of its
// leaves that determine the others (roots), the others and the values the
// factor reads rejoined from its leaves on those rids (with inner joins
// only: the region's conditions among them are then all there is), else
// carried by min(): wide rows in the grouping sets' hash tables, which made
// attention's spill.
struct DeferredPlan {
  std::set<int> roots;
  bool rejoin;
  std::map<int, std::vector<std::pair<std::string, std::string>>> keys;  // a root leaf's rid keys (RidKeys), named
};

// Deferred factor i's grouping set: its keys (and a marker g<i> where
// another set has the same rids, a leaf's own set), the columns it carries,
// its adjoint u<i>.
DeferredPlan PlanDeferred(const Pass &p, const Region &reg, const Deferred &d, size_t i, GroupingSets &g,
                          const LeafRid &leaf_rid, const Resolver &value, const LeafKeys &leaf_keys) {
  std::string is = std::to_string(i);
  DeferredPlan plan{Roots(reg, d.leaves), !reg.outer, {}};
  for (const auto &c : reg.conds)
    if (HasSublink(c)) plan.rejoin = false;
  std::vector<std::string> cols;
  for (int side : d.leaves)
    if (plan.roots.count(side)) {
      int k = side - kLeafSide;
      cols.push_back("r" + std::to_string(k));
      plan.keys[k] = Named(KeysOf(p, reg, k, leaf_keys), "rk" + std::to_string(k) + "_");
      for (const auto &kv : plan.keys[k]) cols.push_back(kv.second);
    }
  if (std::find(g.sets.begin(), g.sets.end(), cols) != g.sets.end()) {
    cols.insert(cols.begin(), "g" + is);
    g.Key("1", "g" + is);
  }
  for (int side : d.leaves) {
    int k = side - kLeafSide;
    if (plan.roots.count(side)) {
      g.Key(leaf_rid(k), "r" + std::to_string(k));
      for (const auto &kv : plan.keys[k]) g.Key(kv.first, kv.second);
    } else if (!plan.rejoin) {
      std::string sn = "s" + std::to_string(k) + "_" + is;
      g.inner.push_back(leaf_rid(k) + " AS " + sn);
      g.outer.push_back("min(q." + sn + ") AS " + sn);
    }
  }
  std::set<std::pair<int, int>> used;
  CollectCols(d.expr, used);
  for (const auto &[side, col] : used) {
    if (col < 0 || plan.rejoin) continue;
    std::string x = "x" + std::to_string(side - kLeafSide) + "_" + std::to_string(col) + "_" + is;
    g.inner.push_back(value(side, col) + " AS " + x);
    g.outer.push_back("min(q." + x + ") AS " + x);
  }
  std::string u = "u" + is;
  g.inner.push_back("COALESCE(" + d.adj + ", 0::float8) AS " + u);
  g.outer.push_back("sum(q." + u + ") AS " + u);
  g.sets.push_back(cols);
  return plan;
}

// Deferred factor i's rows (`stage`: its grouping set's), rejoined with its
// leaves where the plan says so.
std::string DeferredStage(const Pass &p, const Region &reg, const Deferred &d, size_t i, const DeferredPlan &plan,
                          const std::string &stage) {
  if (!plan.rejoin) return stage;
  std::string is = std::to_string(i);
  std::vector<std::string> cols{"n.*"}, from{stage + " n"}, where;
  for (int side : d.leaves) {
    int k = side - kLeafSide;
    std::string ks = std::to_string(k);
    from.push_back(p.LeafFrom(reg.leaves[k], reg.Alias(k)));
    if (plan.roots.count(side)) {
      where.push_back(p.LeafCol(reg, side, -1) + " = n.r" + ks);
      auto js = RidKeys(p, reg.leaves[k]);
      for (size_t j = 0; plan.keys.count(k) && j < plan.keys.at(k).size(); j++)
        where.push_back(p.LeafCol(reg, side, js[j]) + " = n." + plan.keys.at(k)[j].second);
    } else
      cols.push_back(p.LeafCol(reg, side, -1) + " AS s" + ks + "_" + is);
  }
  std::set<std::pair<int, int>> used;
  CollectCols(d.expr, used);
  for (const auto &[side, col] : used)
    if (col >= 0)
      cols.push_back(p.LeafCol(reg, side, col) + " AS x" + std::to_string(side - kLeafSide) + "_" +
                     std::to_string(col) + "_" + is);
  for (const auto &c : reg.conds) {
    std::set<int> ls = LeafSides(c);
    bool among = !ls.empty();
    for (int x : ls) among = among && d.leaves.count(x);
    if (among) where.push_back(p.Sql(c, p.Inside(reg)));
  }
  return "(SELECT " + Join(cols, ", ") + " FROM " + Join(from, ", ") + " WHERE " + Join(where, " AND ") + ")";
}

}  // namespace

// Contributions to a region's leaves: `source` is FROM ... WHERE ... over the
// leaves (and whatever the caller joined), terms are per leaf column.
void Pass::ContributeToLeaves(Steps &s, const Region &reg, const std::string &source, const Refs &reads,
                              const Terms &terms, const std::function<std::string(int k)> &leaf_rid,
                              const std::string &shared_name, const std::vector<Deferred> &deferred,
                              const Resolver &value, std::set<int> roots, const LeafKeys &leaf_keys) {
  PerLeaf per_leaf;
  for (const auto &[key, t] : terms) per_leaf[key.first - kLeafSide][key.second] = SumTerms(t);
  // A leaf that is the only root of the source's rows (`roots`: by default
  // the region's; the others are saved aggregates joined on all their keys,
  // at most one row each; one leaf: no join) is in at most one row of the
  // source (every rule joins a region row with one cotangent): nothing to
  // sum. Attention's z = Σ e: a GROUP BY of 33k rows into 33k groups. Over
  // the region's own rows, so is every leaf that determines all the others
  // (OnceLeaves). The only root alone carries its saved columns: the
  // source has them (aggregate.cpp selects them by OnlyRootSide).
  bool own = roots.empty();
  if (own) roots = Roots(reg, Sides(reg));
  std::set<int> to;
  for (const auto &pl : per_leaf) to.insert(kLeafSide + pl.first);
  int carrier = SoleRoot(roots, to);
  std::set<int> once;
  if (carrier >= 0) once.insert(carrier - kLeafSide);
  if (own && deferred.empty())
    for (int l : OnceLeaves(reg, to)) once.insert(l - kLeafSide);
  if (carrier >= 0) carrier -= kLeafSide;
  if (!once.empty() && per_leaf.size() > 1 && deferred.empty()) {
    // The carriers: the only root, and over the region's own rows every
    // leaf in at most one of them whose saved columns the source has (a
    // join one to one on all keys, SwiGLU's silu(a) * b: b the root, and a
    // in one row each too). Without a's, both of its transposes (the
    // weight's and the input's) joined its 131k saved rows with its
    // cotangent on rid again (bench/RESULTS.md).
    std::set<int> carriers;
    if (carrier >= 0) carriers.insert(carrier);
    if (own)
      for (int k : once)
        if (per_leaf.count(k) && !CarriedCols(reg, k, value).empty()) carriers.insert(k);
    return OnlyRoot(*this, s, reg, source, reads, per_leaf, leaf_rid, shared_name, once, carriers, value, leaf_keys);
  }
  if (per_leaf.size() < 2 && deferred.empty())
    return OneLeaf(*this, reg, source, reads, per_leaf, leaf_rid, once, carrier, value, leaf_keys);
  // Several leaves: one pass over the region, summed by each leaf's rid at
  // once with GROUPING SETS, instead of recomputing the region per leaf.
  // A deferred factor's set groups by the rids of its leaves and the leaf
  // columns it reads (which those rids determine).
  GroupingSets g;
  for (const auto &[k, cols] : per_leaf) {
    std::string rk = "r" + std::to_string(k);
    g.Key(leaf_rid(k), rk);
    std::vector<std::string> set{rk};
    for (const auto &kv : Named(KeysOf(*this, reg, k, leaf_keys), "rk" + std::to_string(k) + "_")) {
      g.Key(kv.first, kv.second);
      set.push_back(kv.second);
    }
    g.sets.push_back(set);
    for (const auto &[col, sum] : cols) {
      g.inner.push_back(sum + " AS " + T(k, col));
      g.outer.push_back("sum(q." + T(k, col) + ") AS " + T(k, col));
    }
  }
  std::vector<DeferredPlan> plans;
  for (size_t i = 0; i < deferred.size(); i++)
    plans.push_back(PlanDeferred(*this, reg, deferred[i], i, g, leaf_rid, value, leaf_keys));
  g.per_set_ = citus_in_place;
  for (auto &step : g.Steps(shared_name, source, reads)) s.ctes.push_back(std::move(step));
  size_t pos = 0;
  for (const auto &[k, cols] : per_leaf) {
    std::string rk = "r" + std::to_string(k);
    std::vector<std::string> sel{rk + " AS rid"};
    for (size_t i = 1; i < g.sets[pos].size(); i++) sel.push_back(g.sets[pos][i] + " AS rk" + std::to_string(i - 1));
    std::set<int> cs;
    for (const auto &[col, sum] : cols) {
      sel.push_back(T(k, col) + " AS " + D(col));
      cs.insert(col);
    }
    Contribute(reg.leaves[k],
               "SELECT " + Join(sel, ", ") + " FROM " + g.Set(shared_name, g.sets[pos]) +
                   " WHERE gs = " + g.Mask(g.sets[pos]) + " AND " + rk + " IS NOT NULL",
               {g.Set(shared_name, g.sets[pos])}, cs, false, g.sets[pos].size() > 1);
    pos++;
  }
  // Each deferred factor, differentiated at its own grain.
  for (size_t i = 0; i < deferred.size(); i++) {
    const Deferred &d = deferred[i];
    std::string is = std::to_string(i);
    const std::set<int> &rt = plans[i].roots;
    // (the stage reads its set's step; the leaves it may rejoin are forward steps)
    Refs stage_reads{g.Set(shared_name, g.sets[pos])};
    std::string stage =
        DeferredStage(*this, reg, d, i, plans[i],
                      "(SELECT * FROM " + g.Set(shared_name, g.sets[pos]) + " WHERE gs = " + g.Mask(g.sets[pos]) + ")");
    pos++;
    auto rid = [rt, is](int k) {
      return rt.count(kLeafSide + k) ? "n.r" + std::to_string(k) : "n.s" + std::to_string(k) + "_" + is;
    };
    Resolver grouped = [rid, is](int side, int col) {
      int k = side - kLeafSide;
      return col < 0 ? rid(k) : "n.x" + std::to_string(k) + "_" + std::to_string(col) + "_" + is;
    };
    Lets lets(*this, "n", grouped);
    Terms t;
    Backprop(d.expr, "n.u" + is, lets, LeafActivity(reg), t);
    LeafKeys keys = [&plan = plans[i]](int k) {
      std::vector<std::string> v;
      if (plan.keys.count(k))
        for (const auto &kv : plan.keys.at(k)) v.push_back("n." + kv.second);
      return v;
    };
    // (the stage has one row per rid of its roots)
    ContributeToLeaves(s, reg, " FROM " + lets.Wrap(stage), stage_reads, t, rid, shared_name + "_" + is, {}, nullptr,
                       rt, keys);
  }
}

// The one root among `roots` where it is one of the sides `to` that receive
// terms, or -1: ContributeToLeaves's `once` leaf (OnlyRoot, OneLeaf), whose
// saved columns its cotangent carries (Carries).
int SoleRoot(const std::set<int> &roots, const std::set<int> &to) {
  return roots.size() == 1 && to.count(*roots.begin()) ? *roots.begin() : -1;
}

// SoleRoot with the region's own roots, as ContributeToLeaves has it
// without deferred factors: a caller whose rows select only the leaf columns
// it reads adds that leaf's (aggregate.cpp).
int OnlyRootSide(const Region &reg, const std::set<int> &to) { return SoleRoot(Roots(reg, Sides(reg)), to); }

}  // namespace ddx::core
