// The post_parse_analyze_hook: finds grad(...) calls, builds and
// differentiates their losses, and rewrites each call into
// _ddx.grad_at(program, in_place, pidx, tableoid, ctid, value IS NULL).
#pragma once

extern "C" {
#include "postgres.h"
}

namespace ddx::pg {

// The OIDs of stop_gradient and ddx_stop_gradient in the current database,
// into out[0..1]; how many (none where ddx is not installed). PostgreSQL
// calls, no C++ object: may ereport.
int StopGradientOids(Oid out[2]);

// Installs the hook (chained) and the syscache callback that forgets cached
// function OIDs. Called once from _PG_init.
void InstallHook();

}  // namespace ddx::pg
