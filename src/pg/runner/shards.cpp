// A gradient program in parts (see README.md in this folder): ddx.shards =
// N runs a program whose loss keeps ddx_in_shard(key) (or reads ddx_shard()
// and ddx_shards()) as N parts, the batch split by key, and serves the mean
// of the parts' gradients and losses: PyTorch's DistributedDataParallel,
// whose replicas each take a part of the batch and average their gradients.
// The backend runs part 0 itself; the others run at the same time in
// background workers of its own, started on first use and kept for the
// session, so that a training loop's later steps find them warm: their
// programs planned, their catalog caches and memory filled (a process
// started for one program pays ~90 ms of that at the demo GPT's size:
// bench/RESULTS.md, "The second core").
//
// What a part computes does not depend on where it runs: where a worker
// cannot run it, the backend runs that part itself, one after the other,
// and the mean is the same. The math is ddx.shards's; the workers are only
// its speed.
//
// A worker sees what the backend's program sees:
// - the rows: the backend's active snapshot, serialized and installed as the
//   worker's transaction snapshot (RestoreTransactionSnapshot, the backend's
//   PGPROC as its source, which keeps the snapshot's xmin valid for it).
//   A snapshot carries no uncommitted rows of the backend's own, so the
//   workers are used only where the backend's transaction has no XID: it
//   has written nothing, no row and no catalog entry, and what it sees is
//   what was committed before its snapshot. (An optimizer step writes its
//   run's row after its gradient for this: _ddx.optimizer_step.) Not under
//   SERIALIZABLE (the worker's reads would not be the transaction's
//   predicate locks), nor while the session has temporary tables (a function
//   of the loss may name one without its schema: to the worker, another
//   session's, or a permanent table of that name), nor where Citus is
//   installed. The transaction's isolation level (under REPEATABLE READ the
//   snapshot is the worker's transaction snapshot too, as it is the
//   backend's) and its start times (now(), statement_timestamp()).
// - the settings: the backend's, serialized (SerializeGUCState) and restored
//   in the worker when they changed since its last part (RestoreGUCState
//   first resets what the backend may ship, so the result is exactly the
//   backend's set). The role and security context as the backend has them,
//   for the part only (between parts the worker is its own user again).
// - its locks: a worker joins the backend's lock group (as a parallel worker
//   does), so its locks never wait behind a lock request that waits for the
//   backend, which would be a deadlock the detector could not see.
// Its transaction is read-only: a loss that writes fails in the worker
// instead of writing in a transaction of its own. Its notices (RAISE NOTICE
// in a function of the loss) come before its answer, and the backend raises
// them as its own (ForwardNotice), as a parallel worker's leader does.
//
// A worker runs only while the backend waits for it: every part the backend
// sent is answered before the backend leaves the program, also on an error
// (in a send too) or a cancel (the workers get SIGINT, and their answers are
// read and dropped; a worker keeps a cancel that came before it read its
// request, and drops one of a request given up before: PoolHeader's
// canceled); so no worker reads a table after the backend's statement
// ended. A worker that dies mid-part is replaced by the backend running its
// part. The workers end with the backend (its queues detach when it exits),
// or at the end of a transaction in which ddx.shards is 1 again: they hold
// max_worker_processes slots. A worker plans no parallel query: a member of
// a lock group may not lead one (shard_worker.cpp).
//
// This file is C-style C++: no object with a destructor lives in a frame that
// a PostgreSQL error can longjmp over.
#include <csignal>

#include "shards.h"

extern "C" {
#include "access/genam.h"
#include "access/table.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "utils/fmgroids.h"
#include "commands/extension.h"
#include "libpq/pqmq.h"
#include "nodes/supportnodes.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/proc.h"
#include "storage/shm_mq.h"
#include "utils/snapmgr.h"

PG_FUNCTION_INFO_V1(ddx_shard);
PG_FUNCTION_INFO_V1(ddx_shards);
PG_FUNCTION_INFO_V1(ddx_in_shard);
PG_FUNCTION_INFO_V1(ddx_in_shard_support);
}

