// The contraction node (src/pg/contraction_node.cpp): a CustomScan for a
// grouped SUM of products over an equi-join, chosen by the planner where
// ddx.contraction allows it.
#pragma once

extern "C" {
#include "postgres.h"

#include "nodes/extensible.h"
}

namespace ddx::pg {

extern const CustomPathMethods kContractionPathMethods;
extern const CustomScanMethods kContractionScanMethods;
extern const CustomExecMethods kContractionExecMethods;

// Defines ddx.contraction and installs the planner hook; from _PG_init.
void InstallContraction();

}  // namespace ddx::pg
