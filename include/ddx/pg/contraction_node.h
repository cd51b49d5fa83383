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

// Whether ddx's programs run with the node (ddx.contraction is not off): the
// program the hook builds depends on it (program.h). A changed setting
// invalidates cached plans, whose statements are then analysed again, with
// the hook (plancache.c: RevalidateCachedQuery).
bool ContractionInPrograms();

}  // namespace ddx::pg