namespace ddx::pg {

int shards = 1;  // ddx.shards

int this_shard = 0;
int n_shards = 1;

namespace {

// --- the backend's workers ----------------------------------------------------

struct Worker {
  BackgroundWorkerHandle *handle;
  shm_mq_handle *request;
  shm_mq_handle *reply;
  pid_t pid;
  bool live;
  bool died;       // is gone: the pool is started again, unless it never served (unstarted_at)
  bool served;     // has answered a request
  uint64 waiting;  // the request it is answering; 0: idle
  char *gucs;      // the settings it has (SerializeGUCState's bytes), or NULL
  Size guc_len;
};

struct Pool {
  dsm_segment *seg;
  Oid database;
  Oid user;
  int size;
  bool complete;  // every worker asked for was started, or could not be
  uint64 seq;
  Worker *workers;
};

Pool *pool = nullptr;
bool no_slot_said = false;
// The ddx.shards whose workers exited before their first answer: they could
// not start (their FATAL is in the server log: before 17, the session's
// user lost LOGIN since it connected, say), and a pool started again at
// every step would fail again at every step. Tried again when ddx.shards
// changes, or in a new session.
int unstarted_at = 0;
bool busy = false;  // a program in parts is running: the pool is in use

// The settings a worker has, forgotten: the next request sends them all.
void ForgetSettings(Worker *w) {
  if (w->gucs) pfree(w->gucs);
  w->gucs = nullptr;
  w->guc_len = 0;
}

// The pool gone: its segment detached, which detaches the queues, and each
// worker, idle (the pool is dropped only between programs), exits as it
// finds its request queue detached. (So does every worker when the backend
// exits: no signal, nothing in the server log.)
void DropPool() {
  if (!pool) return;
  Pool *p = pool;
  pool = nullptr;
  for (int i = 0; i < p->size; i++) {
    if (p->workers[i].request) shm_mq_detach(p->workers[i].request);
    if (p->workers[i].reply) shm_mq_detach(p->workers[i].reply);
  }
  dsm_detach(p->seg);
  for (int i = 0; i < p->size; i++) {
    if (p->workers[i].handle) pfree(p->workers[i].handle);
    if (p->workers[i].gucs) pfree(p->workers[i].gucs);
  }
  pfree(p->workers);
  pfree(p);
}

// `want` workers of this backend, started now where there are none (or
// those there are belong to another database or session user); NULL where
// none could start. A part without a live worker runs in the backend.
Pool *PoolOf(int want) {
  // (another size, database or session user; or a start cut short by an
  // interrupt)
  if (pool && (pool->size != want || pool->database != MyDatabaseId || pool->user != GetAuthenticatedUserId() ||
               !pool->complete))
    DropPool();
  if (pool) return pool;
  MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
  Size size = QueuesOffset() + want * (kRequestQueue + kReplyQueue);
  dsm_segment *seg = dsm_create(size, DSM_CREATE_NULL_IF_MAXSEGMENTS);
  if (!seg) {
    MemoryContextSwitchTo(old);
    return nullptr;
  }
  dsm_pin_mapping(seg);  // (the session's, not the transaction's)
  void *base = dsm_segment_address(seg);
  PoolHeader *h = (PoolHeader *)base;
  BecomeLockGroupLeader();
  h->leader = MyProc;
  h->leader_pid = MyProcPid;
  h->workers = want;
  for (int i = 0; i < kMaxWorkers; i++) pg_atomic_init_u64(&h->canceled[i], 0);
  Pool *p = (Pool *)palloc0(sizeof(Pool));
  p->seg = seg;
  p->database = MyDatabaseId;
  p->user = GetAuthenticatedUserId();
  p->size = want;
  p->workers = (Worker *)palloc0(sizeof(Worker) * want);
  pool = p;
  int started = 0, no_slot = 0;
  for (int i = 0; i < want; i++) {
    shm_mq *rq = shm_mq_create(RequestQueue(base, i), kRequestQueue);
    shm_mq *rp = shm_mq_create(ReplyQueue(base, i), kReplyQueue);
    shm_mq_set_sender(rq, MyProc);
    shm_mq_set_receiver(rp, MyProc);
    BackgroundWorker w;
    memset(&w, 0, sizeof w);
    w.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    w.bgw_start_time = BgWorkerStart_ConsistentState;
    w.bgw_restart_time = BGW_NEVER_RESTART;
    snprintf(w.bgw_library_name, BGW_MAXLEN, "ddx");
    snprintf(w.bgw_function_name, BGW_MAXLEN, "ddx_shard_main");
    snprintf(w.bgw_name, BGW_MAXLEN, "ddx shard %d of PID %d", i + 1, MyProcPid);
    snprintf(w.bgw_type, BGW_MAXLEN, "ddx shard");
    w.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(seg));
    w.bgw_notify_pid = MyProcPid;
    WorkerStart start = {MyDatabaseId, GetAuthenticatedUserId(), i};
    memcpy(w.bgw_extra, &start, sizeof start);
    Worker *wk = &p->workers[i];
    if (!RegisterDynamicBackgroundWorker(&w, &wk->handle)) {
      wk->handle = nullptr;
      no_slot++;
      continue;
    }
    wk->request = shm_mq_attach(rq, seg, wk->handle);
    wk->reply = shm_mq_attach(rp, seg, wk->handle);
    BgwHandleStatus st = WaitForBackgroundWorkerStartup(wk->handle, &wk->pid);
    if (st != BGWH_STARTED) {
      wk->died = st == BGWH_STOPPED;  // (exited already: see unstarted_at)
      continue;
    }
    wk->live = true;
    started++;
  }
  p->complete = true;
  MemoryContextSwitchTo(old);
  if (no_slot > 0 && !no_slot_said) {
    no_slot_said = true;
    ereport(NOTICE, (errmsg("ddx.shards = %d: %d of %d background workers started; the backend runs the other "
                            "parts itself",
                            want + 1, started, want),
                     errdetail("Background workers are limited by max_worker_processes (%d), which parallel query "
                               "and other extensions share.",
                               max_worker_processes),
                     errhint("Raise max_worker_processes (a restart), or lower ddx.shards.")));
  }
  return p;
}

// Whether the session has a temporary relation now: a function of the loss
// that names one without its schema would find, in a worker, a permanent
// table of that name or none. (One scan of pg_class by namespace, which no
// index leads with: ~0.1 ms a program; a session that never made a
// temporary table has no namespace to look in. The GPT's setup makes one ON
// COMMIT DROP: gone by its training.)
bool HasTempRelations() {
  Oid temp, toast;
  GetTempNamespaceState(&temp, &toast);
  if (!OidIsValid(temp)) return false;
  Relation rel = table_open(RelationRelationId, AccessShareLock);
  ScanKeyData key;
  ScanKeyInit(&key, Anum_pg_class_relnamespace, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(temp));
  SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, nullptr, 1, &key);
  bool any = HeapTupleIsValid(systable_getnext(scan));
  systable_endscan(scan);
  table_close(rel, AccessShareLock);
  return any;
}

