// A session's plans of optimizer steps (_ddx.step_plan_get, _ddx.step_plan_put):
// what _ddx.optimizer_step works out before it runs a step's statement — the
// parameter tables resolved and checked, the tables the loss reads, the
// optimizer state tables, the statement's text and its prepared name —
// kept per session under a key of the step's inputs, so that the steps of a
// training loop after the first skip that work (~10 ms a step at the demo
// GPT's 20 tables: bench/RESULTS.md, "What ddx_train does around each step").
//
// Why it stays right: everything a plan was worked out from is either in its
// key (the loss's text, the parameter and no_decay lists, the optimizer's
// kind, the run's name, the session user, search_path; the current user
// beside it, below), checked again by the caller
// at every step (the run's id and owner; that a table without a primary key
// still has at most one row), or the system catalogs. Every plan is forgotten
// when this backend learns that the catalogs may have changed: a relcache
// invalidation of any relation (a table, its columns, keys or privileges; a
// view redefined; a state table made or dropped; a composite type), a syscache
// invalidation of functions (a function of the loss redefined, ddx's own
// updated), role memberships, roles or schemas, and a transaction's abort (its
// catalog changes undone). PostgreSQL calls these callbacks for the backend's
// own changes at CommandCounterIncrement and for other sessions' committed
// changes when it accepts invalidation messages (at transaction start and
// when it takes a lock: inval.c), that is before a step reads the catalogs
// itself; a full reset of the caches (the queue overflowed) calls every one of
// them. Forgetting too often costs a step ~10 ms; none of it can make a step
// use a stale plan. The statement itself is revalidated by the plan cache
// as before (a relation it reads changed: analyzed, differentiated and
// planned again).
//
// C-style C++: no object with a destructor lives in a frame that a
// PostgreSQL error can longjmp over.
#include <cstring>

extern "C" {
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "funcapi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(ddx_step_plan_get);
PG_FUNCTION_INFO_V1(ddx_step_plan_put);
}

#include "ddx/pg/sql_api.h"

namespace {

// At most this many plans per session, the least recently used replaced (as
// _ddx.optimizer_step keeps at most 8 prepared statements).
constexpr int kMaxPlans = 8;

struct StepPlan {
  Oid user;               // the current user that kept it
  char *key;              // nullptr: a free slot
  HeapTupleHeader value;  // a flat _ddx.step_plan, in `plans_cxt`
  uint64 used;
};

MemoryContext plans_cxt = nullptr;  // every plan, reset when they are forgotten
StepPlan plans[kMaxPlans];
uint64 tick = 0;

// (called at every relcache invalidation: resetting an empty context is a
// flag test; no caller holds a pointer into it, get returns copies)
void ForgetPlans() {
  MemoryContextReset(plans_cxt);
  memset(plans, 0, sizeof plans);
}

void ForgetOnRelcache(Datum, Oid) { ForgetPlans(); }
void ForgetOnSyscache(Datum, int, uint32) { ForgetPlans(); }
void ForgetOnAbort(XactEvent event, void *) {
  if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT) ForgetPlans();
}

}  // namespace

namespace ddx::pg {

void InstallStepPlans() {
  plans_cxt = AllocSetContextCreate(TopMemoryContext, "ddx step plans", ALLOCSET_SMALL_SIZES);
  CacheRegisterRelcacheCallback(ForgetOnRelcache, (Datum)0);
  CacheRegisterSyscacheCallback(PROCOID, ForgetOnSyscache, (Datum)0);
  CacheRegisterSyscacheCallback(AUTHOID, ForgetOnSyscache, (Datum)0);
  CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, ForgetOnSyscache, (Datum)0);
  CacheRegisterSyscacheCallback(NAMESPACEOID, ForgetOnSyscache, (Datum)0);
  RegisterXactCallback(ForgetOnAbort, nullptr);
}

}  // namespace ddx::pg

extern "C" {

// Plans are the current user's: a plan holds a statement that
// _ddx.optimizer_step runs, and these functions are anyone's to call (the
// step runs as its caller), so a role that puts a plan of its own making
// under some key finds it again only as itself, never in the step of a
// SECURITY DEFINER function or a SET ROLE of another role in its session.

// _ddx.step_plan_get(key text) RETURNS _ddx.step_plan: the plan the current
// user kept under `key`, a copy; NULL where none is.
Datum ddx_step_plan_get(PG_FUNCTION_ARGS) {
  char *key = text_to_cstring(PG_GETARG_TEXT_PP(0));
  Oid user = GetUserId();
  for (StepPlan &p : plans) {
    if (p.key == nullptr || p.user != user || strcmp(p.key, key) != 0) continue;
    p.used = ++tick;
    uint32 len = HeapTupleHeaderGetDatumLength(p.value);
    HeapTupleHeader copy = static_cast<HeapTupleHeader>(palloc(len));
    memcpy(copy, p.value, len);
    PG_RETURN_HEAPTUPLEHEADER(copy);
  }
  PG_RETURN_NULL();
}

// _ddx.step_plan_put(key text, plan _ddx.step_plan) RETURNS void: keeps `plan`
// under `key` for the current user (replacing the one there, or the least
// recently used).
Datum ddx_step_plan_put(PG_FUNCTION_ARGS) {
  char *key = text_to_cstring(PG_GETARG_TEXT_PP(0));
  HeapTupleHeader value = PG_GETARG_HEAPTUPLEHEADER(1);  // (flattened: no expanded record, no TOAST pointer)
  Oid user = GetUserId();
  StepPlan *slot = nullptr;
  for (StepPlan &p : plans)
    if (p.key != nullptr && p.user == user && strcmp(p.key, key) == 0) slot = &p;
  if (slot == nullptr) {
    for (StepPlan &p : plans)
      if (p.key == nullptr) {
        slot = &p;
        break;
      }
  }
  if (slot == nullptr) {
    slot = &plans[0];
    for (StepPlan &p : plans)
      if (p.used < slot->used) slot = &p;
  }
  if (slot->key != nullptr) {  // (a loss whose text changes at every step replaces one at every step)
    pfree(slot->key);
    pfree(slot->value);
  }
  uint32 len = HeapTupleHeaderGetDatumLength(value);
  slot->key = MemoryContextStrdup(plans_cxt, key);
  slot->value = static_cast<HeapTupleHeader>(MemoryContextAlloc(plans_cxt, len));
  memcpy(slot->value, value, len);
  slot->user = user;
  slot->used = ++tick;
  PG_RETURN_VOID();
}

}  // extern "C"
