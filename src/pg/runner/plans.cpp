// Programs prepared once per session and kept, and running one (see
// README.md in this folder).
#include "internal.h"

namespace ddx::pg {
namespace {

// Session cache of prepared programs (TopMemoryContext), most recent first.
struct KeptPlan {
  char *sql;
  SPIPlanPtr plan;
  char *ran;      // the statement the plan runs: sql, or the in-place variant (ProgramText)
  bool in_place;  // ddx.citus_in_place when it was chosen
  bool pushed;    // the in-place program runs (not the gathered one)
  KeptPlan *next;
};
KeptPlan *kept_plans = nullptr;
constexpr int kMaxKeptPlans = 64;

SPIPlanPtr Prepare(const char *sql, int nparams, Oid *types) {
  SPIPlanPtr plan = SPI_prepare(sql, nparams, types);
  if (!plan) elog(ERROR, "ddx: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
  if (SPI_keepplan(plan)) elog(ERROR, "ddx: SPI_keepplan failed");
  return plan;
}

}  // namespace

// The in-place program over Citus tables (ProgramText), prepared and planned
// now, in a subtransaction: Citus plans a statement when it is first planned
// and refuses (0A000, or XX000 for a join it would repartition) what it
// cannot distribute, such as a join of two distributed tables on other
// columns than their distribution columns. NULL, with the reason at DEBUG1,
// where it refuses; any other error is raised. (Planning is all the
// subtransaction does: nothing runs in it. Within SPI, as PL/pgSQL's
// exception blocks: AtEOSubXact_SPI cleans up.) It is planned as it runs
// (InPlaceSettings), without repartition joins and in a free join order.
SPIPlanPtr PlanInPlace(const char *sql, int nparams, Oid *types) {
  MemoryContext cxt = CurrentMemoryContext;
  ResourceOwner owner = CurrentResourceOwner;
  SPIPlanPtr volatile plan = NULL;
  BeginInternalSubTransaction(NULL);
  MemoryContextSwitchTo(cxt);
  PG_TRY();
  {
    NoRepartition();  // (both restored when the subtransaction ends)
    FreeJoinOrder();
    plan = Prepare(sql, nparams, types);
    CachedPlan *cp = SPI_plan_get_cached_plan(plan);
    if (cp) ReleaseCachedPlan(cp, CurrentResourceOwner);
    ReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(cxt);
    CurrentResourceOwner = owner;
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(cxt);
    ErrorData *e = CopyErrorData();
    FlushErrorState();
    RollbackAndReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(cxt);
    CurrentResourceOwner = owner;
    if (plan) SPI_freeplan(plan);
    plan = NULL;
    // Citus refuses some plans without a code of their own: "the query
    // contains a join that requires repartitioning" (XX000, from
    // JobExecutorType at planning, where citus.enable_repartition_joins is
    // off), as a join of the data with a distributed parameter table read in
    // place by another column than its distribution column
    if (ERRCODE_TO_CATEGORY(e->sqlerrcode) != ERRCODE_FEATURE_NOT_SUPPORTED && e->sqlerrcode != ERRCODE_INTERNAL_ERROR)
      ReThrowError(e);
    ereport(DEBUG1, (errmsg_internal("ddx: Citus cannot run the gradient program with its tables in place (%s); "
                                     "it runs over them gathered on the coordinator",
                                     e->message)));
    FreeErrorData(e);
  }
  PG_END_TRY();
  return plan;
}

SPIPlanPtr KeptPlanFor(const ProgramText &prog, int nparams, Oid *types, const char **ran, bool *pushed) {
  const char *sql = prog.sql;
  KeptPlan **p = &kept_plans;
  int n = 0;
  for (; *p; p = &(*p)->next, n++) {
    if (strcmp((*p)->sql, sql) == 0 && (*p)->in_place == citus_in_place) {
      KeptPlan *hit = *p;
      *p = hit->next;  // move to front
      hit->next = kept_plans;
      kept_plans = hit;
      *ran = hit->ran;
      *pushed = hit->pushed;
      return hit->plan;
    }
  }
  SPIPlanPtr plan = NULL;
  bool in_place_runs = false;
  char *keep = MemoryContextStrdup(TopMemoryContext, sql);
  char *text = keep;
  if (prog.in_place && citus_in_place) {
    plan = PlanInPlace(prog.in_place, nparams, types);
    if (plan) {
      text = MemoryContextStrdup(TopMemoryContext, prog.in_place);
      in_place_runs = true;
    }
  }
  if (!plan) plan = Prepare(text, nparams, types);
  KeptPlan *k = (KeptPlan *)MemoryContextAlloc(TopMemoryContext, sizeof(KeptPlan));
  k->sql = keep;
  k->plan = plan;
  k->ran = text;
  k->in_place = citus_in_place;
  k->pushed = in_place_runs;
  *ran = text;
  *pushed = k->pushed;
  k->next = kept_plans;
  kept_plans = k;
  if (n + 1 > kMaxKeptPlans) {  // drop the least recently used
    KeptPlan **last = &kept_plans;
    while ((*last)->next) last = &(*last)->next;
    KeptPlan *old = *last;
    *last = nullptr;
    SPI_freeplan(old->plan);
    if (old->ran != old->sql) pfree(old->ran);
    pfree(old->sql);
    pfree(old);
  }
  return plan;
}

namespace {

// Marks an error raised while the program ran as the program's: the SPI
// context line that quotes it becomes one short line (or, with
// ddx.show_sql, is prefixed), and a parse error's internal query is
// forgotten unless ddx.show_sql (see the file comment).
void MarkProgramError(ErrorData *e, const char *sql) {
  if (!show_sql && e->internalquery && strcmp(e->internalquery, sql) == 0) {
    e->internalquery = NULL;
    e->internalpos = 0;
  }
  const char *at = e->context ? strstr(e->context, sql) : NULL;
  if (!at) return;
  const char *start = at;  // the line that quotes the program ...
  while (start > e->context && start[-1] != '\n') start--;
  const char *end = at + strlen(sql);  // ... ends with the closing quote
  if (*end == '"') end++;
  StringInfoData buf;
  initStringInfo(&buf);
  appendBinaryStringInfo(&buf, e->context, (int)(start - e->context));
  if (show_sql) {
    appendStringInfoString(&buf, "ddx gradient program: ");
    appendBinaryStringInfo(&buf, start, (int)(end - start));
  } else {
    appendStringInfoString(&buf, "ddx gradient program (SET ddx.show_sql = on to see its SQL, or use ddx_explain)");
  }
  appendStringInfoString(&buf, end);
  e->context = buf.data;
}

}  // namespace

// Prepares (once per session) and runs the program: SPI_OK_SELECT, or an
// error marked as the program's.
int ExecuteProgram(const ProgramText &prog, const ExecResult *p) {
  MemoryContext cxt = CurrentMemoryContext;
  volatile int rc = 0;
  const char *volatile ran = prog.sql;
  PG_TRY();
  {
    const char *text = prog.sql;
    bool pushed = false;
    SPIPlanPtr plan = KeptPlanFor(prog, p->nparams, p->types, &text, &pushed);
    ran = text;
    if (pushed) InPlaceSettings();  // (restored with the program's settings)
    RetainMemory();
    rc = SPI_execute_plan(plan, p->values, p->nulls, true, 0);
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(cxt);
    ErrorData *edata = CopyErrorData();
    FlushErrorState();
    MarkProgramError(edata, ran);
    ReThrowError(edata);
  }
  PG_END_TRY();
  return rc;
}

}  // namespace ddx::pg