// Whether this program's parts may run in workers now (see the file
// comment); else the backend runs them all.
bool WorkersMay(const ProgramText &prog) {
  const char *why = nullptr;
  if (MyBgworkerEntry || IsInParallelMode() || !IsTransactionState() || !ActiveSnapshotSet())
    why = "it runs in a background or parallel worker";
  else if (TransactionIdIsValid(GetTopTransactionIdIfAny()))
    why = "the transaction has written (a worker would not see what it wrote)";
  else if (IsolationIsSerializable())
    why = "the transaction is SERIALIZABLE";
  else if (prog.in_place || OidIsValid(get_extension_oid("citus", true)))
    why = "Citus is installed";
  else if (strstr(prog.sql, "pg_temp") || HasTempRelations())
    why = "the session has temporary tables (a worker's names would not find them)";
  if (why) ereport(DEBUG1, (errmsg_internal("ddx.shards: the backend runs every part: %s", why)));
  return !why;
}

// The request for part `shard` of `n` of `prog` with the parameters of `r`.
void PutRequest(StringInfo b, uint64 seq, int shard, int n, const ProgramText &prog, const ExecResult *r,
                const char *gucs, Size guc_len) {
  PutValue(b, seq);
  PutValue<int32>(b, shard);
  PutValue<int32>(b, n);
  Oid user;
  int sec;
  GetUserIdAndSecContext(&user, &sec);
  PutValue(b, user);
  PutValue<int32>(b, sec);
  Oid outer = GetOuterUserId();
  PutValue(b, outer);
  PutValue<bool>(b, superuser_arg(outer));
  PutValue<int32>(b, XactIsoLevel);
  PutValue(b, GetCurrentTransactionStartTimestamp());
  PutValue(b, GetCurrentStatementStartTimestamp());
  Snapshot snap = GetActiveSnapshot();
  Size snap_len = EstimateSnapshotSpace(snap);
  PutValue(b, snap_len);
  enlargeStringInfo(b, (int)snap_len);
  SerializeSnapshot(snap, b->data + b->len);
  b->len += (int)snap_len;
  PutValue(b, guc_len);
  if (guc_len) Put(b, gucs, guc_len);
  PutString(b, prog.sql);
  PutValue<int32>(b, r->nparams);
  for (int i = 0; i < r->nparams; i++) {
    bool isnull = r->nulls[i] == 'n';
    PutValue(b, r->types[i]);
    PutValue(b, r->typlens[i]);
    PutValue(b, r->typbyvals[i]);
    Size len = datumEstimateSpace(r->values[i], isnull, r->typbyvals[i], r->typlens[i]);
    enlargeStringInfo(b, (int)len);
    char *at = b->data + b->len;
    datumSerialize(r->values[i], isnull, r->typbyvals[i], r->typlens[i], &at);
    b->len += (int)len;
  }
}

