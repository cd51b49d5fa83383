// The contraction transpose of an aggregate (see contraction.cpp).
#pragma once

#include "../pass.h"

namespace ddx::core {

// Contributes the gradient of aggregate r's region's leaves by the
// contraction transpose, when it applies (sum/avg over inner joins, each
// leaf that receives gradient transposable); false, with nothing
// contributed, when it does not.
bool Transposed(Pass &p, const Rel *r, const Region &reg);

}  // namespace ddx::core
