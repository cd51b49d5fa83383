-- The differentiation API (grad, vjp, jvp, hvp, ddx_value, stop_gradient),
-- what its calls become, and the C side of the training API.

-- grad(loss, t.col): ∂loss/∂(t.col of the current row), float8.
-- The loss is a CTE name or view name as a string, or a scalar subquery.
-- The post-parse hook rewrites every call into _ddx.grad_at; the C function
-- behind grad only explains what to do when the hook did not run.
CREATE FUNCTION grad("any", "any") RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- vjp(out, cotangent, t.col): the gradient of Σ out.v · cotangent.v over the
-- rows of out matched with the cotangent on the output's keys (its columns
-- that do not depend on a parameter), for every value column v. grad is vjp
-- seeded with 1.
CREATE FUNCTION vjp("any", "any", "any") RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- jvp(o.v, 'w.val', 'tangent' [, 'b.val', 'tangent_b' ...]): forward mode.
-- o is a CTE, view or subquery in the FROM list; the value is the
-- derivative of column v of o's current row along the tangent relations
-- (each shaped like its parameter table: the table's key columns, and the
-- tangent under the parameter column's name; a row without a tangent row
-- has tangent 0). The hook replaces o by one query that carries each
-- column's tangent beside it, and each call by its row's tangent.
CREATE FUNCTION jvp("any", VARIADIC text[]) RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad' LANGUAGE C VOLATILE PARALLEL UNSAFE;
-- hvp(loss, t.col, 'w.val', 'tw' [, 'b.val', 'tb' ...]): (H v) at t.col of
-- this row, H the Hessian of the loss in the listed parameters and v the
-- tangent relations (shaped as for jvp): the gradient of the loss's jvp.
-- Rewritten like grad.
CREATE FUNCTION hvp("any", "any", VARIADIC text[]) RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- What the output relation of jvp becomes: its rows and their tangents, from
-- the tangent query (run as a program: planner settings, kept plan, the
-- caller's privileges and snapshot). Not for direct use.
CREATE FUNCTION _ddx.jvp_rows(text) RETURNS SETOF record
  AS 'MODULE_PATHNAME', 'ddx_jvp_rows' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION _ddx.jvp_rows(text, VARIADIC "any") RETURNS SETOF record
  AS 'MODULE_PATHNAME', 'ddx_jvp_rows' LANGUAGE C VOLATILE PARALLEL UNSAFE;
-- What jvp becomes: its row's tangent column, as it is.
CREATE FUNCTION _ddx.jvp_at(float8) RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_stop_gradient' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- ddx_value(loss): the loss's value, computed by the same pass as the
-- statement's grad(loss, ...) calls (a training step logs it without a
-- second forward), or alone: the loss under the plan settings ddx's
-- programs use (nested loops off), often far faster than PostgreSQL's
-- default plan of a chain of CTEs.
CREATE FUNCTION ddx_value("any") RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- What grad becomes: the program (and its variant over Citus tables in
-- place, or NULL), the parameter's index in it, the row's identity and
-- whether the row's value is NULL. Not for direct use.
CREATE FUNCTION _ddx.grad_at(text, text, int4, oid, tid, bool) RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad_at' LANGUAGE C VOLATILE PARALLEL UNSAFE;
-- The same for a loss that reads statement parameters ($n, plpgsql
-- variables, SQL-function arguments): their values follow, the program's $1 ....
CREATE FUNCTION _ddx.grad_at(text, text, int4, oid, tid, bool, VARIADIC "any") RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad_at' LANGUAGE C VOLATILE PARALLEL UNSAFE;
-- The same for a row identified by its primary key (a parameter in a Citus
-- table): the table and ROW(key columns)::text in place of (tableoid, ctid).
CREATE FUNCTION _ddx.grad_key(text, text, int4, oid, text, bool) RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad_key' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION _ddx.grad_key(text, text, int4, oid, text, bool, VARIADIC "any") RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_grad_key' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The C side of the SQL API (src/pg/sql_api.cpp, loss_reads.cpp): which
-- parameter tables a loss reads; a run's lock; whether a procedure may commit.
CREATE FUNCTION _ddx.loss_reads(loss_sql text, tables regclass[], cols name[], OUT reads boolean[], OUT opaque text[])
  AS 'MODULE_PATHNAME', 'ddx_loss_reads' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION _ddx.run_lock(run_key int, session boolean) RETURNS boolean
  AS 'MODULE_PATHNAME', 'ddx_run_lock' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION _ddx.run_unlock(run_key int) RETURNS void
  AS 'MODULE_PATHNAME', 'ddx_run_unlock' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
-- A step's parameter columns locked (see _ddx.params_lock_or_refuse).
CREATE FUNCTION _ddx.params_lock(run_key int, tables oid[], cols text[]) RETURNS int
  AS 'MODULE_PATHNAME', 'ddx_params_lock' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
-- The key of run `run_name`'s lock: its name's hash (pg_locks shows it as
-- objid, classid 1145329665, objsubid 2; two names of one hash share a lock).
CREATE FUNCTION _ddx.run_key(run_name text) RETURNS int
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT pg_catalog.hashtext(run_name) $$;

CREATE FUNCTION _ddx.nonatomic() RETURNS boolean
  AS 'MODULE_PATHNAME', 'ddx_nonatomic' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Data parallelism (src/pg/runner/shards.cpp): under ddx.shards = N, a
-- gradient program whose loss keeps ddx_in_shard(key) runs as N parts at
-- once, part k over the keys with key mod N = k, and its gradients and loss
-- are the mean of the parts'. Outside such a part: ddx_shard() 0,
-- ddx_shards() 1, ddx_in_shard() true. PARALLEL RESTRICTED: a parallel
-- worker of PostgreSQL's would not know the part.
CREATE FUNCTION ddx_shard() RETURNS int
  AS 'MODULE_PATHNAME', 'ddx_shard' LANGUAGE C STABLE PARALLEL RESTRICTED;
CREATE FUNCTION ddx_shards() RETURNS int
  AS 'MODULE_PATHNAME', 'ddx_shards' LANGUAGE C STABLE PARALLEL RESTRICTED;
CREATE FUNCTION _ddx.in_shard_support(internal) RETURNS internal
  AS 'MODULE_PATHNAME', 'ddx_in_shard_support' LANGUAGE C STRICT;
CREATE FUNCTION ddx_in_shard(key bigint) RETURNS boolean
  AS 'MODULE_PATHNAME', 'ddx_in_shard' LANGUAGE C STABLE PARALLEL RESTRICTED SUPPORT _ddx.in_shard_support;

-- stop_gradient(x) is x, held constant by the backward pass.
CREATE FUNCTION stop_gradient(float8) RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_stop_gradient' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION ddx_stop_gradient(float8) RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_stop_gradient' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
