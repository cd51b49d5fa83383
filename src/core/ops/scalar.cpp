// A scalar subquery: (SELECT one value FROM a saved input of one row).
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../lets.h"
#include "../pass.h"

namespace ddx::core {
namespace {

std::string ScalarForward(const Pass &p, const Rel &rel) {
  const Rel *r = &rel;
  return "SELECT 1::bigint AS rid, (SELECT s.c0 FROM " + p.F(r->inputs[0].get()) + " s) AS c0";
}

// The one value's cotangent goes to the input's one row.
void ScalarReverse(Pass &p, const Rel &rel, Steps &) {
  const Rel *r = &rel;
  p.Contribute(r->inputs[0].get(),
               "SELECT s.rid, b.d0 FROM " + p.B(r) + " b CROSS JOIN " + p.F(r->inputs[0].get()) + " s", {p.B(r)},
               p.bcols.at(r));
}

std::string ScalarTangent(const Pass &p, const Rel &rel) {
  const Rel *r = &rel;
  std::string in = p.F(r->inputs[0].get());
  return "SELECT " + std::string(kTangentRid) + ", (SELECT s.c0 FROM " + in + " s) AS c0" +
         (p.active.at(r)[0] ? ", (SELECT s.t0 FROM " + in + " s) AS t0" : "");
}

}  // namespace

extern const OpRule kScalarOp;
const OpRule kScalarOp{
    "scalar subquery", PassRanks, NoneOf, SameAsInput, ScalarForward, ScalarReverse, RegionOf::None, ScalarTangent,
};

}  // namespace ddx::core