// Adds a part's sums into `into` (AddRow's sum, entry by entry); whether
// the part's loss was NULL.
bool MergeGrads(ExecResult *into, Reader *r, MemoryContext owner) {
  bool loss_isnull = TakeValue<bool>(r);
  if (loss_isnull) {
    into->loss_isnull = true;
    (void)TakeValue<double>(r);
  } else {
    double l = TakeValue<double>(r);
    if (!into->loss_isnull) into->loss += l;
  }
  int64 n = TakeValue<int64>(r);
  for (int64 i = 0; i < n; i++) {
    GradKey key;
    memset(&key, 0, sizeof key);
    key.toid = TakeValue<Oid>(r);
    key.tid = TakeValue<ItemPointerData>(r);
    key.pidx = TakeValue<int32>(r);
    double g = TakeValue<double>(r);
    bool has = TakeValue<bool>(r);
    bool found;
    GradEntry *e = (GradEntry *)hash_search(into->grads, &key, HASH_ENTER, &found);
    AddRow(e, found, g, !has, key.toid);
  }
  int64 nk = TakeValue<int64>(r);
  for (int64 i = 0; i < nk; i++) {
    KeyedGrad k;
    k.pidx = TakeValue<int32>(r);
    MemoryContext old = MemoryContextSwitchTo(owner);
    k.key = TakeString(r);
    MemoryContextSwitchTo(old);
    double g = TakeValue<double>(r);
    bool has = TakeValue<bool>(r);
    bool found;
    KeyedEntry *e = (KeyedEntry *)hash_search(KeyedOf(into, owner), &k, HASH_ENTER, &found);
    AddRow(e, found, g, !has, InvalidOid);
  }
  return loss_isnull;
}

