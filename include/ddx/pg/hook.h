// The post_parse_analyze_hook: finds grad(...) calls, builds and
// differentiates their losses, and rewrites each call into
// ddx_grad_at(program, pidx, tableoid, ctid, value IS NULL).
#pragma once

namespace ddx::pg {

// Installs the hook (chained) and the syscache callback that forgets cached
// function OIDs. Called once from _PG_init.
void InstallHook();

}  // namespace ddx::pg
