-- --- optimizer steps -------------------------------------------------------

-- An optimizer's rule: how a row's state moves and how far its value moves,
-- what _ddx.step_sql assembles a step from; one function per optimizer
-- (_ddx.adam_rule, _ddx.sgd_rule), found by _ddx.optimizer. In its texts d.d
-- is a row's gradient as applied (clipped; plus the L2 term where the rule
-- does not decay the value itself), s the row's state, $n the step's
-- settings (see _ddx.step_sql).
--   decoupled    weight decay moves the value (AdamW: p *= 1 - lr * wd), not
--                the gradient (the L2 term of Adam and SGD)
--   plain        a rule without state: the new value of %1$s given the
--                applied gradient %2$s (NULL for a rule with state)
--   state_cols   the state's columns besides step and at
--   state_first  their values at a row's first step
--   state_next   their values at a later one (%1$s: the step its column was
--                last stepped at; a row that missed it starts again)
--   state_out    what the state's update returns: the move u, or what it is
--                computed from
--   move         a row's move u from s (the state returned) and, where
--                move_reads_gradient, its gradient g.d; NULL: state_out is u
CREATE TYPE _ddx.optimizer_rule AS (decoupled boolean, plain text, state_cols text, state_first text, state_next text,
                                    state_out text, move text, move_reads_gradient boolean);

-- Adam (AdamW where `decoupled`), as torch.optim's: m and v with the row's
-- own bias correction; u = lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps).
CREATE FUNCTION _ddx.adam_rule(decoupled boolean) RETURNS _ddx.optimizer_rule
LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT ROW(decoupled, NULL, 'm, v', '(1 - $4) * d.d, (1 - $5) * d.d * d.d',
             'm = CASE WHEN s.at = %1$s THEN $4 * s.m ELSE 0 END + (1 - $4) * d.d, '
             'v = CASE WHEN s.at = %1$s THEN $5 * s.v ELSE 0 END + (1 - $5) * d.d * d.d',
             '($3 / (1 - $4 ^ s.step)) * s.m / (sqrt(s.v) / sqrt(1 - $5 ^ s.step) + $6) AS u',
             NULL, false)::_ddx.optimizer_rule
$$;

-- SGD, as torch.optim's. Without momentum it keeps no state: p -= lr * d.
-- With it, buf = d on a row's first step, else momentum * buf +
-- (1 - dampening) * d, and p -= lr * buf (nesterov: lr * (d + momentum * buf)).
CREATE FUNCTION _ddx.sgd_rule(momentum boolean, nesterov boolean) RETURNS _ddx.optimizer_rule
LANGUAGE sql IMMUTABLE STRICT AS $$
  SELECT CASE WHEN NOT momentum
              THEN ROW(false, '%1$s - $3 * (%2$s)', NULL, NULL, NULL, NULL, NULL, false)::_ddx.optimizer_rule
              ELSE ROW(false, NULL, 'buf', 'd.d', 'buf = CASE WHEN s.at = %1$s THEN $8 * s.buf + (1 - $9) * d.d ELSE d.d END',
                       's.buf AS b', CASE WHEN nesterov THEN '$3 * (g.d + $8 * s.b)' ELSE '$3 * s.b' END,
                       nesterov)::_ddx.optimizer_rule
         END
$$;

-- The rule of optimizer `opt` ('adam', 'adamw' or 'sgd') with its settings.
CREATE FUNCTION _ddx.optimizer(opt text, momentum boolean, nesterov boolean) RETURNS _ddx.optimizer_rule
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  CASE opt
    WHEN 'adam' THEN RETURN _ddx.adam_rule(false);
    WHEN 'adamw' THEN RETURN _ddx.adam_rule(true);
    WHEN 'sgd' THEN RETURN _ddx.sgd_rule(momentum, nesterov);
  END CASE;
  RAISE EXCEPTION 'unknown optimizer %', opt USING ERRCODE = '22023';
END $$;

-- The statement of one optimizer step (see _ddx.optimizer_step) for the
-- parameter tables `tabs` of a run owned by `run_owner`: the same text for
-- every step of a run with the same settings, so that a session prepares it
-- once (the hook builds the gradient program once, the planner plans the
-- statement once). Its parameters: $1 the step, $2 the run's id, $3 lr,
-- $4 beta1, $5 beta2, $6 eps, $7 max_grad_norm, $8 momentum, $9 dampening,
-- $10 weight_decay; the loss may read $1. Also returns the tables it updates.
--   ddx_g<i>   each parameter table's rows with key, values and gradients
--              (grad() calls of one loss: one backward pass for all tables)
--   ddx_norm   the loss (ddx_value: the same pass) and the global norm
--   ddx_scale  clip_grad_norm_'s factor
--   ddx_d<i>   per (column, row): the gradient to apply (clipped; + L2 decay
--              for Adam and SGD); rows whose value is NULL are skipped. Not
--              stored: each reader computes it from ddx_g<i> (storing it cost
--              more than computing it three times: bench/optimizer.py)
--   ddx_s<i>   the state rows, updated (ddx_so) or inserted (ddx_sn): a row
--              new to the run, or not stepped the last time its column was,
--              starts at zero (lazy state); one UPDATE and an anti-joined
--              INSERT cost less than INSERT ... ON CONFLICT (bench/state.py)
--   ddx_v<i>   what each row's value moves by
--   ddx_u<i>   the parameter table, updated in place
-- (the CTEs of one table: _ddx.step_table_sql). A row whose value is NULL is
-- not stepped: its state row, if any, falls behind its column's last step
-- and counts no more (ddx_state does not show it; it starts again from zero
-- when the row has a value; ddx_train prunes such rows when it ends).
-- Deleting them here cost a nested loop per table.
--   On Citus, every CTE of the statement that reads a Citus table is a
-- subplan of its own, run as an execution of its own, and each execution
-- ran the gradient program again (an MLP's step: once per parameter table
-- and once for the loss). There the gradients of all tables and the loss
-- come from one CTE, ddx_gall (t = the table's number, 0 the loss; keys as
-- text, values and gradients as float8 arrays), and ddx_g<i> read it back.
CREATE FUNCTION _ddx.step_sql(rule _ddx.optimizer_rule, loss_sql text, tabs _ddx.param_table[], run_owner regrole,
                              decays boolean, OUT sql text, OUT stepped text[])
