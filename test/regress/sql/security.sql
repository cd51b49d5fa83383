-- Backward statements run as the calling user: privileges and row-level
-- security apply. Identifiers are quoted and schema-qualified, and nothing
-- planted on the search_path changes what ddx computes.
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA security;
SET search_path = security, public;
\set VERBOSITY terse
-- hostile names
CREATE SCHEMA "we""ird sch";
CREATE TABLE "we""ird sch"."Tab; DROP TABLE x --" ("select" int, "va l""ue" float8);
INSERT INTO "we""ird sch"."Tab; DROP TABLE x --" VALUES (1, 2.0), (2, -1.5);
WITH "lo ss" AS (SELECT sum(t."va l""ue" * t."va l""ue" * t."select") AS l FROM "we""ird sch"."Tab; DROP TABLE x --" t)
SELECT t."select", grad('lo ss', t."va l""ue") FROM "we""ird sch"."Tab; DROP TABLE x --" t ORDER BY 1;
-- a schema on the search_path that shadows built-ins the programs use
CREATE SCHEMA evil;
CREATE FUNCTION evil.exp(float8) RETURNS float8 IMMUTABLE LANGUAGE sql AS 'SELECT 0::float8';
CREATE FUNCTION evil.cos(float8) RETURNS float8 IMMUTABLE LANGUAGE sql AS 'SELECT 0::float8';
CREATE FUNCTION evil.float8mul_evil(float8, float8) RETURNS float8 IMMUTABLE LANGUAGE sql AS 'SELECT 42::float8';
CREATE OPERATOR evil.* (LEFTARG = float8, RIGHTARG = float8, FUNCTION = evil.float8mul_evil);
CREATE OPERATOR evil.+ (LEFTARG = float8, RIGHTARG = float8, FUNCTION = evil.float8mul_evil);
CREATE FUNCTION evil.row_number() RETURNS bigint IMMUTABLE LANGUAGE sql AS 'SELECT 1::bigint';
CREATE TABLE p (k int, val float8);
INSERT INTO p VALUES (1, 0.5), (2, 1.5);
SET search_path = evil, pg_catalog, security, public;
-- the user's own query names the built-ins; ddx's generated SQL (exp, *, +,
-- sum, row_number, cos in the derivative of sin) must reach them too
WITH loss AS (SELECT pg_catalog.sum(pg_catalog.exp(val) OPERATOR(pg_catalog.*) val
                                    OPERATOR(pg_catalog.+) pg_catalog.sin(val)) AS l FROM security.p)
SELECT k, round(grad('loss', val)::numeric, 12) FROM security.p ORDER BY k;
-- unqualified, the user's query calls evil.exp, an SQL function that
-- PostgreSQL inlines: ddx differentiates what it computes, the constant 0
WITH loss AS (SELECT pg_catalog.sum(exp(val)) AS l FROM security.p) SELECT grad('loss', val) FROM security.p;
-- and evil.tanh, a plpgsql function that ddx cannot see into: no rule
CREATE FUNCTION evil.tanh(x float8) RETURNS float8 IMMUTABLE LANGUAGE plpgsql AS 'BEGIN RETURN 42; END';
WITH loss AS (SELECT pg_catalog.sum(tanh(val)) AS l FROM security.p) SELECT grad('loss', val) FROM security.p;
\echo :LAST_ERROR_SQLSTATE
SET search_path = security, public;
-- closed form: (1 + x) e^x + cos x
SELECT k, round(((1 + val) * exp(val) + cos(val))::numeric, 12) FROM p ORDER BY k;
-- privileges: no SELECT on a table the loss reads -> permission denied
CREATE ROLE regress_ddx_reader;
GRANT USAGE ON SCHEMA security TO regress_ddx_reader;
GRANT SELECT ON p TO regress_ddx_reader;
CREATE TABLE secret (val float8);
INSERT INTO secret VALUES (7);
SET ROLE regress_ddx_reader;
WITH loss AS (SELECT sum(p.val * s.val) AS l FROM p, secret s) SELECT grad('loss', val) FROM p;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- row-level security limits the loss and the gradient to the visible rows
CREATE TABLE r (owner text, val float8);
INSERT INTO r VALUES ('regress_ddx_reader', 1.0), ('someone', 5.0);
ALTER TABLE r ENABLE ROW LEVEL SECURITY;
CREATE POLICY mine ON r FOR SELECT USING (owner = current_user);
GRANT SELECT ON r TO regress_ddx_reader;
SET ROLE regress_ddx_reader;
WITH loss AS (SELECT sum(r.val * r.val) AS l FROM r) SELECT owner, grad('loss', val) FROM r;
RESET ROLE;
-- training runs and their state are the role's own. A trainer with UPDATE
-- on a table trains it without CREATE anywhere: its state table, in ddx's
-- schema, is the trainer's; others see neither its runs nor its state. (The
-- other role logs in itself: SET ROLE from a superuser's session would keep
-- the superuser's session_user.)
SELECT current_user AS me \gset
CREATE TABLE tp (k int PRIMARY KEY, val float8);
INSERT INTO tp VALUES (1, 0.5), (2, -1.5);
CREATE ROLE regress_ddx_trainer;
GRANT USAGE ON SCHEMA security TO regress_ddx_trainer, regress_ddx_reader;
GRANT SELECT, UPDATE ON tp TO regress_ddx_trainer;
GRANT SELECT ON tp TO regress_ddx_reader;
ALTER ROLE regress_ddx_reader LOGIN;
-- (where the cluster asks for passwords, as Debian's pg_virtualenv makes it
-- do, the reader logs in with the password in PGPASSWORD)
\getenv password PGPASSWORD
\if :{?password}
ALTER ROLE regress_ddx_reader PASSWORD :'password';
\endif
SET ROLE regress_ddx_trainer;
SELECT step FROM ddx_adamw_step('SELECT sum(val * val) FROM security.tp', ARRAY['security.tp.val'], 0.1, state_name => 'trainer''s');
SELECT name, owner FROM ddx_runs;
SELECT count(*) AS state_rows FROM ddx_state('trainer''s', 'security.tp.val');
RESET ROLE;
SELECT pg_get_userbyid(c.relowner) AS owner, c.relnamespace::regnamespace AS schema
  FROM _ddx.state_table s JOIN pg_class c ON c.oid = s.state WHERE s.param = 'security.tp'::regclass;
