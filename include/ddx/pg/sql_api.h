// The C side of ddx's SQL API (src/pg/api/sql_api.cpp): the shim of the public
// functions written in SQL or plpgsql, run locks, and the guard on DROP
// EXTENSION ddx.
#pragma once

namespace ddx::pg {

// Installs the ProcessUtility hook (chained) that guards DROP EXTENSION ddx.
// Called once from _PG_init.
void InstallSqlApi();

}  // namespace ddx::pg
