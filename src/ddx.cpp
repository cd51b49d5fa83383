// ddx: differentiable SQL inside PostgreSQL. PG_MODULE_MAGIC and _PG_init only.
#include "ddx/pg/contraction_node.h"
#include "ddx/pg/dense.h"
#include "ddx/pg/hook.h"
#include "ddx/pg/runner.h"
#include "ddx/pg/sql_api.h"

extern "C" {
#include "postgres.h"

#include "fmgr.h"
#include "utils/plancache.h"

PG_MODULE_MAGIC;

void _PG_init(void) {
  ddx::pg::DefineRunnerSettings();
  ddx::pg::InstallHook();
  ddx::pg::InstallContraction();
  ddx::pg::InstallDense();  // (its planner hook after the contraction's)
  ddx::pg::InstallSqlApi();
  ddx::pg::InstallStepPlans();
  ddx::pg::InstallProgramEstimates();
  // Statements parsed before the library was loaded still hold grad() as
  // written; dropping cached plans makes them parse again, through the hook.
  ResetPlanCache();
}
}