LANGUAGE plpgsql AS $$
DECLARE
  t _ddx.param_table;
  one record;
  gctes text[] := '{}';  -- ddx_g<i>, before ddx_norm
  ctes text[] := '{}';   -- the rest, after ddx_scale
  norms text[] := '{}';
  garms text[] := '{}';  -- on Citus, ddx_gall's arms
  nt int := 0;
  citus boolean := false;
  lossv text := '@extschema@.ddx_value(''ddx_loss'')';
BEGIN
  stepped := '{}';
  IF coalesce(array_length(tabs, 1), 0) = 0 THEN  -- the loss reads no parameter table: its value alone
    sql := format('WITH ddx_loss AS (%s) SELECT 0::float8 AS norm, (SELECT l.v::float8 FROM ddx_loss AS l(v)) AS loss',
                  loss_sql);
    RETURN;
  END IF;
  IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
    EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = ANY ($1))'
      INTO citus USING ARRAY(SELECT x.tbl FROM unnest(tabs) x);
  END IF;
  FOREACH t IN ARRAY tabs LOOP
    nt := nt + 1;
    stepped := stepped || t.qtbl;
    one := _ddx.step_table_sql(rule, t, nt, run_owner, decays, citus);
    gctes := gctes || one.gcte;
    garms := garms || one.garm;
    norms := norms || one.norms;
    ctes := ctes || one.ctes;
  END LOOP;
  IF citus THEN
    gctes := ARRAY[format('ddx_gall AS MATERIALIZED (%s UNION ALL SELECT 0, NULL::text[], NULL::float8[], ARRAY[%s])',
                          array_to_string(garms, ' UNION ALL '), lossv)] || gctes;
    lossv := '(SELECT a.g[1] FROM ddx_gall a WHERE a.t = 0)';
  END IF;
  sql := format('WITH ddx_loss AS (%s), %s, ddx_norm AS MATERIALIZED (SELECT %s AS loss, '
                'sqrt(coalesce(sum(q.ss), 0)) AS norm FROM (%s) q), '
                'ddx_scale AS MATERIALIZED (SELECT CASE WHEN $7::float8 IS NULL THEN 1::float8 '
                'ELSE least($7 / (n.norm + 1e-6), 1::float8) END AS s FROM ddx_norm n), %s '
                'SELECT n.norm, n.loss FROM ddx_norm n',
                loss_sql, array_to_string(gctes, ', '), lossv, array_to_string(norms, ' UNION ALL '),
                array_to_string(ctes, ', '));
END $$;

-- The CTEs of parameter table `t`, the `nt`th of a step (see _ddx.step_sql):
-- gcte its ddx_g<nt> (and on Citus garm, its arm of ddx_gall), norms its
-- columns' sums of squared gradients, ctes the rest (ddx_l, ddx_d, ddx_so,
-- ddx_sn, ddx_s, ddx_v, ddx_u; ddx_u alone for a rule without state).
CREATE FUNCTION _ddx.step_table_sql(rule _ddx.optimizer_rule, t _ddx.param_table, nt int, run_owner regrole,
                                    decays boolean, citus boolean, OUT gcte text, OUT garm text, OUT norms text[],
                                    OUT ctes text[])
LANGUAGE plpgsql AS $$
DECLARE
  st regclass;
  nc int := array_length(t.cols, 1);
  ks text := '';   -- k1, k2, ...
  kgt text := '';  -- AND t.<key> = g.k1 ...
  kst text := '';  -- AND t.<key> = s.k1 ...
  kgs text := '';  -- AND g.k1 = s.k1 ...
  kds text := '';  -- AND s.k1 = d.k1 ...
  gsel text := '';
  dsel text[] := '{}';
  -- d.last: the run step the column was last stepped at (ddx_l<i>, read
  -- once per execution, in a CTE of its own: on Citus, a local table may
  -- not be read inside a statement that updates a Citus table)
  lcase text := 'd.last';
  sret text := rule.state_out;
  upd text := '';
  gk text := '';     -- ARRAY[t.<key>::text, ...]
  gp text := '';     -- ARRAY[t.<col>::float8, ...]
  gg text := '';     -- ARRAY[grad(..., t.<col>), ...]
  gback text := '';  -- (a.k[1])::<type> AS k1, ..., a.p[1] AS p1, a.g[1] AS g1, ...
