// The runner (src/pg/runner.cpp): runs gradient programs for ddx_grad_at and
// serves each row's gradient and the loss's value.
#pragma once

namespace ddx::pg {

// Defines the runner's settings (ddx.show_sql). Called once from _PG_init.
void DefineRunnerSettings();

}  // namespace ddx::pg