// Raises the error a worker sent, as the backend's own, with a line of
// context naming the part.
void RaiseWorkerError(Reader *r, int shard, int n, pid_t pid) {
  ErrorData e;
  memset(&e, 0, sizeof e);
  e.elevel = ERROR;
  e.sqlerrcode = TakeValue<int32>(r);
  e.message = TakeString(r);
  e.detail = TakeString(r);
  e.hint = TakeString(r);
  char *ctx = TakeString(r);
  e.context = psprintf("%s%sddx part %d of %d (ddx.shards), background worker %d", ctx ? ctx : "", ctx ? "\n" : "",
                       shard + 1, n, (int)pid);
  e.schema_name = TakeString(r);
  e.table_name = TakeString(r);
  e.column_name = TakeString(r);
  e.datatype_name = TakeString(r);
  e.constraint_name = TakeString(r);
  if (!e.message) e.message = pstrdup("error in a ddx shard worker");
  ThrowErrorData(&e);
}

// Raises a notice a worker's part sent (shard_worker.cpp, PutNotice) as the
// backend's own, with a line of context naming the part: the client sees
// it as it would see it where the part ran here, after part 0's own.
// (Parsed in a context of its own, deleted after: ThrowErrorData copies
// what it emits.)
void ForwardNotice(Reader *r, int shard, int n, pid_t pid) {
  MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "ddx notice", ALLOCSET_SMALL_SIZES);
  MemoryContext old = MemoryContextSwitchTo(cxt);
  StringInfoData msg;
  initStringInfo(&msg);
  appendBinaryStringInfo(&msg, r->p, (int)(r->end - r->p));
  ErrorData e;
  pq_parse_errornotice(&msg, &e);
  if (e.elevel < ERROR) {  // (only notices come this way)
    e.context = psprintf("%s%sddx part %d of %d (ddx.shards), background worker %d", e.context ? e.context : "",
                         e.context ? "\n" : "", shard + 1, n, (int)pid);
    ThrowErrorData(&e);
  }
  MemoryContextSwitchTo(old);
  MemoryContextDelete(cxt);
}

// Part `shard` of `n`, run here into `out` (its sums and loss).
void RunPartHere(const ProgramText &prog, MemoryContext owner, ExecResult *out, int shard, int n) {
  int was_shard = this_shard, was_n = n_shards;
  this_shard = shard;
  n_shards = n;
  PG_TRY();
  { RunProgram(prog, owner, out); }
  PG_FINALLY();
  {
    this_shard = was_shard;
    n_shards = was_n;
  }
  PG_END_TRY();
}

// Part `shard` run here and added into `out`; whether its loss was NULL.
bool AddPartHere(const ProgramText &prog, MemoryContext owner, ExecResult *out, int shard, int n) {
  MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "ddx part", ALLOCSET_DEFAULT_SIZES);
  ExecResult part = *out;
  part.grads = nullptr;
  part.keyed = nullptr;
  RunPartHere(prog, cxt, &part, shard, n);
  StringInfoData b;
  initStringInfo(&b);
  PutResult(&b, &part);
  Reader r = {b.data + 1, b.data + b.len};
  bool loss_isnull = MergeGrads(out, &r, owner);
  pfree(b.data);
  MemoryContextDelete(cxt);
  return loss_isnull;
}

