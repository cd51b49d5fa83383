-- --- versions ---------------------------------------------------------------

-- ddx_version(): what runs. The library the server loaded, the version of
-- the extension's SQL objects, and PostgreSQL's. After a newer package is
-- installed and the server restarted, the library is the new one and the SQL
-- objects stay those of the old version until ALTER EXTENSION ddx UPDATE
-- (the library serves both).
CREATE FUNCTION _ddx.library_version() RETURNS text
  AS 'MODULE_PATHNAME', 'ddx_library_version' LANGUAGE C STABLE STRICT PARALLEL SAFE;
CREATE FUNCTION ddx_version(OUT library text, OUT extension text, OUT postgres text) RETURNS record
  LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT _ddx.library_version(),
         (SELECT e.extversion FROM pg_catalog.pg_extension e WHERE e.extname = 'ddx'),
         pg_catalog.current_setting('server_version') $$;
COMMENT ON FUNCTION ddx_version() IS
  'ddx_version(): the versions of ddx''s loaded library, of its SQL objects (ALTER EXTENSION ddx UPDATE brings them to the library''s) and of PostgreSQL';
