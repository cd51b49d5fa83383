// _ddx.loss_reads(loss_sql, tables, columns): which parameter tables a
// training step's loss reads, and the functions it calls that ddx cannot see
// into. The optimizers ask it before they build a step's statement: a
// parameter table the loss never reads gets no gradient, and is skipped as
// PyTorch skips a parameter whose .grad is None; where the loss calls a
// function ddx cannot see into, the table could be read in there, and the
// step is refused rather than answered with a zero gradient (the hook
// refuses grad() so, see RefuseUnread in hook/grad_rewrite.cpp).
//
// The loss is analyzed as the step's statement reads it ($1 an int4, the
// step's number) and translated by the same Translator as grad's loss, so the
// two agree on what "read" means (views expanded, SQL functions inlined). A
// loss that does not analyze or translate gives NULL: the step's statement,
// prepared next, raises the error itself with the step's context.
//
// Phases: PostgreSQL in (parse analysis inside a subtransaction: its errors
// are swallowed, and nothing of them is left behind), then C++ (translation,
// guarded), then PostgreSQL out (the arrays). C-style where PostgreSQL can
// longjmp: no C++ object lives in a frame with PG_TRY.
#include <string>
#include <vector>

#include "ddx/core/program.h"
#include "ddx/pg/guard.h"
#include "ddx/pg/hook.h"
#include "ddx/pg/translate.h"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "parser/analyze.h"
#include "parser/parser.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/resowner.h"

PG_FUNCTION_INFO_V1(ddx_loss_reads);
}

namespace ddx::pg {
namespace {

// The analyzed loss, or nullptr where it does not parse or analyze as one
// SELECT (its error flushed with its subtransaction).
Query *AnalyzeLoss(const char *sql) {
  MemoryContext cxt = CurrentMemoryContext;
  ResourceOwner owner = CurrentResourceOwner;
  Query *volatile q = nullptr;
  BeginInternalSubTransaction(NULL);
  MemoryContextSwitchTo(cxt);
  PG_TRY();
  {
    List *raw = raw_parser(sql, RAW_PARSE_DEFAULT);
    if (list_length(raw) == 1) {
      Oid types[1] = {INT4OID};
      Query *a = parse_analyze_fixedparams(linitial_node(RawStmt, raw), sql, types, 1, NULL);
      if (a->commandType == CMD_SELECT && !a->utilityStmt) q = a;
    }
    ReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(cxt);
    CurrentResourceOwner = owner;
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(cxt);
    FlushErrorState();
    RollbackAndReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(cxt);
    CurrentResourceOwner = owner;
    q = nullptr;
  }
  PG_END_TRY();
  return q;
}

struct Reads {
  bool known = false;
  std::vector<bool> read;
  std::vector<std::string> opaque;
};

// Phase "core": translates the loss and reads off the answer; never throws.
void Translate(Query *q, const std::vector<ParamTarget> &params, const std::vector<Oid> &stops, Reads &out) {
  PendingError err;
  Guard(err, [&] {
    Translator tr(params, stops);
    RelP loss = tr.TranslateQuery(q, nullptr);
    out.read = ParamsRead(loss, params.size());
    out.opaque = tr.OpaqueFunctions();
    out.known = true;
  });
  if (err.set) out.known = false;
}

}  // namespace
}  // namespace ddx::pg

extern "C" {

// loss_reads(loss_sql text, tables regclass[], columns name[],
//            OUT reads boolean[], OUT opaque text[]): per (table, column),
// whether the loss reads the table; the functions it calls that ddx cannot
// see into. Both NULL where the loss does not analyze or translate.
Datum ddx_loss_reads(PG_FUNCTION_ARGS) {
  TupleDesc td;
  if (get_call_result_type(fcinfo, NULL, &td) != TYPEFUNC_COMPOSITE) elog(ERROR, "ddx: loss_reads has no row type");
  td = BlessTupleDesc(td);
  Datum values[2] = {0, 0};
  bool nulls[2] = {true, true};
  if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(td, values, nulls)));
  char *sql = text_to_cstring(PG_GETARG_TEXT_PP(0));
  Datum *tables, *cols;
  bool *tnull, *cnull;
  int nt, nc;
  deconstruct_array(PG_GETARG_ARRAYTYPE_P(1), REGCLASSOID, sizeof(Oid), true, TYPALIGN_INT, &tables, &tnull, &nt);
  deconstruct_array(PG_GETARG_ARRAYTYPE_P(2), NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR, &cols, &cnull, &nc);
  if (nt != nc) elog(ERROR, "ddx: loss_reads takes as many columns as tables");
  Query *q = ddx::pg::AnalyzeLoss(sql);
  if (!q) PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(td, values, nulls)));
  Oid stops[2];
  int nstops = ddx::pg::StopGradientOids(stops);

  // (C++ objects live only inside this block, which PostgreSQL never
  // longjmps out of: Translate catches every error)
  bool known;
  int nread = 0;
  bool *read = (bool *)palloc0(sizeof(bool) * Max(nt, 1));
  int nopaque = 0;
  char **opaque = nullptr;
  {
    std::vector<ddx::pg::ParamTarget> params;
    for (int i = 0; i < nt; i++)
      params.push_back({DatumGetObjectId(tables[i]), tnull[i] || cnull[i] ? "" : NameStr(*DatumGetName(cols[i]))});
    ddx::pg::Reads r;
    ddx::pg::Translate(q, params, std::vector<Oid>(stops, stops + nstops), r);
    known = r.known;
    if (known) {
      nread = nt;
      for (int i = 0; i < nt; i++) read[i] = r.read[i];
      nopaque = static_cast<int>(r.opaque.size());
      opaque = (char **)palloc(sizeof(char *) * Max(nopaque, 1));
      for (int i = 0; i < nopaque; i++) opaque[i] = pstrdup(r.opaque[i].c_str());
    }
  }
  if (known) {
    Datum *rd = (Datum *)palloc(sizeof(Datum) * Max(nread, 1));
    for (int i = 0; i < nread; i++) rd[i] = BoolGetDatum(read[i]);
    values[0] = PointerGetDatum(construct_array(rd, nread, BOOLOID, 1, true, TYPALIGN_CHAR));
    Datum *od = (Datum *)palloc(sizeof(Datum) * Max(nopaque, 1));
    for (int i = 0; i < nopaque; i++) od[i] = CStringGetTextDatum(opaque[i]);
    values[1] = PointerGetDatum(construct_array(od, nopaque, TEXTOID, -1, false, TYPALIGN_INT));
    nulls[0] = nulls[1] = false;
  }
  PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(td, values, nulls)));
}

}  // extern "C"
