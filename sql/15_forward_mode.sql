-- Forward mode's helpers (jvp and hvp).

-- A tangent relation of jvp with two rows for one parameter row, refused
-- where the query jvp's hook writes reads it. (STABLE: an immutable call of
-- constants would be evaluated while planning, whether read or not; a
-- volatile one would keep hvp from differentiating the query that reads it.)
CREATE FUNCTION _ddx.tangent_duplicate(param text) RETURNS float8 LANGUAGE plpgsql STABLE AS $$
BEGIN
  RAISE EXCEPTION 'the tangent relation of % has two rows for one parameter row', param
    USING ERRCODE = '21000', HINT = 'A tangent relation has one row per key of the parameter table.';
END $$;

-- The tangent of max(x) and min(x) over a window frame (jvp): the average
-- of t over the rows of the frame that attain it (src/pg/attained.cpp).
CREATE FUNCTION _ddx.max_tangent_step(internal, anyelement, float8) RETURNS internal
  AS 'MODULE_PATHNAME', 'ddx_max_tangent_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION _ddx.min_tangent_step(internal, anyelement, float8) RETURNS internal
  AS 'MODULE_PATHNAME', 'ddx_min_tangent_step' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION _ddx.attained_tangent_final(internal) RETURNS float8
  AS 'MODULE_PATHNAME', 'ddx_attained_tangent_final' LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE AGGREGATE _ddx.max_tangent(anyelement, float8) (
  SFUNC = _ddx.max_tangent_step, STYPE = internal, FINALFUNC = _ddx.attained_tangent_final,
  FINALFUNC_MODIFY = READ_ONLY, PARALLEL = SAFE);
CREATE AGGREGATE _ddx.min_tangent(anyelement, float8) (
  SFUNC = _ddx.min_tangent_step, STYPE = internal, FINALFUNC = _ddx.attained_tangent_final,
  FINALFUNC_MODIFY = READ_ONLY, PARALLEL = SAFE);
