// FULL JOIN: both inputs saved, the join's rows hold both sides' rids (NULL
// where a side is missing), and each side's cotangent is the sum of its
// columns' cotangents by its rid.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../lets.h"
#include "../pass.h"

namespace ddx::core {
namespace {

std::string FullJoinForward(const Pass &p, const Rel &rel) {
  const Rel *r = &rel;
  std::string sql;
  int nl = static_cast<int>(r->inputs[0]->cols.size());
  Resolver lr = [nl](int, int col) { return col < nl ? "l." + C(col) : "r." + C(col - nl); };
  std::vector<std::string> cols{"row_number() OVER () AS rid", "l.rid AS l0", "r.rid AS l1"};
  for (size_t k = 0; k < r->cols.size(); k++) cols.push_back(lr(0, static_cast<int>(k)) + " AS " + C(k));
  sql = "SELECT " + Join(cols, ", ") + " FROM " + p.F(r->inputs[0].get()) + " l FULL JOIN " + p.F(r->inputs[1].get()) +
        " r ON " + (r->cond ? p.Sql(r->cond, lr) : "true");
  return sql;
}

void FullJoinReverse(Pass &p, const Rel &rel, Steps &) {
  const Rel *r = &rel;
  const std::set<int> &bc = p.bcols.at(r);
  std::string b = p.B(r);
  int nl = static_cast<int>(r->inputs[0]->cols.size());
  for (int side = 0; side < 2; side++) {
    std::vector<std::string> sel{std::string("j.l") + std::to_string(side) + " AS rid"};
    std::set<int> cols;
    for (int j : bc) {
      if ((j < nl) != (side == 0)) continue;
      int k = side ? j - nl : j;
      sel.push_back("sum(b." + D(j) + ") AS " + D(k));
      cols.insert(k);
    }
    std::string key = "j.l" + std::to_string(side);
    p.Contribute(r->inputs[side].get(),
                 "SELECT " + Join(sel, ", ") + " FROM " + b + " b JOIN " + p.F(r) + " j ON j.rid = b.rid WHERE " + key +
                     " IS NOT NULL GROUP BY " + key,
                 {b}, cols);
  }
}

// Forward mode: each side's tangents (NULL where the side is missing).
std::string FullJoinTangent(const Pass &p, const Rel &rel) {
  const Rel *r = &rel;
  int nl = static_cast<int>(r->inputs[0]->cols.size());
  Resolver lr = [nl](int, int col) { return col < nl ? "l." + C(col) : "r." + C(col - nl); };
  std::vector<std::string> cols{kTangentRid};
  for (size_t k = 0; k < r->cols.size(); k++) cols.push_back(lr(0, static_cast<int>(k)) + " AS " + C(k));
  const std::vector<bool> &act = p.active.at(r);
  for (int k = 0; k < static_cast<int>(r->cols.size()); k++)
    if (act[k])
      cols.push_back((k < nl ? "l.t" + std::to_string(k) : "r.t" + std::to_string(k - nl)) + " AS t" +
                     std::to_string(k));
  return "SELECT " + Join(cols, ", ") + " FROM " + p.F(r->inputs[0].get()) + " l FULL JOIN " + p.F(r->inputs[1].get()) +
         " r ON " + (r->cond ? p.Sql(r->cond, lr) : "true");
}

}  // namespace

extern const OpRule kFullJoinOp;
const OpRule kFullJoinOp{
    "full join", JoinedRanks, NoneOf, JoinedActivity, FullJoinForward, FullJoinReverse, RegionOf::None, FullJoinTangent,
};

}  // namespace ddx::core
