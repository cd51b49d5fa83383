// The runner (src/pg/runner/): runs gradient programs for _ddx.grad_at and
// serves each row's gradient and the loss's value.
#pragma once

namespace ddx::pg {

// Defines the runner's settings (ddx.show_sql). Called once from _PG_init.
void DefineRunnerSettings();

// Installs the planner's statistics of a program's CTE columns
// (estimates.cpp). Called once from _PG_init.
void InstallProgramEstimates();

// Sets search_path, until AtEOXact_GUC(true, nest) restores it, to what ddx's
// own SQL (a gradient program, jvp's tangent query) is resolved under: the
// caller's search_path with pg_catalog first. The program names built-in
// functions, operators and types unqualified and every object of a user
// qualified, so the built-ins are pg_catalog's whatever the path holds; the
// caller's own schemas stay on it because the bodies of the user functions
// the program calls (not inlined: a plpgsql helper, an SQL function that
// calls another) resolve their names when they run, as they do in the
// caller's statement. (pg_catalog is first on every path that does not name
// it, so the path differs from the caller's only where it names pg_catalog
// after another schema.)
void SetProgramSearchPath();

}  // namespace ddx::pg
