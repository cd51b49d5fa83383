// The aggregate and window function table (see agg_rules.h).
#include "ddx/core/agg_rules.h"

#include <cstring>

namespace ddx {
namespace {

// clang-format off
//  name          flow               aggregate never_null counted order_sensitive scales translates mirror
const AggRule kAggRules[] = {
    {"sum",        AggFlow::Linear,   true,     false,     false,  false,          true,  false,     nullptr},
    {"avg",        AggFlow::Linear,   true,     false,     true,   false,          true,  true,      nullptr},
    {"count",      AggFlow::None,     true,     true,      false,  false,          false, false,     nullptr},
    {"min",        AggFlow::Attained, true,     false,     false,  false,          true,  true,      nullptr},
    {"max",        AggFlow::Attained, true,     false,     false,  false,          true,  true,      nullptr},
    {"lag",        AggFlow::Shifted,  false,    false,     false,  true,           false, false,     "lead"},
    {"lead",       AggFlow::Shifted,  false,    false,     false,  true,           false, false,     "lag"},
    {"row_number", AggFlow::Rank,     false,    true,      false,  true,           false, false,     nullptr},
    {"rank",       AggFlow::Rank,     false,    true,      false,  false,          false, false,     nullptr},
    {"dense_rank", AggFlow::Rank,     false,    true,      false,  false,          false, false,     nullptr},
};
// clang-format on

}  // namespace

const AggRule *FindAggRule(const std::string &name) {
  for (const AggRule &r : kAggRules)
    if (name == r.name) return &r;
  return nullptr;
}

}  // namespace ddx
