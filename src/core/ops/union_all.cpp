// UNION ALL of saved inputs: each row remembers its branch (br) and its row
// there (srid).
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../lets.h"
#include "../pass.h"

namespace ddx::core {
namespace {

std::vector<bool> UnionRanks(const Rel &r, const Inputs &in, const RankCheck &) {
  std::vector<bool> rk(r.cols.size(), false);
  for (size_t k = 0; k < r.inputs.size(); k++)
    for (size_t i = 0; i < rk.size(); i++) rk[i] = rk[i] || in(k)[i];
  return rk;
}

std::vector<bool> UnionNotNull(const Rel &r, const Inputs &in) {
  std::vector<bool> nn(r.cols.size(), true);
  for (size_t k = 0; k < r.inputs.size(); k++)
    for (size_t i = 0; i < nn.size(); i++) nn[i] = nn[i] && in(k)[i];
  return nn;
}

std::vector<bool> UnionActivity(const Rel &r, const Inputs &in) {
  std::vector<bool> act(r.cols.size(), false);
  for (size_t k = 0; k < r.inputs.size(); k++)
    for (size_t i = 0; i < act.size(); i++) act[i] = act[i] || in(k)[i];
  return act;
}

std::string UnionForward(const Pass &p, const Rel &rel) {
  const Rel *r = &rel;
  std::string sql;
  std::vector<std::string> branches;
  for (size_t b = 0; b < r->inputs.size(); b++) {
    std::vector<std::string> cols{std::to_string(b) + " AS br", "rid AS srid"};
    for (size_t k = 0; k < r->cols.size(); k++)
      cols.push_back("CAST(" + C(k) + " AS " + r->cols[k].sql + ") AS " + C(k));
    branches.push_back("SELECT " + Join(cols, ", ") + " FROM " + p.F(r->inputs[b].get()));
  }
  sql = "SELECT row_number() OVER () AS rid, u.* FROM (" + Join(branches, " UNION ALL ") + ") u";
  return sql;
}

// Each branch's rows get their own cotangents back, by branch and source rid.
void UnionReverse(Pass &p, const Rel &rel, Steps &) {
  const Rel *r = &rel;
  const std::set<int> &bc = p.bcols.at(r);
  std::string b = p.B(r);
  for (size_t k = 0; k < r->inputs.size(); k++) {
    std::vector<std::string> sel{"u.srid AS rid"};
    for (int j : bc) sel.push_back("b." + D(j));
    p.Contribute(r->inputs[k].get(),
                 "SELECT " + Join(sel, ", ") + " FROM " + b + " b JOIN " + p.F(r) +
                     " u ON u.rid = b.rid WHERE u.br = " + std::to_string(k),
                 {b}, bc);
  }
}

// Forward mode: each branch's tangents (0 from a branch whose column does
// not depend on a parameter).
std::string UnionTangent(const Pass &p, const Rel &rel) {
  const Rel *r = &rel;
  const std::vector<bool> &act = p.active.at(r);
  std::vector<std::string> branches;
  for (size_t b = 0; b < r->inputs.size(); b++) {
    const std::vector<bool> &in = p.active.at(r->inputs[b].get());
    std::vector<std::string> cols;
    for (size_t k = 0; k < r->cols.size(); k++)
      cols.push_back("CAST(" + C(k) + " AS " + r->cols[k].sql + ") AS " + C(k));
    for (size_t k = 0; k < r->cols.size(); k++)
      if (act[k])
        cols.push_back(
            (in[k] ? "t" + std::to_string(k) : "CASE WHEN " + C(k) + " IS NULL THEN NULL ELSE 0::float8 END") +
            " AS t" + std::to_string(k));
    branches.push_back("SELECT " + Join(cols, ", ") + " FROM " + p.F(r->inputs[b].get()));
  }
  return "SELECT " + std::string(kTangentRid) + ", u.* FROM (" + Join(branches, " UNION ALL ") + ") u";
}

}  // namespace

extern const OpRule kUnionAllOp;
const OpRule kUnionAllOp{
    "union all", UnionRanks, UnionNotNull, UnionActivity, UnionForward, UnionReverse, RegionOf::None, UnionTangent,
};

}  // namespace ddx::core
