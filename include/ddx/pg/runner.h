// The runner (src/pg/runner.cpp): runs gradient programs for ddx_grad_at and
// serves each row's gradient and the loss's value.
#pragma once

namespace ddx::pg {

// Defines the runner's settings (ddx.show_sql). Called once from _PG_init.
void DefineRunnerSettings();

// A program over Citus data tables is two (program.h, CitusPlacement): the
// text grad's call carries is kInPlace, the in-place program, kGathered, the
// gathered one. The runner plans the first where Citus can, else the second.
inline constexpr const char *kInPlace = "-- ddx: Citus tables in place\n";
inline constexpr const char *kGathered = "\n-- ddx: Citus tables gathered\n";

}  // namespace ddx::pg