BEGIN
  norms := '{}';
  ctes := '{}';
  FOR k IN 1 .. coalesce(array_length(t.keys, 1), 0) LOOP
    ks := ks || format('k%s, ', k);
    kgt := kgt || format(' AND t.%I = g.k%s', t.keys[k], k);
    kst := kst || format(' AND t.%I = s.k%s', t.keys[k], k);
    kgs := kgs || format(' AND g.k%s = s.k%s', k, k);
    kds := kds || format(' AND s.k%s = d.k%s', k, k);
    gsel := gsel || format('t.%I AS k%s, ', t.keys[k], k);
    gk := gk || format('t.%I::text, ', t.keys[k]);
    gback := gback || format('(a.k[%1$s])::%2$s AS k%1$s, ', k, t.ktypes[k]);
  END LOOP;
  FOR j IN 1 .. nc LOOP
    gsel := gsel || format('t.%1$I AS p%2$s, @extschema@.grad(''ddx_loss'', t.%1$I) AS g%2$s, ', t.cols[j], j);
    gp := gp || format('t.%I::float8, ', t.cols[j]);
    gg := gg || format('@extschema@.grad(''ddx_loss'', t.%I), ', t.cols[j]);
    gback := gback || format('a.p[%1$s] AS p%1$s, a.g[%1$s] AS g%1$s, ', j);
    norms := norms || format('SELECT sum(g%1$s * g%1$s) AS ss FROM ddx_g%2$s', j, nt);
    -- the gradient applied: clipped, plus the L2 term where the column decays
    -- (the scale and the last step are one value each: scalar subqueries,
    -- evaluated once, where joins with their CTEs rescanned one per row)
    dsel := dsel || format('SELECT %1$s%2$L::text AS col, g.g%3$s * (SELECT c.s FROM ddx_scale c)%4$s AS d, '
                           '(SELECT l.last_step FROM ddx_l%5$s l WHERE l.col = %2$L) AS last '
                           'FROM ddx_g%5$s g WHERE g.p%3$s IS NOT NULL', replace(ks, 'k', 'g.k'), t.cols[j], j,
                           CASE WHEN NOT rule.decoupled AND t.decay[j] AND decays
                                THEN format(' + $10 * g.p%s', j) ELSE '' END, nt);
  END LOOP;
  IF citus THEN
    garm := format('SELECT %s AS t, ARRAY[%s]::text[] AS k, ARRAY[%s]::float8[] AS p, '
                   'ARRAY[%s]::float8[] AS g FROM %s t', nt, rtrim(gk, ', '), rtrim(gp, ', '),
                   rtrim(gg, ', '), t.qtbl);
    gcte := format('ddx_g%s AS (SELECT %s FROM ddx_gall a WHERE a.t = %s)', nt, rtrim(gback, ', '), nt);
  ELSE
    gcte := format('ddx_g%s AS MATERIALIZED (SELECT %s FROM %s t)', nt, rtrim(gsel, ', '), t.qtbl);
  END IF;
  IF rule.plain IS NOT NULL THEN  -- no state: each value moves by its applied gradient
    FOR j IN 1 .. nc LOOP
      upd := upd || format('%1$I = %2$s, ', t.cols[j],
                           format(rule.plain, format('t.%I', t.cols[j]), format('g.g%s * c.s%s', j,
                                  CASE WHEN NOT rule.decoupled AND t.decay[j] AND decays
                                       THEN format(' + $10 * t.%I', t.cols[j]) ELSE '' END)));
    END LOOP;
    ctes := ctes || format('ddx_u%1$s AS (UPDATE %2$s t SET %3$s FROM ddx_g%1$s g, ddx_scale c WHERE true%4$s RETURNING 1)',
                           nt, t.qtbl, rtrim(upd, ', '), kgt);
    RETURN;
  END IF;
  st := _ddx.state_table_for(t.tbl, run_owner);
  ctes := ctes || format('ddx_l%s AS MATERIALIZED (SELECT p.col::text AS col, p.last_step FROM _ddx.run_param p '
                         'WHERE p.run = $2 AND p.param = %s::pg_catalog.oid::pg_catalog.regclass)', nt, t.tbl::oid);
  ctes := ctes || format('ddx_d%s AS NOT MATERIALIZED (%s)', nt, array_to_string(dsel, ' UNION ALL '));
  -- state: rows stepped before are updated (a HOT update: no key changes),
  -- rows new to the run inserted (a row not stepped the last time its
  -- column was starts again from zero); ddx_s<i> has the step each takes
  ctes := ctes || format('ddx_so%1$s AS (UPDATE %2$s s SET %3$s FROM ddx_d%1$s d WHERE s.run = $2 AND s.col = d.col%4$s '
                         'RETURNING s.col, %5$s%6$s)', nt, st,
                         format('step = CASE WHEN s.at = %1$s THEN s.step + 1 ELSE 1 END, ', lcase)
                           || format(rule.state_next, lcase) || ', at = $1',
                         kds, replace(ks, 'k', 's.k'), sret);
  -- The rows the UPDATE missed, by an anti-join with its RETURNING rows
  -- (the rows it matched), not with the state table: on Citus, a state
  -- table distributed like its parameters may not be read by a subquery
  -- correlated with a CTE. (The anti-join runs only when the UPDATE missed
  -- rows: bench/state.py.)
  ctes := ctes || format('ddx_sn%1$s AS (INSERT INTO %2$s AS s (run, col, %3$s%4$s) SELECT $2, d.col, %5$s%6$s '
                         'FROM ddx_d%1$s d LEFT JOIN ddx_so%1$s o ON o.col = d.col%7$s '
                         'WHERE (SELECT count(*) FROM ddx_so%1$s) < (SELECT count(*) FROM ddx_d%1$s) '
                         'AND o.col IS NULL RETURNING s.col, %8$s%9$s)', nt, st, ks, 'step, at, ' || rule.state_cols,
                         replace(ks, 'k', 'd.k'), '1, $1, ' || rule.state_first, replace(kds, 's.k', 'o.k'),
                         replace(ks, 'k', 's.k'), sret);
  ctes := ctes || format('ddx_s%1$s AS (SELECT * FROM ddx_so%1$s UNION ALL SELECT * FROM ddx_sn%1$s)', nt);
  IF rule.move IS NULL THEN
    ctes := ctes || format('ddx_v%1$s AS (SELECT * FROM ddx_s%1$s)', nt);
  ELSE
    ctes := ctes || format('ddx_v%1$s AS (SELECT s.col, %2$s%3$s AS u FROM ddx_s%1$s s%4$s)', nt,
                           replace(ks, 'k', 's.k'), rule.move,
                           CASE WHEN rule.move_reads_gradient
                                THEN format(' JOIN ddx_d%s g ON g.col = s.col%s', nt, kgs) ELSE '' END);
  END IF;
  -- the update; a decoupled rule decays the value itself: p *= 1 - lr * weight_decay
  upd := '';
  FOR j IN 1 .. nc LOOP
    upd := upd || format('%1$I = t.%1$I%2$s - %3$s, ', t.cols[j],
                         CASE WHEN rule.decoupled AND t.decay[j] AND decays THEN ' * (1 - $3 * $10)' ELSE '' END,
                         CASE WHEN nc = 1 THEN 's.u' ELSE format('coalesce(s.u%s, 0)', j) END);
  END LOOP;
  IF nc = 1 THEN
    ctes := ctes || format('ddx_u%1$s AS (UPDATE %2$s t SET %3$s FROM ddx_v%1$s s WHERE true%4$s RETURNING 1)',
                           nt, t.qtbl, rtrim(upd, ', '), kst);
  ELSE  -- one row per key: the columns' steps side by side
    ctes := ctes || format('ddx_u%1$s AS (UPDATE %2$s t SET %3$s FROM (SELECT %4$s%5$s FROM ddx_v%1$s GROUP BY %6$s) s '
                           'WHERE true%7$s RETURNING 1)', nt, t.qtbl, rtrim(upd, ', '), ks,
                           array_to_string(ARRAY(SELECT format('max(u) FILTER (WHERE col = %L) AS u%s', t.cols[j], j)
                                                   FROM generate_series(1, nc) j), ', '),
                           CASE WHEN ks = '' THEN '()' ELSE rtrim(ks, ', ') END, kst);
  END IF;
