// The rules of aggregate and window functions, as rules.h holds the scalar
// ones: one row per function ddx differentiates (or passes through), read by
// the translator (which calls it knows), the analyses and the operators'
// rules instead of comparing names.
#pragma once

#include <string>

#include "ddx/core/pure.h"

namespace ddx {

// How gradient flows from a call's value to its argument's rows.
enum class AggFlow {
  Unknown,   // a function without a rule (an extension's aggregate): refused where gradient reaches it
  None,      // count: a constant of its argument
  Linear,    // sum, avg (divided by its count): the cotangent flows to every row
  Attained,  // min, max: the cotangent is shared by the rows that attain the value
  Shifted,   // lag, lead (window only): to the row the call reads
  Rank,      // row_number, rank, dense_rank (window only): piecewise constant, only compared
};

struct AggRule {
  const char *name;
  AggFlow flow;
  bool aggregate;   // also a GROUP BY aggregate (not only a window function)
  bool never_null;  // count: 0 over no rows
  bool counted;     // avg: its count is saved beside it (n<k>), the cotangent divides by it
  // Its value depends on the order of rows its ORDER BY leaves tied (then the
  // forward and the backward could see different orders).
  bool order_sensitive;
  // f(c·x) = c·f(x) for c > 0 and f(x + c) = f(x) + c: what the softmax-max
  // prover (shift.cpp) may carry through the call.
  bool scales, translates;
  const char *mirror;  // a shift's transpose: lag's is lead, lead's is lag
};

// The rule of the built-in aggregate or window function `name` (pg_catalog's),
// or nullptr.
const AggRule *FindAggRule(const std::string &name);

inline AggFlow FlowOf(const std::string &name) {
  const AggRule *r = FindAggRule(name);
  return r ? r->flow : AggFlow::Unknown;
}
// Whether the call's value may depend on its argument's gradient (all but
// count and the ranks; a function without a rule is refused later).
inline bool PassesGradient(const std::string &name) {
  AggFlow f = FlowOf(name);
  return f != AggFlow::None && f != AggFlow::Rank;
}
inline bool Counted(const std::string &name) {
  const AggRule *r = FindAggRule(name);
  return r && r->counted;
}

}  // namespace ddx