// Waits for the answers of the workers still running a part, dropping them
// (on the way out of an error: see the file comment).
void DrainWorkers() {
  if (!pool) return;
  // (an error in a drain, an out-of-memory for a large answer say, and the
  // abort that follows drains again: then the workers still running a part
  // are terminated and the pool dropped, for drained again and again, the
  // abort's errors would fill the error stack: a PANIC; terminated, not
  // left to run on as members of the backend's lock group, whose locks
  // never conflict with its next transaction's)
  static bool draining = false;
  if (draining) {
    draining = false;
    for (int i = 0; i < pool->size; i++)
      if (pool->workers[i].live && pool->workers[i].waiting && pool->workers[i].handle)
        TerminateBackgroundWorker(pool->workers[i].handle);
    DropPool();
    return;
  }
  draining = true;
  HOLD_INTERRUPTS();
  PoolHeader *h = (PoolHeader *)dsm_segment_address(pool->seg);
  // every part canceled first, then the answers read: (the request given
  // up, written before the signal: a worker that has not read it yet keeps
  // the cancel for it; and the PID asked of the postmaster, not one that a
  // worker gone may have left to another)
  for (int i = 0; i < pool->size; i++) {
    Worker *w = &pool->workers[i];
    if (!w->live || !w->waiting) continue;
    pg_atomic_write_u64(&h->canceled[i], w->waiting);
    pg_memory_barrier();
    pid_t pid;
    if (w->handle && GetBackgroundWorkerPid(w->handle, &pid) == BGWH_STARTED) kill(pid, SIGINT);
  }
  for (int i = 0; i < pool->size; i++) {
    Worker *w = &pool->workers[i];
    if (!w->live || !w->waiting) continue;
    for (;;) {
      Size len;
      void *data;
      if (shm_mq_receive(w->reply, &len, &data, false) != SHM_MQ_SUCCESS) {
        w->live = false;
        w->died = true;
        break;
      }
      uint64 seq = 0;
      if (len > sizeof seq) memcpy(&seq, data, sizeof seq);
      if (seq == w->waiting && ((const char *)data)[sizeof seq] != 'N') {  // (its answer, not a notice)
        w->served = true;
        break;
      }
    }
    w->waiting = 0;
    ForgetSettings(w);
  }
  RESUME_INTERRUPTS();
  draining = false;
}

// Part 0 here, then each other part's answer (or the part run here where
// its worker is gone or none could start), added into `out`.
pg_noinline void CollectParts(const ProgramText &prog, MemoryContext owner, ExecResult *out, Pool *p, int n) {
  RunPartHere(prog, owner, out, 0, n);
  int null_part = out->loss_isnull ? 0 : -1;  // a part whose loss is NULL
  bool a_value = !out->loss_isnull;           // and one whose loss is not
  for (int i = 0; i < n - 1; i++) {
    Worker *w = p ? &p->workers[i] : nullptr;
    bool done = false;
    while (w && w->live && w->waiting) {
      Size len;
      void *data;
      if (shm_mq_receive(w->reply, &len, &data, false) != SHM_MQ_SUCCESS) {
        w->live = false;  // (died: its part runs here)
        w->died = true;
        w->waiting = 0;
        break;
      }
      Reader r = {(const char *)data, (const char *)data + len};
      if (TakeValue<uint64>(&r) != w->waiting) continue;  // (an answer to a request given up)
      char kind = TakeValue<char>(&r);
      if (kind == 'N') {  // (a notice of the part, before its answer)
        ForwardNotice(&r, i + 1, n, w->pid);
        continue;
      }
      w->waiting = 0;
      w->served = true;
      if (kind == 'E') {
        ForgetSettings(w);  // (its settings may be half restored)
        RaiseWorkerError(&r, i + 1, n, w->pid);
      }
      bool loss_isnull = MergeGrads(out, &r, owner);
      if (loss_isnull && null_part < 0) null_part = i + 1;
      a_value = a_value || !loss_isnull;
      done = true;
    }
    if (!done) {
      bool loss_isnull = AddPartHere(prog, owner, out, i + 1, n);
      if (loss_isnull && null_part < 0) null_part = i + 1;
      a_value = a_value || !loss_isnull;
    }
  }
  // A part without rows has a NULL loss and no gradient: its mean with the
  // others would be the others' gradient divided by N, a number without an
  // error (PyTorch's mean over an empty shard is NaN). Refused.
  if (null_part >= 0 && a_value)
    ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                    errmsg("part %d of %d of the batch has a NULL loss (ddx.shards)", null_part + 1, n),
                    errdetail("ddx_in_shard(key) gave it no row of the loss, or its rows a NULL loss, while other "
                              "parts have one; their mean would divide the others' gradients by ddx.shards."),
                    errhint("Split by a key that every batch spreads over all parts, such as the sample's index "
                            "within its batch, and keep ddx.shards at most the batch's size.")));
}