END $$;

-- An optimizer setting out of its range, refused as torch.optim refuses it
-- (22023; 22004 for NULL), naming the argument and its range.
CREATE FUNCTION _ddx.refuse_setting(name text, value float8, range text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'invalid value for %: %', name, coalesce(value::text, 'NULL')
    USING ERRCODE = CASE WHEN value IS NULL THEN '22004' ELSE '22023' END,
          DETAIL = format('%s is %s.', name, range);
END $$;

-- Whether x is a number: not NULL, NaN or infinite.
CREATE FUNCTION _ddx.finite(x float8) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT x IS NOT NULL AND x NOT IN ('NaN', 'Infinity', '-Infinity') $$;

-- A float for progress messages: four significant digits.
CREATE FUNCTION _ddx.g4(x float8) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN x IS NULL THEN 'NULL' WHEN NOT _ddx.finite(x) THEN x::text WHEN x = 0 THEN '0'
              WHEN abs(x) >= 1e-4 AND abs(x) < 1e6
              THEN trim_scale(round(x::numeric, greatest(0, 3 - floor(log(abs(x)::numeric))::int)))::text
              ELSE btrim(to_char(x, '9.999EEEE')) END
$$;

-- The frames of a user's own functions inside a step (a plpgsql helper of
-- the loss that raised the error), from the error's context, for the DETAIL
-- of the step's error, which a re-raise would otherwise lose: the frames
-- before the first of ddx's own (innermost first: those after it are the
-- caller's, which the error's CONTEXT keeps). "In <frame>; <frame>." or ''.
CREATE FUNCTION _ddx.users_frames(ctx text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  WITH t AS (SELECT l, o FROM regexp_split_to_table(coalesce(ctx, ''), E'\n') WITH ORDINALITY AS t(l, o))
  SELECT coalesce(E'\nIn ' || string_agg(t.l, '; ' ORDER BY t.o) || '.', '')
    FROM t
   WHERE t.o < coalesce((SELECT min(o) FROM t WHERE l LIKE 'PL/pgSQL function \_ddx.%'), 2147483647)
     AND ((t.l LIKE 'PL/pgSQL function %' AND t.l NOT LIKE 'PL/pgSQL function \_ddx.%')
          OR (t.l LIKE 'SQL function "%' AND t.l NOT LIKE 'SQL function "ddx\_%' AND t.l NOT LIKE 'SQL function "\_ddx%'))
$$;

-- A session's first sight of `key` (true once per session): what a NOTICE
-- that should be said once looks up.
CREATE FUNCTION _ddx.first_time(key text) RETURNS boolean
  AS 'MODULE_PATHNAME', 'ddx_first_time' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

-- A session's plan of an optimizer step: what _ddx.optimizer_step works out
-- before it runs the step's statement (the run, the parameter tables and
-- those of them the loss reads, the statement and its prepared name), kept
-- under a key of the step's inputs until the catalogs may have changed
-- (src/pg/api/step_plan.cpp), so that a training loop's later steps skip
-- that work: ~10 ms a step at the demo GPT's 20 tables.
CREATE TYPE _ddx.step_plan AS (run_name text, run_id int, run_owner regrole, tabs _ddx.param_table[],
                               kept _ddx.param_table[], sql text, prepared text);
