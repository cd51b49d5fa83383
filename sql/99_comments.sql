-- --- what \df+ and \dv+ say --------------------------------------------------

COMMENT ON FUNCTION grad("any", "any") IS
  'grad(loss, t.col): the derivative of the loss (a CTE or view named as a string, or a scalar subquery) with respect to column col of this row of table t';
COMMENT ON FUNCTION vjp("any", "any", "any") IS
  'vjp(out, cotangent, t.col): the gradient of the sum over out''s rows of each value times its cotangent (relations named as strings), at this row of t';
COMMENT ON FUNCTION jvp("any", VARIADIC text[]) IS
  'jvp(o.v, ''w.val'', ''tangent_w'', ...): forward mode, the derivative of column v of this row of o along the tangent relations';
COMMENT ON FUNCTION hvp("any", "any", VARIADIC text[]) IS
  'hvp(loss, t.col, ''w.val'', ''tangent_w'', ...): the Hessian of the loss times the tangents, at this row of t';
COMMENT ON FUNCTION ddx_value("any") IS
  'ddx_value(loss): the value of a loss, from the same pass as the statement''s grad calls of it (alone: under ddx''s plan settings)';
COMMENT ON FUNCTION stop_gradient(float8) IS 'stop_gradient(x): x, held constant by every derivative (of every order)';
COMMENT ON FUNCTION ddx_stop_gradient(float8) IS 'ddx_stop_gradient(x): x, held constant by every derivative (alias of stop_gradient)';
COMMENT ON FUNCTION ddx_in_shard(bigint) IS
  'ddx_in_shard(key): whether the rows of key belong to the part of the batch being computed (key mod ddx.shards); true outside a program in parts (ddx.shards)';
COMMENT ON FUNCTION ddx_shard() IS 'ddx_shard(): the part of a gradient program being computed, from 0 (0 outside a program in parts: ddx.shards)';
COMMENT ON FUNCTION ddx_shards() IS 'ddx_shards(): how many parts a gradient program runs as (1 outside a program in parts: ddx.shards)';
COMMENT ON FUNCTION ddx_gradcheck(text, regclass, name, float8, int, int) IS
  'ddx_gradcheck(loss_sql, table, column [, eps, sample, step]): ddx''s gradient against central finite differences, row by row; step binds $1 of a training loss';
COMMENT ON FUNCTION ddx_backward(text, text[], text[]) IS
  'ddx_backward(loss_sql, params [, grad_tables]): one backward pass into a gradient table per parameter table (<table>_grad by default)';
COMMENT ON FUNCTION ddx_adamw_step(text, text[], float8, float8, float8, float8, float8, text[], float8, text, boolean) IS
  'ddx_adamw_step(loss_sql, params, lr, ...): one torch.optim.AdamW step (Adam with decoupled => false) of a training run, in the caller''s transaction';
COMMENT ON FUNCTION ddx_sgd_step(text, text[], float8, float8, float8, float8, boolean, float8, text, text[]) IS
  'ddx_sgd_step(loss_sql, params, lr, ...): one torch.optim.SGD step (momentum, dampening, Nesterov, weight decay) of a training run, in the caller''s transaction';
COMMENT ON PROCEDURE ddx_train(text, text[], int, regclass, text, float8, text[], float8, float8, text, int, float8, float8,
                               float8, float8, boolean) IS
  'CALL ddx_train(loss_sql, params, steps, schedule, ...): trains a run until it has taken steps, committing each step (resumable), with progress NOTICEs every log_every steps (0: none)';
COMMENT ON FUNCTION ddx_schedule_constant(text, float8, int) IS
  'ddx_schedule_constant(name, lr, steps): a learning-rate schedule table (step, lr) of steps rows, all lr';
COMMENT ON FUNCTION ddx_schedule_step(text, float8, int, float8, int) IS
  'ddx_schedule_step(name, lr, step_size, gamma, steps): torch''s StepLR as a schedule table of steps rows';
COMMENT ON FUNCTION ddx_schedule_exponential(text, float8, float8, int) IS
  'ddx_schedule_exponential(name, lr, gamma, steps): torch''s ExponentialLR as a schedule table of steps rows';
COMMENT ON FUNCTION ddx_schedule_warmup_cosine(text, int, int, float8, float8, int) IS
  'ddx_schedule_warmup_cosine(name, warmup_steps, decay_steps, max_lr, min_lr [, steps]): nanoGPT''s get_lr as a schedule table';
COMMENT ON FUNCTION ddx_run_reset(text) IS 'ddx_run_reset(run): the run starts again from step 0 (its state, log and step count forgotten)';
COMMENT ON FUNCTION ddx_run_drop(text) IS 'ddx_run_drop(run): the run, its optimizer state and its log, dropped';
COMMENT ON FUNCTION ddx_run_copy(text, text) IS 'ddx_run_copy(source, target): a new run that continues from where source is';
COMMENT ON FUNCTION ddx_state(text, text) IS
  'ddx_state(run, ''table.column''): the optimizer state a run keeps per parameter row (key as jsonb, step, m, v, buf)';
COMMENT ON FUNCTION ddx_explain(text, boolean) IS
  'ddx_explain(statement [, run_analyze]): the gradient programs behind a statement, step by step (with rows and times)';
COMMENT ON FUNCTION ddx_explain_plan(text, boolean) IS
  'ddx_explain_plan(statement [, run_analyze]): EXPLAIN (ANALYZE) of each gradient program behind a statement, as ddx plans it';
COMMENT ON VIEW ddx_runs IS
  'ddx training runs the current role may see: step, parameters, last loss, and while one trains, its process, rate and ETA';
COMMENT ON VIEW ddx_train_log IS 'one row per step of every ddx training run the current role may see: loss, gradient norm, lr';