// The requests for parts 1 to n - 1 of `prog`, one to each live worker of
// `p` (the settings to those whose settings changed).
void SendParts(const ProgramText &prog, const ExecResult *out, Pool *p, int n) {
  uint64 seq = ++p->seq;
  Size guc_len = EstimateGUCStateSpace();
  char *gucs = (char *)palloc(guc_len);
  SerializeGUCState(guc_len, gucs);
  guc_len = sizeof(Size) + *(Size *)gucs;
  for (int i = 0; i < p->size; i++) {
    Worker *w = &p->workers[i];
    if (!w->live) continue;
    bool same = w->gucs && w->guc_len == guc_len && memcmp(w->gucs, gucs, guc_len) == 0;
    StringInfoData b;
    initStringInfo(&b);
    PutRequest(&b, seq, i + 1, n, prog, out, same ? nullptr : gucs, same ? 0 : guc_len);
    // (whole or not at all: a send cut by an interrupt would leave half a
    // message in the queue for the next one to continue)
    HOLD_INTERRUPTS();
    shm_mq_result sent = shm_mq_send(w->request, b.len, b.data, false, true);
    RESUME_INTERRUPTS();
    if (sent != SHM_MQ_SUCCESS) {
      w->live = false;
      w->died = true;
    } else {
      w->waiting = seq;
      if (!same) {
        if (w->gucs) pfree(w->gucs);
        w->gucs = (char *)MemoryContextAlloc(TopMemoryContext, guc_len);
        memcpy(w->gucs, gucs, guc_len);
        w->guc_len = guc_len;
      }
    }
    pfree(b.data);
  }
  pfree(gucs);
}

// The parts sent and collected, or on an error (in a send as well) every
// worker's answer read and dropped.
pg_noinline void CollectOrDrain(const ProgramText &prog, MemoryContext owner, ExecResult *out, Pool *p, int n) {
  MemoryContext cxt = CurrentMemoryContext;
  busy = true;
  PG_TRY();
  {
    if (p) SendParts(prog, out, p, n);
    CollectParts(prog, owner, out, p, n);
  }
  PG_CATCH();
  {
    MemoryContextSwitchTo(cxt);
    busy = false;  // (first: an error in the drain caught by a PL/pgSQL block would leave it set)
    DrainWorkers();
    PG_RE_THROW();
  }
  PG_END_TRY();
  busy = false;
}

// At a transaction's end, the pool of a session that has set ddx.shards back
// to 1 is dropped: its workers hold max_worker_processes slots, which
// parallel query and other extensions share.
// An abort of the top transaction ends any program. Its parts are stopped
// and answered here where no handler did: a FATAL error (the backend
// terminated, pg_terminate_backend, while it waited for a part) does not
// unwind to CollectOrDrain's, and proc_exit aborts the transaction before
// it detaches the segment, so no worker reads on after the backend is
// gone. (After a drain cut short by an error of its own, the next drain,
// here or at the next program, terminates the workers still running a
// part and drops the pool: DrainWorkers.)
void AtXactEnd(XactEvent event, void *) {
  if (event == XACT_EVENT_ABORT) {
    DrainWorkers();
    busy = false;
  }
  if ((event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT) && pool && !busy && shards <= 1) DropPool();
}

}  // namespace