CREATE FUNCTION _ddx.step_plan_get(key text) RETURNS _ddx.step_plan
  AS 'MODULE_PATHNAME', 'ddx_step_plan_get' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
CREATE FUNCTION _ddx.step_plan_put(key text, plan _ddx.step_plan) RETURNS void
  AS 'MODULE_PATHNAME', 'ddx_step_plan_put' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

-- One optimizer step, the body of ddx_adamw_step and ddx_sgd_step (their
-- arguments; `opt` is 'adamw', 'adam' or 'sgd'): checks, the run's next
-- step, and the step's statement (_ddx.step_sql), prepared once per session
-- and executed. What the step is worked out from is the session's plan of
-- it where one is kept (_ddx.step_plan), checked against the run's id and
-- owner. All of it reads the statement's snapshot, so the gradients
-- are those of the parameters before the step. An error says which step of
-- which run failed and where (the statement is shown with ddx.show_sql =
-- on). The loss may read $1, the number of the step being taken (a
-- mini-batch by step).
--   Settings are checked as torch.optim checks them (finite, in range).
--   A parameter table the loss never reads is skipped, as PyTorch skips a
--   parameter whose grad is None: no gradient, no step, its state kept (a
--   NOTICE once per session and run); where the loss calls a function ddx
--   cannot see into, the table could be read in there, and the step is
--   refused (0A000).
--   A loss or gradient norm that is not finite stops the step (22P01): the
--   error rolls back its update, so the parameters and the state are those
--   of the step before.
--   A NULL loss stops it too (22004): SQL's aggregates give NULL over no
--   rows, so a batch past the end of the data would otherwise step on a
--   zero gradient with only weight decay and momentum moving the
--   parameters, logged but never raised.
--   The run is locked for the transaction (see _ddx.run_claim); the step is
--   logged in _ddx.train_log.
--   The statement runs under its generic plan, planned once per session (as
-- ddx's programs do): its custom plans cost the same work at every step
-- (20 ms at the demo GPT's size), and PostgreSQL keeps choosing them where
-- a custom plan's estimate is below the generic one's, as where the state
-- tables hold several runs ($2) — the GPT's steps were planned anew, all of
-- them (bench/RESULTS.md, "A step's statement planned once"). Not in a
-- database with Citus, which cannot plan a distributed statement whose
-- parameters are unbound ("could not create distributed plan"). plan_cache_mode is set for the
-- EXECUTE alone and put back after it (an error undoes it with the block).
--   The settings reach the prepared statement as literals (EXECUTE of a
-- prepared statement takes no parameters of its own), written under
-- extra_float_digits = 3, the shortest text that reads back to the same
-- float8: under a session's extra_float_digits of -15 the rate 0.0123 was
-- written 0.01 and beta2 0.999 was written 1 (a division by zero).
CREATE FUNCTION _ddx.optimizer_step(opt text, loss_sql text, params text[], lr float8, beta1 float8, beta2 float8,
                                   eps float8, weight_decay float8, no_decay text[], max_grad_norm float8,
                                   momentum float8, dampening float8, nesterov boolean, run_name text,
                                   OUT step int, OUT grad_norm float8, OUT lr_used float8, OUT loss float8)
LANGUAGE plpgsql SET extra_float_digits = 3 AS $$
DECLARE
  tabs _ddx.param_table[];
  kept _ddx.param_table[] := '{}';
  skipped text[] := '{}';
  rd record;
  run_id int;
  run_owner regrole;
  sql text;
  prepared text;
  plan_key text;
  plan _ddx.step_plan;
  many boolean;
  plan_mode text;
  stale text;
  e_state text;
  e_msg text;
  e_detail text;
  e_hint text;
  e_ctx text;
  e_where text;
BEGIN
  -- PyTorch's argument checks
  IF NOT _ddx.finite(lr) OR lr < 0 THEN
    PERFORM _ddx.refuse_setting('lr', lr, 'a finite number, at least 0');
  END IF;
  IF opt <> 'sgd' THEN
    IF NOT _ddx.finite(beta1) OR beta1 < 0 OR beta1 >= 1 THEN
      PERFORM _ddx.refuse_setting('beta1', beta1, 'in [0, 1)');
    END IF;
    IF NOT _ddx.finite(beta2) OR beta2 < 0 OR beta2 >= 1 THEN
      PERFORM _ddx.refuse_setting('beta2', beta2, 'in [0, 1)');
    END IF;
    IF NOT _ddx.finite(eps) OR eps < 0 THEN
      PERFORM _ddx.refuse_setting('eps', eps, 'a finite number, at least 0');
    END IF;
  END IF;
  IF NOT _ddx.finite(weight_decay) OR weight_decay < 0 THEN
    PERFORM _ddx.refuse_setting('weight_decay', weight_decay, 'a finite number, at least 0');
  END IF;
  IF NOT _ddx.finite(momentum) OR momentum < 0 THEN
    PERFORM _ddx.refuse_setting('momentum', momentum, 'a finite number, at least 0');
  END IF;
  IF NOT _ddx.finite(dampening) OR dampening < 0 THEN
    PERFORM _ddx.refuse_setting('dampening', dampening, 'a finite number, at least 0');
  END IF;
  IF max_grad_norm = 'NaN' OR max_grad_norm < 0 THEN
    PERFORM _ddx.refuse_setting('max_grad_norm', max_grad_norm, 'NULL (no clipping) or a number, at least 0');
  END IF;
  IF nesterov IS NULL THEN
    RAISE EXCEPTION 'invalid value for nesterov: NULL' USING ERRCODE = '22004';
  END IF;
  IF nesterov AND (momentum <= 0 OR dampening <> 0) THEN
    RAISE EXCEPTION 'Nesterov momentum requires a momentum and zero dampening' USING ERRCODE = '22023';
  END IF;
  IF loss_sql IS NULL THEN
    RAISE EXCEPTION 'loss_sql must not be NULL' USING ERRCODE = '22004',
      HINT = 'Pass the loss as a query returning one row and one number, e.g. ''SELECT l FROM loss''.';
  END IF;
  loss_sql := regexp_replace(loss_sql, '[\s;]+$', '');
  -- what the step is worked out from besides the catalogs, for the
  -- session's plan of it (_ddx.step_plan_get)
  -- (and of the current user: plans are kept per user, src/pg/api/step_plan.cpp)
  plan_key := format('%L %L %L %L %L %L %L %L %L %L', opt, momentum <> 0, nesterov, weight_decay <> 0, loss_sql,
                     params, no_decay, run_name, session_user, current_setting('search_path'));
  plan := _ddx.step_plan_get(plan_key);
  IF plan IS NULL THEN
    tabs := ARRAY(SELECT x FROM _ddx.param_tables(params, no_decay) x);
    run_name := coalesce(run_name, _ddx.default_run_name(tabs));
  ELSE
    tabs := plan.tabs;
    run_name := plan.run_name;
    -- (what _ddx.param_tables checks that is not in the catalogs)
    FOR i IN 1 .. coalesce(array_length(tabs, 1), 0) LOOP
      IF tabs[i].keys = '{}' THEN
        EXECUTE format('SELECT count(*) > 1 FROM (SELECT 1 FROM %s LIMIT 2) q', tabs[i].qtbl) INTO many;
        IF many THEN
          plan := NULL;
          tabs := ARRAY(SELECT x FROM _ddx.param_tables(params, no_decay) x);  -- (raises the error)
        END IF;
      END IF;
    END LOOP;
  END IF;
  SELECT n.run_id, n.run_step, n.run_owner INTO run_id, step, run_owner FROM _ddx.run_next_step(run_name, opt) n;
  IF plan.run_id = run_id AND plan.run_owner = run_owner THEN
    kept := plan.kept;
    sql := plan.sql;
    prepared := plan.prepared;
  ELSE
    -- the parameter tables the loss reads (unknown where it does not even
    -- translate: then all of them, and preparing the statement says what is
    -- wrong)
    SELECT * INTO rd FROM _ddx.loss_reads(loss_sql, ARRAY(SELECT x.tbl FROM unnest(tabs) x),
                                          ARRAY(SELECT x.cols[1] FROM unnest(tabs) x));
    FOR i IN 1 .. array_length(tabs, 1) LOOP
      IF rd.reads IS NULL OR rd.reads[i] THEN
        kept := kept || tabs[i];
      ELSE
        skipped := skipped || tabs[i].qtbl;
      END IF;
    END LOOP;
    IF skipped <> '{}' AND rd.opaque <> '{}' THEN
      RAISE EXCEPTION 'ddx cannot see into %, which the loss calls', rd.opaque[1]
        USING ERRCODE = '0A000',
              DETAIL = format('Step %s of training run "%s": the loss reads %s nowhere else, so it could reach its '
                              'parameters only inside what ddx cannot differentiate (%s), whose part of the loss '
                              'would get no gradient.', step, run_name, array_to_string(skipped, ', '),
                              array_to_string(rd.opaque, ', ')),
              HINT = 'Write the loss as a view, a CTE, or an SQL function that PostgreSQL inlines (LANGUAGE sql, one '
                     'SELECT of one expression or a set-returning one SELECT, not SECURITY DEFINER, no SET clause).';
    END IF;
    FOR i IN 1 .. coalesce(array_length(skipped, 1), 0) LOOP
      IF _ddx.first_time(format('skip %s %s', run_id, skipped[i])) THEN
        RAISE NOTICE 'training run "%" skips table %: the loss does not read it', run_name, skipped[i]
          USING DETAIL = 'A parameter table that the loss never reads gets no gradient and no step; its values and '
                         'its optimizer state stay as they are (PyTorch skips a parameter whose grad is None so).';
      END IF;
    END LOOP;
    SELECT q.sql INTO sql
      FROM _ddx.step_sql(_ddx.optimizer(opt, momentum <> 0, nesterov), loss_sql, kept, run_owner, weight_decay <> 0) q;
    prepared := '_ddx_step_' || md5(sql);
    -- kept for the session's next steps, until the catalogs may have
    -- changed (src/pg/api/step_plan.cpp)
    PERFORM _ddx.step_plan_put(plan_key, ROW(run_name, run_id, run_owner, tabs, kept, sql, prepared)::_ddx.step_plan);
  END IF;
  -- (its parameter columns too: one session steps them at a time)
  PERFORM _ddx.params_lock_or_refuse(run_name, kept);
  -- prepared once per session and statement (plans are kept across the
  -- COMMITs of ddx_train; DDL on a table it reads makes PostgreSQL plan it,
  -- and ddx differentiate it, again)
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_prepared_statements p WHERE p.name = prepared) THEN
    -- at most 8 kept per session, the least recently prepared go (a loss
    -- whose text changes every step, its batch formatted in, would
    -- otherwise keep one per step)
    FOR stale IN SELECT p.name FROM pg_catalog.pg_prepared_statements p WHERE p.name LIKE '\_ddx\_step\_%'
                  ORDER BY p.prepare_time DESC OFFSET 7 LOOP
      EXECUTE format('DEALLOCATE %I', stale);
    END LOOP;
    BEGIN
      EXECUTE format('PREPARE %I (int, int, float8, float8, float8, float8, float8, float8, float8, float8) AS %s',
                     prepared, sql);
    EXCEPTION WHEN OTHERS THEN  -- the loss as written, or a construct ddx cannot differentiate
      GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_msg = MESSAGE_TEXT, e_detail = PG_EXCEPTION_DETAIL,
                              e_hint = PG_EXCEPTION_HINT, e_ctx = PG_EXCEPTION_CONTEXT;
      RAISE EXCEPTION USING ERRCODE = e_state, MESSAGE = e_msg,
        DETAIL = format('Step %s of training run "%s" (%s) failed while preparing its statement (the loss as '
                        'written, and its derivative).', step, run_name, opt) || _ddx.users_frames(e_ctx) ||
                 CASE WHEN e_detail <> '' THEN E'\n' || e_detail ELSE '' END ||
                 CASE WHEN current_setting('ddx.show_sql', true) = 'on' THEN E'\nStatement: ' || sql ELSE '' END,
        HINT = CASE WHEN e_hint <> '' THEN e_hint || ' ' ELSE '' END ||
               CASE WHEN current_setting('ddx.show_sql', true) = 'on' THEN ''
                    ELSE 'SET ddx.show_sql = on to see the statement.' END;
    END;
  END IF;
  BEGIN
    IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN  -- (not where Citus is)
      plan_mode := pg_catalog.current_setting('plan_cache_mode');
      PERFORM pg_catalog.set_config('plan_cache_mode', 'force_generic_plan', true);
    END IF;
    -- (EXECUTE of a prepared statement takes no $n of its own: the values are
    -- literals, float8's text being exact)
    EXECUTE format('EXECUTE %I (%s, %s, %L, %L, %L, %L, %L, %L, %L, %L)', prepared, step, run_id, lr, beta1, beta2,
                   eps, max_grad_norm, momentum, dampening, weight_decay) INTO grad_norm, loss;
    IF plan_mode IS NOT NULL THEN
      PERFORM pg_catalog.set_config('plan_cache_mode', plan_mode, true);
    END IF;
  EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS e_state = RETURNED_SQLSTATE, e_msg = MESSAGE_TEXT, e_detail = PG_EXCEPTION_DETAIL,
                            e_hint = PG_EXCEPTION_HINT, e_ctx = PG_EXCEPTION_CONTEXT;
    e_where := CASE WHEN strpos(e_ctx, 'ddx gradient program') > 0 THEN 'computing the loss and its gradient'
                    ELSE 'updating ' || array_to_string(ARRAY(SELECT x.qtbl FROM unnest(kept) x), ', ') ||
                         ' and the optimizer state' END;
    RAISE EXCEPTION USING ERRCODE = e_state, MESSAGE = e_msg,
      DETAIL = format('Step %s of training run "%s" (%s) failed while %s.', step, run_name, opt, e_where) ||
               _ddx.users_frames(e_ctx) ||
               CASE WHEN e_detail <> '' THEN E'\n' || e_detail ELSE '' END ||
               CASE WHEN current_setting('ddx.show_sql', true) = 'on' THEN E'\nStatement: ' || sql ELSE '' END,
      HINT = CASE WHEN e_hint <> '' THEN e_hint || ' ' ELSE '' END ||
             CASE WHEN e_state LIKE '22%' AND strpos(e_msg, 'out of range') > 0
                  THEN 'The loss, its gradient or the update left float8''s range: lower the learning rate, or clip '
                       'with max_grad_norm. ' ELSE '' END ||
             CASE WHEN current_setting('ddx.show_sql', true) = 'on' THEN ''
                  ELSE 'SET ddx.show_sql = on to see the statement.' END;
  END;
  -- (the error undoes the step's update with everything since the caller's
  -- transaction, or ddx_train's last COMMIT, began)
  IF loss IS NOT NULL AND NOT _ddx.finite(loss) OR grad_norm IS NOT NULL AND NOT _ddx.finite(grad_norm) THEN
    RAISE EXCEPTION 'step % of training run "%" has a % that is not finite (%)', step, run_name,
                    CASE WHEN loss IS NOT NULL AND NOT _ddx.finite(loss) THEN 'loss' ELSE 'gradient norm' END,
                    CASE WHEN loss IS NOT NULL AND NOT _ddx.finite(loss) THEN loss ELSE grad_norm END
      USING ERRCODE = '22P01',
            DETAIL = format('Loss %s, gradient norm %s at learning rate %s: the step was not taken, and the '
                            'parameters and optimizer state are those after step %s.', loss, grad_norm, lr, step - 1),
            HINT = 'Lower the learning rate, clip the gradient (max_grad_norm), or look in the loss for what '
                   'overflows (exp of a large value, a log or a division at zero).';
  END IF;
  IF loss IS NULL THEN
    RAISE EXCEPTION 'step % of training run "%" has a NULL loss', step, run_name
      USING ERRCODE = '22004',
            DETAIL = format('The loss query gave NULL (an aggregate over no rows is NULL: a mini-batch past the end '
                            'of the data, a filter no row passes) or no row; a NULL loss has no gradient to step '
                            'with. The step was not taken, and the parameters and optimizer state are those after '
                            'step %s.', step - 1),
            HINT = 'Check which rows the loss reads at this step (its $1 is the step''s number); where a loss over '
                   'no rows is meant to be 0, write coalesce(..., 0).';
  END IF;
  PERFORM _ddx.run_stepped(run_id, step, opt);
  INSERT INTO _ddx.run_param AS p (run, param, col, last_step)
    SELECT run_id, x.tbl, c, step FROM unnest(kept) x CROSS JOIN LATERAL unnest(x.cols) c
  ON CONFLICT ON CONSTRAINT run_param_pkey DO UPDATE SET last_step = excluded.last_step;
  INSERT INTO _ddx.train_log (run, step, loss, grad_norm, lr) VALUES (run_name, step, loss, grad_norm, lr);
  lr_used := lr;
END $$;

-- ddx_adamw_step: one optimizer step inside the caller's transaction, with
-- PyTorch's semantics and defaults (torch.optim.AdamW; Adam with L2 weight
-- decay when decoupled is false, whose default weight_decay is 0 as in
-- torch.optim.Adam), optional global-norm clipping as
-- torch.nn.utils.clip_grad_norm_ computes it (max_grad_norm), bias-corrected
-- moments kept per parameter row in ddx's state tables. Columns named in
-- no_decay (nanoGPT: biases and LayerNorm gains) get no weight decay.
-- state_name names the training run (default: one run per set of parameter
-- columns). Returns the step number, the gradient's global norm before
-- clipping, the learning rate used and the loss before the step.
CREATE FUNCTION _ddx.ddx_adamw_step(loss_sql text, params text[], lr float8,
                                    beta1 float8 DEFAULT 0.9, beta2 float8 DEFAULT 0.999, eps float8 DEFAULT 1e-8,
                                    weight_decay float8 DEFAULT NULL, no_decay text[] DEFAULT '{}',
                                    max_grad_norm float8 DEFAULT NULL, state_name text DEFAULT NULL,
                                    decoupled boolean DEFAULT true,
                                    OUT step int, OUT grad_norm float8, OUT lr_used float8, OUT loss float8)
LANGUAGE sql AS $$
  SELECT * FROM _ddx.optimizer_step(CASE WHEN decoupled IS NOT FALSE THEN 'adamw' ELSE 'adam' END, loss_sql, params,
                                   lr, beta1, beta2, eps,
                                   coalesce(weight_decay, CASE WHEN decoupled IS NOT FALSE THEN 0.01 ELSE 0 END),
                                   no_decay, max_grad_norm, 0, 0, false, state_name)
$$;
CREATE FUNCTION ddx_adamw_step(loss_sql text, params text[], lr float8,
                               beta1 float8 DEFAULT 0.9, beta2 float8 DEFAULT 0.999, eps float8 DEFAULT 1e-8,
                               weight_decay float8 DEFAULT NULL, no_decay text[] DEFAULT '{}',
                               max_grad_norm float8 DEFAULT NULL, state_name text DEFAULT NULL,
                               decoupled boolean DEFAULT true,
                               OUT step int, OUT grad_norm float8, OUT lr_used float8, OUT loss float8)
  AS 'MODULE_PATHNAME', 'ddx_forward' LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- ddx_sgd_step: torch.optim.SGD (momentum, dampening, Nesterov, L2 weight
-- decay; PyTorch's defaults) after one backward pass, with optional
-- global-norm clipping. Momentum buffers are kept per parameter row in ddx's
-- state tables (none without momentum).
CREATE FUNCTION _ddx.ddx_sgd_step(loss_sql text, params text[], lr float8, momentum float8 DEFAULT 0,
                                  dampening float8 DEFAULT 0, weight_decay float8 DEFAULT 0,
                                  nesterov boolean DEFAULT false, max_grad_norm float8 DEFAULT NULL,
                                  state_name text DEFAULT NULL, no_decay text[] DEFAULT '{}',
                                  OUT step int, OUT grad_norm float8, OUT lr_used float8, OUT loss float8)
LANGUAGE sql AS $$
  SELECT * FROM _ddx.optimizer_step('sgd', loss_sql, params, lr, 0.9, 0.999, 0, weight_decay, no_decay,
                                   max_grad_norm, momentum, dampening, nesterov, state_name)
$$;
CREATE FUNCTION ddx_sgd_step(loss_sql text, params text[], lr float8, momentum float8 DEFAULT 0,
                             dampening float8 DEFAULT 0, weight_decay float8 DEFAULT 0,
                             nesterov boolean DEFAULT false, max_grad_norm float8 DEFAULT NULL,
                             state_name text DEFAULT NULL, no_decay text[] DEFAULT '{}',
                             OUT step int, OUT grad_norm float8, OUT lr_used float8, OUT loss float8)
  AS 'MODULE_PATHNAME', 'ddx_forward' LANGUAGE C VOLATILE PARALLEL UNSAFE;
