// The tangent of max (or min) over a window frame, as an aggregate:
// _ddx.max_tangent(x, t) OVER (w frame) is the average of t over the rows of
// the frame whose x attains the frame's max(x); rows whose x is NULL are not
// in it, and a NULL t among the attaining rows makes it NULL. (Averaging over
// ties is reverse mode's even sharing of a cotangent, so ⟨J t, c⟩ = ⟨t, Jᵀ c⟩
// holds exactly.) Forward mode emits it for window min/max; an aggregate's
// min/max keeps its plain SQL (a window over the group and avg of the rows
// that attain it), which reverse mode can differentiate for hvp.
//
// Why an aggregate and not SQL: the frame is any frame PostgreSQL accepts
// (ROWS, GROUPS, RANGE with offsets, EXCLUDE), which the aggregate gets from
// nodeWindowAgg as it is; in SQL each row would have to be paired with the
// rows of its frame (a self-join on positions, impossible for RANGE offsets).
//
// x is any type with a btree ordering (float8, float4, numeric): it is
// compared with the type's default btree comparison, the order max() and
// min() use (float8larger is float8_gt, NaN above every number; numeric
// likewise). There is no inverse transition, so a moving frame recomputes
// each row's frame (nodeWindowAgg restarts the aggregate when the frame's
// head moves): O(rows × frame), as the frame's own max() costs without an
// inverse. The state lives in the aggregate's context (AggCheckCallContext),
// which nodeWindowAgg resets when it restarts.
extern "C" {
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

PG_FUNCTION_INFO_V1(ddx_max_tangent_step);
PG_FUNCTION_INFO_V1(ddx_min_tangent_step);
PG_FUNCTION_INFO_V1(ddx_attained_tangent_final);
}

namespace {

struct Attained {
  Datum best;   // the frame's max (min) so far, in the aggregate context
  bool have;    // whether a non-NULL x was seen
  bool null_t;  // a row attaining best has a NULL tangent
  double sum;   // sum of the tangents of the rows attaining best
  int64 n;      // their count
  Oid type;
  int16 typlen;
  bool typbyval;
  FmgrInfo cmp;  // the type's btree comparison
  Oid collation;
};

// sign = 1: max; -1: min.
Datum Step(FunctionCallInfo fcinfo, int sign) {
  MemoryContext aggcontext;
  if (!AggCheckCallContext(fcinfo, &aggcontext))
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("_ddx.max_tangent and _ddx.min_tangent are aggregates of ddx's forward mode")));
  Attained *st = PG_ARGISNULL(0) ? nullptr : reinterpret_cast<Attained *>(PG_GETARG_POINTER(0));
  if (!st) {
    st = static_cast<Attained *>(MemoryContextAllocZero(aggcontext, sizeof(Attained)));
    st->type = get_fn_expr_argtype(fcinfo->flinfo, 1);
    if (!OidIsValid(st->type))
      ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("could not determine the argument's type")));
    get_typlenbyval(st->type, &st->typlen, &st->typbyval);
    TypeCacheEntry *tc = lookup_type_cache(st->type, TYPECACHE_CMP_PROC_FINFO);
    if (!OidIsValid(tc->cmp_proc_finfo.fn_oid))
      ereport(ERROR, (errcode(ERRCODE_UNDEFINED_FUNCTION),
                      errmsg("could not identify a comparison function for type %s", format_type_be(st->type))));
    fmgr_info_cxt(tc->cmp_proc_finfo.fn_oid, &st->cmp, aggcontext);
    st->collation = PG_GET_COLLATION();
  }
  if (PG_ARGISNULL(1)) PG_RETURN_POINTER(st);
  Datum x = PG_GETARG_DATUM(1);
  int c = 1;
  if (st->have) c = sign * DatumGetInt32(FunctionCall2Coll(&st->cmp, st->collation, x, st->best));
  if (c < 0) PG_RETURN_POINTER(st);
  if (c > 0) {
    if (st->have && !st->typbyval) pfree(DatumGetPointer(st->best));
    MemoryContext old = MemoryContextSwitchTo(aggcontext);
    st->best = datumCopy(x, st->typbyval, st->typlen);
    MemoryContextSwitchTo(old);
    st->have = true;
    st->null_t = false;
    st->sum = 0;
    st->n = 0;
  }
  if (PG_ARGISNULL(2))
    st->null_t = true;
  else
    st->sum += PG_GETARG_FLOAT8(2);
  st->n++;
  PG_RETURN_POINTER(st);
}

}  // namespace

extern "C" {

Datum ddx_max_tangent_step(PG_FUNCTION_ARGS) { return Step(fcinfo, 1); }
Datum ddx_min_tangent_step(PG_FUNCTION_ARGS) { return Step(fcinfo, -1); }

// Read-only (FINALFUNC_MODIFY = READ_ONLY): a window calls it once per row.
Datum ddx_attained_tangent_final(PG_FUNCTION_ARGS) {
  if (PG_ARGISNULL(0)) PG_RETURN_NULL();
  const Attained *st = reinterpret_cast<const Attained *>(PG_GETARG_POINTER(0));
  if (!st->have || st->null_t) PG_RETURN_NULL();
  PG_RETURN_FLOAT8(st->sum / static_cast<double>(st->n));
}

}  // extern "C"