// Runs `prog` for `out` (its parameters taken): in ddx.shards parts where the
// program reads the part it is (the emitted SQL names ddx_in_shard or
// ddx_shard: a part that does not filter by it would compute the whole
// batch again), else as one.
void RunSharded(const ProgramText &prog, MemoryContext owner, ExecResult *out) {
  int n = shards;
  if (n <= 1 || n_shards > 1 || (!strstr(prog.sql, "ddx_in_shard") && !strstr(prog.sql, "ddx_shard"))) {
    RunProgram(prog, owner, out);
    return;
  }
  if (busy) {  // (a program in parts inside a part of one: a function of the loss takes a gradient)
    RunProgram(prog, owner, out);
    return;
  }
  DrainWorkers();  // (answers an error in a drain itself left waiting)
  if (unstarted_at != n) unstarted_at = 0;
  Pool *p = !unstarted_at && WorkersMay(prog) ? PoolOf(n - 1) : nullptr;
  CollectOrDrain(prog, owner, out, p, n);
  // the mean of the parts (DistributedDataParallel's)
  if (!out->loss_isnull) out->loss /= n;
  HASH_SEQ_STATUS s;
  hash_seq_init(&s, out->grads);
  for (GradEntry *e; (e = (GradEntry *)hash_seq_search(&s)) != nullptr;) e->g /= n;
  if (out->keyed) {
    hash_seq_init(&s, out->keyed);
    for (KeyedEntry *e; (e = (KeyedEntry *)hash_seq_search(&s)) != nullptr;) e->g /= n;
  }
  // (a worker that died is replaced at the next program by a pool started
  // again; not one that died before its first answer: see unstarted_at)
  bool died = false, unstarted = false;
  for (int i = 0; p && pool == p && i < p->size; i++) {
    died = died || p->workers[i].died;
    unstarted = unstarted || (p->workers[i].died && !p->workers[i].served);
  }
  if (died) DropPool();
  if (unstarted) {
    unstarted_at = n;
    ereport(NOTICE, (errmsg("ddx.shards = %d: a background worker exited before its first part; the backend runs "
                            "every part itself",
                            n),
                     errdetail("The server log says why: before PostgreSQL 17, for one, a worker cannot connect as "
                               "a session user who has lost the LOGIN attribute since the session began."),
                     errhint("Set ddx.shards again, to another number, to start workers once more.")));
  }
}

void DefineShardSettings() {
  DefineCustomIntVariable("ddx.shards", "Runs a gradient program in this many parts at once (data parallelism).",
                          "A program whose loss keeps ddx_in_shard(key) runs as this many parts, each over the keys "
                          "of its part, in background workers of the session beside the backend; its gradients and "
                          "loss are the mean of the parts' (DistributedDataParallel's). 1: one part.",
                          &shards, 1, 1, kMaxWorkers + 1, PGC_USERSET, 0, NULL, NULL, NULL);
  RegisterXactCallback(AtXactEnd, nullptr);
}

}  // namespace ddx::pg

using namespace ddx::pg;

extern "C" {

// ddx_shard(): the part being computed (0 outside a program in parts).
Datum ddx_shard(PG_FUNCTION_ARGS) { PG_RETURN_INT32(this_shard); }

// ddx_shards(): how many parts (1 outside a program in parts).
Datum ddx_shards(PG_FUNCTION_ARGS) { PG_RETURN_INT32(n_shards); }

// ddx_in_shard(key): whether rows of `key` belong to the part being
// computed: key mod ddx_shards() = ddx_shard() (a NULL key: part 0). True
// for every key outside a program in parts.
Datum ddx_in_shard(PG_FUNCTION_ARGS) {
  if (n_shards <= 1) PG_RETURN_BOOL(true);
  if (PG_ARGISNULL(0)) PG_RETURN_BOOL(this_shard == 0);
  int64 k = PG_GETARG_INT64(0) % n_shards;
  if (k < 0) k += n_shards;
  PG_RETURN_BOOL(k == this_shard);
}

// The planner's selectivity of ddx_in_shard: one part of ddx.shards (else
// PostgreSQL takes a third, and a program planned for a part of a batch
// would be planned for a third of one).
Datum ddx_in_shard_support(PG_FUNCTION_ARGS) {
  Node *req = (Node *)PG_GETARG_POINTER(0);
  if (!IsA(req, SupportRequestSelectivity)) PG_RETURN_POINTER(nullptr);
  SupportRequestSelectivity *s = (SupportRequestSelectivity *)req;
  s->selectivity = 1.0 / Max(shards, 1);
  PG_RETURN_POINTER(s);
}

}  // extern "C"
