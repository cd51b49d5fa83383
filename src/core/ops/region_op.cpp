// Row-local relations: a projection, a filter, an inner or a LEFT join. Read
// by another relation, such a relation is compiled into the reader's region
// (region.cpp) and has no rule of its own; these rules are for one that is
// materialized (the loss, a sublink's relation, a side of a contraction, a
// projection grown too large): its step holds its region's rows with the
// leaf rids and the leaf columns its expressions read, and its reverse
// differentiates the composed columns over those saved columns.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../lets.h"
#include "../pass.h"

namespace ddx::core {
namespace {

std::vector<bool> ProjectRanks(const Rel &r, const Inputs &in, const RankCheck &check) {
  std::vector<bool> rk(r.cols.size(), false);
  for (size_t i = 0; i < r.exprs.size(); i++) {
    const ExprP &e = r.exprs[i];
    if (e->kind == ExprKind::Col && e->side == 0)
      rk[i] = in(0).at(e->col);
    else
      check.walk(e, in(0), false);
  }
  return rk;
}

std::vector<bool> ProjectNotNull(const Rel &r, const Inputs &in) {
  std::vector<bool> nn(r.cols.size(), false);
  for (size_t i = 0; i < nn.size(); i++) {
    const ExprP &e = r.exprs[i];
    if (e->kind == ExprKind::Col && e->side == 0) nn[i] = in(0).at(e->col);
    if (e->kind == ExprKind::Const) nn[i] = e->text.rfind("NULL", 0) != 0;
  }
  return nn;
}

std::vector<bool> ProjectActivity(const Rel &r, const Inputs &in) {
  std::vector<bool> act(r.cols.size(), false);
  const auto &a0 = in(0);
  ActiveFn fn = [&](int side, int col) { return side == 0 && a0[col]; };
  for (size_t i = 0; i < act.size(); i++) act[i] = IsActive(r.exprs[i], fn);
  return act;
}

std::vector<bool> FilterNotNull(const Rel &r, const Inputs &in) {
  std::vector<bool> nn = in(0);
  Compared(r.cond, nn);
  return nn;
}

std::vector<bool> JoinNotNull(const Rel &r, const Inputs &in) {
  std::vector<bool> nn = in(0);
  if (r.join == JoinKind::Inner) {
    nn.insert(nn.end(), in(1).begin(), in(1).end());
    Compared(r.cond, nn);
  } else {
    nn.resize(r.cols.size(), false);
  }
  return nn;
}

// A saved region's rows: besides rid, each column's value and name, in
// order (SavedRowCols names them for a cotangent that carries them).
std::vector<std::pair<std::string, std::string>> RowLayout(const Pass &p, const Region &reg) {
  Resolver res = [&](int side, int col) { return p.LeafCol(reg, side, col); };
  std::vector<std::pair<std::string, std::string>> cols;
  for (size_t k = 0; k < reg.leaves.size(); k++)
    cols.push_back({p.LeafCol(reg, kLeafSide + static_cast<int>(k), -1), "l" + std::to_string(k)});
  std::set<std::pair<int, int>> used;
  for (const auto &e : reg.item.cols) CollectCols(e, used);
  for (const auto &[side, col] : used)
    if (col >= 0) cols.push_back({p.LeafCol(reg, side, col), SavedCol(side, col)});
  for (size_t k = 0; k < reg.item.cols.size(); k++) cols.push_back({p.Sql(reg.item.cols[k], res), C(k)});
  return cols;
}

std::string RegionForward(const Pass &p, const Rel &rel) {
  // A materialized row-local relation: its region's rows, with the leaf
  // rids and the leaf columns its expressions read (for the backward). Its
  // rid is that of a leaf each of whose rows is in at most one of the
  // region's (OnceLeaves: the MLP's hidden layer tanh(hp.z + b1.val), b1
  // joined by its key, is one row per row of hp), else the row's number: a
  // WindowAgg over every row (131k at the MLP's bench size) saved.
  const Region &reg = p.regions.at(&rel);
  std::set<int> once = reg.outer ? std::set<int>{} : OnceLeaves(reg, Sides(reg));
  std::vector<std::string> cols{(once.empty() ? "row_number() OVER ()" : p.LeafCol(reg, *once.begin(), -1)) +
                                " AS rid"};
  for (const auto &[value, name] : RowLayout(p, reg)) cols.push_back(value + " AS " + name);
  return "SELECT " + Join(cols, ", ") + " FROM " + p.FromWhere(reg);
}

void RegionReverse(Pass &p, const Rel &rel, Steps &s) {
  const Rel *r = &rel;
  const std::set<int> &bc = p.bcols.at(r);
  std::string b = p.B(r);
  // Saved region rows: differentiate the composed columns over the
  // saved leaf columns, sum by each leaf's rid. Where the cotangent carries
  // the saved rows' columns (SavedRowCols), it is read alone, not joined
  // with the saved rows on rid again.
  bool carried = p.carried.count(r) > 0;
  const Region &reg = p.regions.at(r);
  Resolver saved = [&](int side, int col) {
    return col < 0 ? "f.l" + std::to_string(side - kLeafSide) : "f." + SavedCol(side, col);
  };
  Terms terms;
  Lets lets(p, "f", saved);
  for (int o : bc) {
    CheckVolatile(reg.item.cols[o]);
    Backprop(reg.item.cols[o], (carried ? "f." : "b.") + D(o), lets, p.LeafActivity(reg), terms);
  }
  // A leaf's saved columns, where the forward saved them (the columns its
  // expressions read), for a leaf whose cotangent may carry them (Carries).
  std::set<std::pair<int, int>> kept;
  for (const auto &e : reg.item.cols) CollectCols(e, kept);
  // (or a column equal to a kept one by an integer key equality of the
  // region's: SwiGLU's a JOIN b ON b.s = a.s AND b.j = a.j keeps a's keys
  // alone, and b's are those)
  std::map<std::pair<int, int>, std::pair<int, int>> same;
  if (!reg.outer)
    for (const auto &[x, y] : Equalities(reg.conds))
      if (x->kind == ExprKind::Col && y->kind == ExprKind::Col && IdentityEq(x->type) && x->type.sql == y->type.sql &&
          kept.count({y->side, y->col}))
        same.emplace(std::make_pair(x->side, x->col), std::make_pair(y->side, y->col));
  Resolver value = [kept, same](int side, int col) {
    if (kept.count({side, col})) return "f." + SavedCol(side, col);
    auto it = same.find({side, col});
    return it == same.end() ? std::string() : "f." + SavedCol(it->second.first, it->second.second);
  };
  p.ContributeToLeaves(
      s, reg, " FROM " + (carried ? lets.Wrap(b) : lets.Wrap(p.F(r)) + " JOIN " + b + " b ON b.rid = f.rid"), {b},
      terms, [](int k) { return "f.l" + std::to_string(k); }, "m" + std::to_string(p.id.at(r)), {}, value);
}

}  // namespace

std::vector<std::string> SavedRowCols(const Pass &p, const Rel *r) {
  auto it = p.regions.find(r);
  if (it == p.regions.end() || RuleOf(*r).forward != RegionForward) return {};
  std::vector<std::string> names;
  for (const auto &[value, name] : RowLayout(p, it->second)) names.push_back(name);
  return names;
}

namespace {

// Forward mode: the region's rows, each column beside its tangent.
std::string RegionTangent(const Pass &p, const Rel &rel) {
  const Rel *r = &rel;
  const Region &reg = p.regions.at(r);
  Resolver res = p.Inside(reg);
  const std::vector<bool> &act = p.active.at(r);
  std::vector<std::string> cols{kTangentRid};
  for (size_t k = 0; k < reg.item.cols.size(); k++) cols.push_back(p.Sql(reg.item.cols[k], res) + " AS " + C(k));
  for (size_t k = 0; k < reg.item.cols.size(); k++)
    if (act[k]) cols.push_back(p.TangentSql(reg, reg.item.cols[k]) + " AS t" + std::to_string(k));
  return "SELECT " + Join(cols, ", ") + " FROM " + p.FromWhere(reg);
}

}  // namespace

extern const OpRule kProjectOp;
const OpRule kProjectOp{
    "project",     ProjectRanks,  ProjectNotNull, ProjectActivity,
    RegionForward, RegionReverse, RegionOf::Self, RegionTangent,
};

extern const OpRule kFilterOp;
const OpRule kFilterOp{
    "filter", PassRanks, FilterNotNull, SameAsInput, RegionForward, RegionReverse, RegionOf::Self, RegionTangent,
};

extern const OpRule kJoinOp;
const OpRule kJoinOp{
    "join", JoinedRanks, JoinNotNull, JoinedActivity, RegionForward, RegionReverse, RegionOf::Self, RegionTangent,
};

}  // namespace ddx::core
