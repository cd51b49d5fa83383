-- ddx: reverse-mode gradients of SQL queries. (The install script of the
-- newest version, made of sql/*.sql; sql/upgrades/ has one script from each
-- release to the next.)
\echo Use "CREATE EXTENSION ddx" to load this file. \quit

-- ddx's own schema (see "ddx's own schema _ddx" below): its internal
-- functions, training runs, their log and optimizer state. The public API
-- is in the extension's schema; each public function written in SQL or
-- plpgsql is a C shim (ddx_forward, src/pg/sql_api.cpp) in front of its body
-- _ddx.<the same name>, so that an error says what the user did, without
-- the CONTEXT lines of ddx's internal frames, and so that the first call
-- loads ddx's library in a session that has not.
CREATE SCHEMA _ddx;
COMMENT ON SCHEMA _ddx IS 'ddx: internal functions, training runs, their log and optimizer state';
GRANT USAGE ON SCHEMA _ddx TO PUBLIC;