-- a SECURITY DEFINER function that trains a table the reader may only read
CREATE TABLE tq (k int PRIMARY KEY, val float8);
INSERT INTO tq VALUES (1, 2);
GRANT SELECT ON tq TO regress_ddx_reader;
CREATE FUNCTION step_tq() RETURNS int LANGUAGE sql SECURITY DEFINER SET search_path = security, public AS
  $$ SELECT step FROM ddx_sgd_step('SELECT sum(val * val) FROM security.tq', ARRAY['security.tq.val'], 0.25,
                                   state_name => 'definer''s') $$;
GRANT EXECUTE ON FUNCTION step_tq() TO regress_ddx_reader;
SELECT step_tq();
SELECT r.id AS tq_run FROM _ddx.run r WHERE r.name = 'definer''s' \gset
\c - regress_ddx_reader
\set VERBOSITY terse
SET search_path = security, public;
SELECT count(*) AS visible_runs FROM ddx_runs;
SELECT ddx_adamw_step('SELECT sum(val * val) FROM security.tp', ARRAY['security.tp.val'], 0.1);
\echo :LAST_ERROR_SQLSTATE
SELECT ddx_adamw_step('SELECT sum(val * val) FROM security.tp', ARRAY['security.tp.val'], 0.1, state_name => 'trainer''s');
\echo :LAST_ERROR_SQLSTATE
SELECT _ddx.state_table_for('security.tp', 'regress_ddx_trainer');
\echo :LAST_ERROR_SQLSTATE
DO $$ BEGIN EXECUTE format('SELECT count(*) FROM %s', (SELECT state FROM _ddx.state_table WHERE param = 'security.tp'::regclass)); END $$;
\echo :LAST_ERROR_SQLSTATE
DELETE FROM _ddx.state_table;
\echo :LAST_ERROR_SQLSTATE
UPDATE _ddx.run SET step = 0;
CREATE TABLE _ddx.squat (i int);
\echo :LAST_ERROR_SQLSTATE
-- a plan of a step put where the definer's step would look for it (its
-- key, run and owner) is the reader's own: the definer's step works out its
-- own, and tq takes SGD's step (1 - 0.25 * 2 * 1 = 0.5), not the planted UPDATE
SELECT _ddx.step_plan_put(format('%L %L %L %L %L %L %L %L %L %L', 'sgd', false, false, false,
                                 'SELECT sum(val * val) FROM security.tq', ARRAY['security.tq.val'], '{}'::text[],
                                 'definer''s', session_user, 'security, public'),
                          ROW('definer''s', :tq_run, :'me'::regrole, '{}', '{}',
                              'UPDATE security.tq SET val = 1000 RETURNING 0::float8, 0::float8',
                              'planted')::_ddx.step_plan);
SELECT step_tq();
SELECT val AS tq_val FROM tq;
\c - :me
\set VERBOSITY terse
SET search_path = security, public;
SELECT name, step FROM ddx_runs WHERE owner = 'regress_ddx_trainer'::regrole;
SET ROLE regress_ddx_trainer;
SELECT ddx_run_drop('trainer''s');
RESET ROLE;
-- ddx's functions grant nothing beyond EXECUTE; one is SECURITY DEFINER (it
-- creates state tables, with a fixed search_path and the checks above)
SELECT p.oid::regprocedure, p.proconfig FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid
  JOIN pg_extension e ON e.oid = d.refobjid WHERE e.extname = 'ddx' AND p.prosecdef ORDER BY 1;
DROP OWNED BY regress_ddx_reader;
DROP ROLE regress_ddx_reader;
DROP OWNED BY regress_ddx_trainer;
DROP ROLE regress_ddx_trainer;
