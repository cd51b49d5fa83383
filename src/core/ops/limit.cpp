// ORDER BY ... LIMIT / OFFSET over a saved input.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../lets.h"
#include "../pass.h"

namespace ddx::core {
namespace {

std::string LimitForward(const Pass &p, const Rel &rel) {
  const Rel *r = &rel;
  std::string sql;
  sql = "SELECT i.* FROM " + p.F(r->inputs[0].get()) + " i";
  std::vector<std::string> keys;
  for (const auto &k : r->order)
    keys.push_back("i." + C(k.col) + (k.desc ? " DESC" : " ASC") + (k.nulls_first ? " NULLS FIRST" : " NULLS LAST"));
  if (!keys.empty()) sql += " ORDER BY " + Join(keys, ", ");
  if (!r->limit.empty()) sql += " LIMIT " + r->limit;
  if (!r->offset.empty()) sql += " OFFSET " + r->offset;
  return sql;
}

// The rows kept are the input's rows (rid and all): the cotangent passes on.
void LimitReverse(Pass &p, const Rel &rel, Steps &) {
  const Rel *r = &rel;
  p.Contribute(r->inputs[0].get(), "SELECT * FROM " + p.B(r), {p.B(r)}, p.bcols.at(r));
}

std::string LimitTangent(const Pass &p, const Rel &rel) { return LimitForward(p, rel); }

}  // namespace

extern const OpRule kLimitOp;
const OpRule kLimitOp{
    "limit", PassRanks, SameAsInput, SameAsInput, LimitForward, LimitReverse, RegionOf::None, LimitTangent,
};

}  // namespace ddx::core
