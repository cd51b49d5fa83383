// Regions: a row-local relation compiled over the materialized relations
// below it (its leaves), and the FROM lists that rules build over them (see
// pass.h).
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "pass.h"

namespace ddx::core {

bool RowLocal(const Rel *r) {
  return r->kind == RelKind::Project || r->kind == RelKind::Filter ||
         (r->kind == RelKind::Join && r->join != JoinKind::Full);
}

// The region of r: r compiled over the materialized relations below it. With
// `through`, r itself is compiled even when it is materialized (its own CTE).
Region Pass::Compile(const Rel *r, bool through) const {
  Region reg;
  reg.item = CompileItem(r, through, reg);
  return reg;
}

Item Pass::CompileItem(const Rel *r, bool through, Region &reg) const {
  if (mat.count(r) && !through) {
    int k = static_cast<int>(reg.leaves.size());
    reg.leaves.push_back(r);
    Item it;
    auto leaf = std::make_shared<FromNode>();
    leaf->leaf = k;
    it.from = leaf;
    it.first_leaf = k;
    it.nleaves = 1;
    for (size_t i = 0; i < r->cols.size(); i++)
      it.cols.push_back(MakeCol(static_cast<int>(i), kLeafSide + k, r->cols[i]));
    return it;
  }
  switch (r->kind) {
    case RelKind::Project: {
      Item it = CompileItem(r->inputs[0].get(), false, reg);
      std::vector<ExprP> cols;
      for (const auto &e : r->exprs) cols.push_back(Substitute(e, it.cols));
      it.cols = cols;
      return it;
    }
    case RelKind::Filter: {
      Item it = CompileItem(r->inputs[0].get(), false, reg);
      it.pending.push_back(Substitute(r->cond, it.cols));
      reg.conds.push_back(it.pending.back());
      return it;
    }
    case RelKind::Join: {
      Item l = CompileItem(r->inputs[0].get(), false, reg);
      Item rr = CompileItem(r->inputs[1].get(), false, reg);
      Item it;
      it.first_leaf = l.first_leaf;
      it.nleaves = l.nleaves + rr.nleaves;
      std::vector<ExprP> rcols = rr.cols;
      if (r->join == JoinKind::Left) {
        reg.outer = true;
        // The right side's computed values are NULL where the row is NULL-extended.
        ExprP missing = MakeOpaque("($1 IS NULL)", {LeafRid(rr.first_leaf)}, kBool);
        for (auto &c : rcols) {
          if (c->kind != ExprKind::Col) c = MakeCase({missing, NullOf(c->type), c}, c->type);
        }
      }
      it.cols = l.cols;
      it.cols.insert(it.cols.end(), rcols.begin(), rcols.end());
      std::vector<ExprP> on;
      if (r->cond) on.push_back(Substitute(r->cond, it.cols));
      // (A LEFT join's ON does not hold for its unmatched rows.)
      if (r->cond && r->join == JoinKind::Inner) reg.conds.push_back(on.back());
      if (r->join == JoinKind::Inner) {
        on.insert(on.end(), l.pending.begin(), l.pending.end());
        on.insert(on.end(), rr.pending.begin(), rr.pending.end());
      } else {  // LEFT: the right side's filters restrict matches; the left side's rise
        on.insert(on.end(), rr.pending.begin(), rr.pending.end());
        it.pending = l.pending;
      }
      auto join = std::make_shared<FromNode>();
      join->left = r->join == JoinKind::Left;
      join->lhs = l.from;
      join->rhs = rr.from;
      join->on = on;
      it.from = join;
      return it;
    }
    default:
      Internal("relation of this kind is not row-local");
  }
}

std::string Pass::FromSql(const Region &reg, const FromNode &n) const {
  if (n.leaf >= 0) return LeafFrom(reg.leaves.at(n.leaf), reg.Alias(n.leaf));
  std::vector<std::string> conds;
  for (const auto &c : n.on) conds.push_back(Sql(c, Inside(reg)));
  return "(" + FromSql(reg, *n.lhs) + (n.left ? " LEFT JOIN " : " JOIN ") + FromSql(reg, *n.rhs) + " ON " +
         (conds.empty() ? "true" : Join(conds, " AND ")) + ")";
}

std::string Pass::FromWhere(const Region &reg) const {
  return FromSql(reg, *reg.item.from) + Where(reg, reg.item.pending);
}

// A materialized relation in a FROM clause: its CTE, or a plain table read in place.
std::string Pass::LeafFrom(const Rel *r, const std::string &alias) const {
  return direct.count(r) ? std::string(r->only ? "ONLY " : "") + r->table + " " + alias : F(r) + " " + alias;
}

// A leaf's rid as an expression (side kLeafSide + k, column -1).
ExprP LeafRid(int k) { return MakeCol(-1, kLeafSide + k, Type{"bigint", false}); }

std::string Pass::LeafCol(const Region &reg, int side, int col) const {
  if (side < kLeafSide) Internal("column outside a region");
  int k = side - kLeafSide;
  const Rel *leaf = reg.leaves.at(k);
  if (direct.count(leaf)) return reg.Alias(k) + (col < 0 ? std::string(".ctid") : "." + leaf->names.at(col));
  return reg.Alias(k) + (col < 0 ? std::string(".rid") : "." + C(col));
}

Resolver Pass::Inside(const Region &reg) const {
  return [this, &reg](int side, int col) { return LeafCol(reg, side, col); };
}

std::string Pass::Where(const Region &reg, const std::vector<ExprP> &pending) const {
  Resolver res = [&](int side, int col) { return LeafCol(reg, side, col); };
  std::vector<std::string> w;
  for (const auto &c : pending) w.push_back(Sql(c, res));
  return w.empty() ? "" : " WHERE " + Join(w, " AND ");
}

ActiveFn Pass::LeafActivity(const Region &reg) const {
  return [this, &reg](int side, int col) {
    if (side < kLeafSide || col < 0) return false;
    return active.at(reg.leaves[side - kLeafSide])[col];
  };
}

// Every leaf of the region, as sides.
std::set<int> Sides(const Region &reg) {
  std::set<int> all;
  for (size_t k = 0; k < reg.leaves.size(); k++) all.insert(kLeafSide + static_cast<int>(k));
  return all;
}

namespace {

// Whether each of `cols` of the leaf on side l is equated (=) with an
// expression over leaves of `rest` alone or with a constant of the
// statement (a GPT's layer, l = 1), and compared by identity (an equality
// coarser than the key's could match two rows).
bool Equated(const Rel *leaf, int l, const std::vector<int> &cols, const std::set<int> &rest,
             const std::vector<std::pair<ExprP, ExprP>> &eqs) {
  for (int j : cols) {
    if (!IdentityEq(leaf->cols[j])) return false;
    bool found = false;
    for (const auto &[a, b] : eqs) {
      if (a->kind != ExprKind::Col || a->side != l || a->col != j) continue;
      std::set<int> ls = LeafSides(b);
      bool inside = ls.empty() ? !ContainsVolatile(b) && !HasSublink(b) : true;
      for (int x : ls) inside = inside && rest.count(x);
      found = found || inside;
    }
    if (!found) return false;
  }
  return true;
}

}  // namespace

// The leaves of `sides` whose rids determine the others' in every row of
// the region: a saved aggregate joined (inner or left) on all its group
// keys to values of other leaves of the set has at most one matching row,
// and so has a table joined so on all the columns of a unique index
// (Scan::unique: a bias or a LayerNorm gain joined by its primary key). The
// MLP's hidden layer tanh(hp.z + b1.val), b1 keyed by its unit: each row is
// one row of hp, whose contributions then need no GROUP BY of 131k groups
// (OnlyRoot).
namespace {

// Whether the leaf on side l has at most one row that matches given rows of
// the leaves `given` (see Roots).
bool Determined(const Region &reg, int l, const std::set<int> &given, const std::vector<std::pair<ExprP, ExprP>> &eqs) {
  const Rel *leaf = reg.leaves.at(l - kLeafSide);
  for (const auto &u : UniqueKeys(leaf))
    if (Equated(leaf, l, u, given, eqs)) return true;
  return false;
}

}  // namespace

// The column sets on which `leaf` has at most one row: a saved aggregate's
// group keys (none: one row), a table's unique indexes.
std::vector<std::vector<int>> UniqueKeys(const Rel *leaf) {
  std::vector<std::vector<int>> out;
  if (leaf->kind == RelKind::Aggregate && (leaf->nkeys > 0 || leaf->distinct)) {
    out.emplace_back();
    for (int j = 0; j < leaf->nkeys; j++) out.back().push_back(j);
  }
  if (leaf->kind == RelKind::Scan)
    for (const auto &u : leaf->unique)
      if (!u.empty()) out.push_back(u);
  return out;
}

std::set<int> Roots(const Region &reg, const std::set<int> &sides) {
  std::vector<std::pair<ExprP, ExprP>> eqs = Equalities(reg.conds);
  std::set<int> roots = sides;
  for (int l : sides) {
    std::set<int> rest = roots;
    rest.erase(l);
    if (Determined(reg, l, rest, eqs)) roots.erase(l);
  }
  return roots;
}

// The leaves among `of` each of whose rows is in at most one row of the
// region: those that determine every other leaf, one after another (given
// l's row, at most one row of a leaf Determined by the rows known so far).
// A sole root is one; so are, in a GPT's residual stream x + attn(x) +
// mlp(x), the saved block outputs keyed by (b, t, e): each determines the
// batch row (its primary key (step, b, t), step a constant), then the token
// embedding (v, e), the position embedding (t, e) and the other outputs.
// Their terms need no summing by rid: before, each was a grouping set of as
// many groups as rows in its region's one pass (16k rows per set at the
// GPT's second size), which took that pass's hash tables past work_mem.
namespace {

// Whether the leaves `of` determine every other leaf, one after another
// (see OnceLeaves).
bool Determines(const Region &reg, const std::set<int> &of, const std::vector<std::pair<ExprP, ExprP>> &eqs) {
  std::set<int> all = Sides(reg), known = of;
  for (bool grew = true; grew;) {
    grew = false;
    for (int m : all)
      if (!known.count(m) && Determined(reg, m, known, eqs)) grew = known.insert(m).second;
  }
  return known.size() == all.size();
}

}  // namespace

std::set<int> OnceLeaves(const Region &reg, const std::set<int> &of) {
  std::vector<std::pair<ExprP, ExprP>> eqs = Equalities(reg.conds);
  std::set<int> out;
  for (int l : of)
    if (Determines(reg, {l}, eqs)) out.insert(l);
  return out;
}

// --- values computed below a join -------------------------------------------
//
// PostgreSQL evaluates a region's expressions after all of its joins. When
// a costly value reads only some leaves S and a join with the others
// repeats each row of S's join, it is computed once per repetition:
// attention's p = exp(s - m) / z reads the (i, j) pairs (f15 ⋈ f18 ⋈ f23),
// and the join with v repeated each pair d times (526k exponentials
// instead of 33k at T = 256). Such a region is split: a subquery s over S
// computes the values, and the other leaves are joined to it. Only in
// regions of inner joins (their conditions are then all in reg.conds), and
// only where a leaf outside S is a root (see Roots: not determined by the
// others, so the join may repeat S's rows). Values under a CASE branch stay
// where the branch is taken. The subquery keeps only the rows of S that
// the other leaves match (EXISTS): a value the forward never computed (ln
// of a row without a partner) must not raise an error here.

// The leaves S below which the costly values of `exprs` are computed, or
// none.
std::set<int> BelowSides(const Region &reg, const std::vector<ExprP> &exprs) {
  if (reg.outer || reg.leaves.size() < 2) return {};
  for (const auto &c : reg.conds)
    if (HasSublink(c)) return {};
  std::set<int> all = Sides(reg);
  std::set<int> roots = Roots(reg, all), below;
  std::vector<std::pair<ExprP, ExprP>> eqs = Equalities(reg.conds);
  std::function<void(const ExprP &)> walk = [&](const ExprP &e) {
    if (!e || e->kind == ExprKind::Case || e->kind == ExprKind::Sublink) return;
    if (Movable(e, all)) {
      std::set<int> ls = LeafSides(e);
      bool repeated = false;
      for (int x : roots) repeated = repeated || !ls.count(x);
      // (not where the leaves it reads determine all the others: each of
      // their rows is then in one row of the region at most, and the split
      // would only add its EXISTS, a join of the other leaves: the GPT's
      // loss, ln of a position's sum of exponentials joined with the batch
      // and the target's logit, joined the 38,912 logits once more for it)
      if (repeated && Determines(reg, ls, eqs)) repeated = false;
      if (repeated) {
        below.insert(ls.begin(), ls.end());
        return;
      }
    }
    for (const auto &a : e->args) walk(a);
  };
  for (const auto &e : exprs) walk(e);
  for (int x : roots)
    if (!below.count(x)) return below;
  return {};
}

// A leaf's rid or column as a column of a subquery over the region (the
// backward's r, the split's s): a<k>_rid, a<k>_c<j>.
std::string FlatName(const Region &reg, int side, int col) {
  return reg.Alias(side - kLeafSide) + (col < 0 ? std::string("_rid") : "_" + C(col));
}

// e with its costly values over `below` replaced by the columns h<N> of s
// (their definitions over the leaves appended to defs).
ExprP Pass::Hoist(const Region &reg, const ExprP &e, const std::set<int> &below, std::vector<std::string> &defs,
                  std::map<std::string, std::string> &names) const {
  if (!e || e->kind == ExprKind::Case || e->kind == ExprKind::Sublink) return e;
  if (Movable(e, below)) {
    std::string sql = Sql(e, [&](int side, int col) { return LeafCol(reg, side, col); });
    auto it = names.find(sql);
    if (it == names.end()) {
      std::string n = "h" + std::to_string(names.size());
      it = names.emplace(sql, n).first;
      defs.push_back(sql + " AS " + n);
    }
    return MakeConst("s." + it->second, e->type);
  }
  if (e->args.empty()) return e;
  auto c = std::make_shared<Expr>(*e);
  for (auto &a : c->args) a = Hoist(reg, a, below, defs, names);
  return c;
}

// A leaf column read above the split: through s for the leaves below.
Resolver Pass::Above(const Region &reg, const std::set<int> &below) const {
  return [this, &reg, below](int side, int col) {
    return below.count(side) ? "s." + FlatName(reg, side, col) : LeafCol(reg, side, col);
  };
}

// FROM ... WHERE ... (without FROM) of region reg split at `below`: s has
// the rids of its leaves, their columns `cols` (and those the other leaves
// are joined on) and `defs`; wrap(subquery) names it s (and may add layers).
std::string Pass::SplitFrom(const Region &reg, const std::set<int> &below, std::set<std::pair<int, int>> cols,
                            const std::vector<std::string> &defs,
                            const std::function<std::string(const std::string &)> &wrap) const {
  Resolver leaf = [&](int side, int col) { return LeafCol(reg, side, col); };
  std::vector<std::string> sel, sfrom, rfrom, swhere, rwhere, cross;
  std::vector<ExprP> cross_conds;
  for (const auto &c : reg.conds) {
    std::set<int> ls = LeafSides(c);
    int in = 0;
    for (int x : ls) in += below.count(x) ? 1 : 0;
    if (in == static_cast<int>(ls.size()))
      swhere.push_back(Sql(c, leaf));
    else if (in == 0)
      rwhere.push_back(Sql(c, leaf));
    else
      cross_conds.push_back(c), CollectCols(c, cols);
  }
  for (size_t k = 0; k < reg.leaves.size(); k++) {
    int side = kLeafSide + static_cast<int>(k);
    if (below.count(side)) {
      sfrom.push_back(LeafFrom(reg.leaves[k], reg.Alias(static_cast<int>(k))));
      sel.push_back(LeafCol(reg, side, -1) + " AS " + FlatName(reg, side, -1));
    } else {
      rfrom.push_back(LeafFrom(reg.leaves[k], reg.Alias(static_cast<int>(k))));
    }
  }
  for (const auto &[side, col] : cols)
    if (below.count(side) && col >= 0) sel.push_back(LeafCol(reg, side, col) + " AS " + FlatName(reg, side, col));
  sel.insert(sel.end(), defs.begin(), defs.end());
  std::vector<std::string> exists = rwhere;
  for (const auto &c : cross_conds) exists.push_back(Sql(c, leaf)), cross.push_back(Sql(c, Above(reg, below)));
  // (a pre-filter only: the join below applies every condition again)
  if (!citus_in_place)
    swhere.push_back("EXISTS (SELECT 1 FROM " + Join(rfrom, ", ") +
                     (exists.empty() ? "" : " WHERE " + Join(exists, " AND ")) + ")");
  std::string sub = "(SELECT " + Join(sel, ", ") + " FROM " + Join(sfrom, ", ") +
                    (swhere.empty() ? "" : " WHERE " + Join(swhere, " AND ")) + Fence() + ")";
  rwhere.insert(rwhere.end(), cross.begin(), cross.end());
  return wrap(sub) + ", " + Join(rfrom, ", ") + (rwhere.empty() ? "" : " WHERE " + Join(rwhere, " AND "));
}

std::vector<std::string> Pass::FromsBut(const Region &reg, int side) const {
  std::vector<std::string> from;
  for (size_t k = 0; k < reg.leaves.size(); k++)
    if (kLeafSide + static_cast<int>(k) != side) from.push_back(LeafFrom(reg.leaves[k], reg.Alias(k)));
  return from;
}

std::string SavedCol(int side, int col) { return "x" + std::to_string(side - kLeafSide) + "_" + std::to_string(col); }

}  // namespace ddx::core
