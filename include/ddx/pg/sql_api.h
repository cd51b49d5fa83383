// The C side of ddx's SQL API (src/pg/api/sql_api.cpp): the shim of the public
// functions written in SQL or plpgsql, run locks, and the guard on DROP
// EXTENSION ddx; a session's plans of optimizer steps (step_plan.cpp).
#pragma once

namespace ddx::pg {

// Installs the ProcessUtility hook (chained) that guards DROP EXTENSION ddx.
// Called once from _PG_init.
void InstallSqlApi();

// Registers the callbacks that forget a session's plans of optimizer steps
// when the catalogs may have changed. Called once from _PG_init.
void InstallStepPlans();

}  // namespace ddx::pg
