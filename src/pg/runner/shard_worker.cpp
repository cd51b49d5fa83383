// A worker of ddx.shards (see shards.cpp): a background worker of one
// backend, started on its first program in parts and kept while it lives.
// It attaches to the backend's segment, joins its lock group, connects to
// its database as its authenticated user (as a parallel worker does), and
// then answers each request: the backend's settings restored where they
// changed, a transaction with the backend's isolation level, start times
// (now()) and snapshot, its role and security context, read-only, the part
// run as the backend would run it (RunProgram) and its sums sent back, or
// the error's fields; between parts, its own user and no role again. It
// plans no parallel query. It exits when the backend's queues detach.
//
// This file is C-style C++: no object with a destructor lives in a frame that
// a PostgreSQL error can longjmp over.
#include "shards.h"

extern "C" {
#include "access/parallel.h"
#include "access/xact.h"
#include "libpq/libpq-be.h"
#include "libpq/libpq.h"
#include "miscadmin.h"
#include "optimizer/planner.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "tcop/tcopprot.h"
#include "utils/snapmgr.h"

PGDLLEXPORT void ddx_shard_main(Datum arg);
}

namespace ddx::pg {

// A part's result (ExecResult's sums, the loss) as a reply.
void PutResult(StringInfo b, const ExecResult *res) {
  PutValue<char>(b, 'R');
  PutValue<bool>(b, res->loss_isnull);
  PutValue<double>(b, res->loss);
  PutValue<int64>(b, res->grads ? (int64)hash_get_num_entries(res->grads) : 0);
  if (res->grads) {
    HASH_SEQ_STATUS s;
    hash_seq_init(&s, res->grads);
    for (GradEntry *e; (e = (GradEntry *)hash_seq_search(&s)) != nullptr;) {
      // (field by field: a key is hashed as bytes, its padding included)
      PutValue(b, e->key.toid);
      PutValue(b, e->key.tid);
      PutValue(b, e->key.pidx);
      PutValue(b, e->g);
      PutValue(b, e->has);
    }
  }
  PutValue<int64>(b, res->keyed ? (int64)hash_get_num_entries(res->keyed) : 0);
  if (res->keyed) {
    HASH_SEQ_STATUS s;
    hash_seq_init(&s, res->keyed);
    for (KeyedEntry *e; (e = (KeyedEntry *)hash_seq_search(&s)) != nullptr;) {
      PutValue(b, e->key.pidx);
      PutString(b, e->key.key);
      PutValue(b, e->g);
      PutValue(b, e->has);
    }
  }
}

void PutError(StringInfo b, const ErrorData *e) {
  PutValue<char>(b, 'E');
  PutValue<int32>(b, e->sqlerrcode);
  PutString(b, e->message);
  PutString(b, e->detail);
  PutString(b, e->hint);
  PutString(b, e->context);
  PutString(b, e->schema_name);
  PutString(b, e->table_name);
  PutString(b, e->column_name);
  PutString(b, e->datatype_name);
  PutString(b, e->constraint_name);
}

}  // namespace ddx::pg

using namespace ddx::pg;

extern "C" {

// The worker's planner: no parallel query. A loss's own functions plan
// their statements with CURSOR_OPT_PARALLEL_OK (a SQL function, PL/pgSQL's
// PERFORM), and the planner refuses parallelism only in a parallel worker;
// a Gather here would make this member of the backend's lock group the
// leader of one of its own (BecomeLockGroupLeader only asserts against it,
// proc.c), which corrupts the group's list in shared memory. A setting
// (max_parallel_workers_per_gather) would not hold: user code can change it.
static planner_hook_type prev_planner = nullptr;
static PlannedStmt *NoParallelPlanner(Query *parse, const char *query_string, int cursor_options,
                                      ParamListInfo bound_params) {
  cursor_options &= ~CURSOR_OPT_PARALLEL_OK;
  return prev_planner ? prev_planner(parse, query_string, cursor_options, bound_params)
                      : standard_planner(parse, query_string, cursor_options, bound_params);
}

// now() and statement_timestamp() of the part: the backend's. StartTransaction
// takes a transaction's start from the statement's start, and the only way
// to set both to given times is SetParallelStartTimestamps, what a parallel
// worker calls, which asserts that the caller is one: the worker is a
// parallel worker (ParallelWorkerNumber) for that call alone.
static void SetStartTimestamps(TimestampTz xact_ts, TimestampTz stmt_ts) {
  int was = ParallelWorkerNumber;
  ParallelWorkerNumber = 0;
  SetParallelStartTimestamps(xact_ts, stmt_ts);
  ParallelWorkerNumber = was;
}

// A part's notices (RAISE NOTICE in a function of the loss, a WARNING) go
// to the backend, which raises them as its own (shards.cpp, ForwardNotice),
// as a parallel worker's go to its leader: the worker's messages are sent
// "to the client" (whereToSendOutput = DestRemote, so client_min_messages,
// restored with the backend's settings, decides which), and the client is
// these methods, which put each NoticeResponse on the reply queue after the
// request's number and 'N', before the part's answer. Not pqmq's methods
// (pq_redirect_to_shm_mq): an interrupt while they wait on a full queue
// leaves them busy for good, and the next message detaches the queue that
// the answers take. Here a send is whole, with interrupts held, as
// Reply's; messages between parts, and errors (a part's are caught and
// answered; a FATAL one's is the server log's), are not sent.
// Not once the segment is detached (proc_exit detaches it, then logs
// DEBUG3 lines that a client_min_messages of debug3 would send: NoticesOff,
// as pqmq's own callback), nor inside a send (a message of proc_exit's
// while the postmaster's death cut one short).
static shm_mq_handle *notice_queue = nullptr;
static uint64 notice_seq = 0;  // (the request whose part runs; 0 between parts)
static bool notice_sending = false;

static int PutNotice(char msgtype, const char *s, size_t len) {
  if (msgtype != 'N' || notice_seq == 0 || notice_queue == nullptr || notice_sending) return 0;
  StringInfoData b;
  initStringInfo(&b);
  PutValue(&b, notice_seq);
  PutValue<char>(&b, 'N');
  Put(&b, s, len);
  notice_sending = true;
  HOLD_INTERRUPTS();
  shm_mq_result sent = shm_mq_send(notice_queue, b.len, b.data, false, true);
  RESUME_INTERRUPTS();
  notice_sending = false;
  pfree(b.data);
  return sent == SHM_MQ_SUCCESS ? 0 : EOF;  // (the backend gone: the answer's send exits)
}
static void NoticesOff(dsm_segment *, Datum) {
  notice_queue = nullptr;
  notice_seq = 0;
  whereToSendOutput = DestNone;
}
static void PutNoticeNoblock(char msgtype, const char *s, size_t len) { (void)PutNotice(msgtype, s, len); }
static void NoticesReset() {}
static int NoticesFlush() { return 0; }
static bool NoticesPending() { return false; }
static const PQcommMethods kNoticeMethods = {NoticesReset, NoticesFlush, NoticesFlush,
                                            NoticesPending, PutNotice, PutNoticeNoblock};

// Sends an answer whole (see RunSharded's requests); exits where the
// backend is gone.
static void Reply(shm_mq_handle *mq, StringInfo b) {
  HOLD_INTERRUPTS();
  shm_mq_result sent = shm_mq_send(mq, b->len, b->data, false, true);
  RESUME_INTERRUPTS();
  if (sent != SHM_MQ_SUCCESS) {
    NoticesOff(nullptr, (Datum)0);
    proc_exit(0);
  }
}

void ddx_shard_main(Datum arg) {
  WorkerStart start;
  memcpy(&start, MyBgworkerEntry->bgw_extra, sizeof start);
  pqsignal(SIGTERM, die);
  BackgroundWorkerUnblockSignals();
  // (no resource owner: the mapping is the process's)
  dsm_segment *seg = dsm_attach(DatumGetUInt32(arg));
  if (!seg) proc_exit(0);  // (the backend is gone)
  void *base = dsm_segment_address(seg);
  PoolHeader *h = (PoolHeader *)base;
  shm_mq *rq = RequestQueue(base, start.slot);
  shm_mq *rp = ReplyQueue(base, start.slot);
  shm_mq_set_receiver(rq, MyProc);
  shm_mq_set_sender(rp, MyProc);
  shm_mq_handle *request = shm_mq_attach(rq, seg, nullptr);
  shm_mq_handle *reply = shm_mq_attach(rp, seg, nullptr);
  on_dsm_detach(seg, NoticesOff, (Datum)0);  // (after the queues': run before theirs)
  // (in the backend's lock group before anything takes a lock, as a
  // parallel worker joins: a lock of the connection's own waiting behind
  // one that waits for the backend would be a deadlock no one sees)
  if (!BecomeLockGroupMember(h->leader, h->leader_pid)) proc_exit(0);
  // (17 on: as its parallel workers, even where the user has lost LOGIN
  // since the session began; before, such a worker exits here: shards.cpp,
  // unstarted_at)
#ifdef BGWORKER_BYPASS_ROLELOGINCHECK
  BackgroundWorkerInitializeConnectionByOid(start.database, start.user,
                                            BGWORKER_BYPASS_ALLOWCONN | BGWORKER_BYPASS_ROLELOGINCHECK);
#else
  BackgroundWorkerInitializeConnectionByOid(start.database, start.user, BGWORKER_BYPASS_ALLOWCONN);
#endif
  prev_planner = planner_hook;
  planner_hook = NoParallelPlanner;
  notice_queue = reply;
  PqCommMethods = &kNoticeMethods;
  FrontendProtocol = PG_PROTOCOL_LATEST;
  whereToSendOutput = DestRemote;
  Oid own_user;
  int own_sec;
  GetUserIdAndSecContext(&own_user, &own_sec);
  MemoryContext loop = AllocSetContextCreate(TopMemoryContext, "ddx shard worker", ALLOCSET_DEFAULT_SIZES);
  MemoryContext part = AllocSetContextCreate(TopMemoryContext, "ddx shard part", ALLOCSET_DEFAULT_SIZES);
  for (;;) {
    MemoryContextSwitchTo(loop);
    MemoryContextReset(part);
    volatile uint64 seq = 0;
    PG_TRY();
    {
      Size len;
      void *data;
      // (an interrupt while idle: a cancel that came after its part's answer
      // is caught below and dropped; SIGTERM ends the process)
      if (shm_mq_receive(request, &len, &data, false) != SHM_MQ_SUCCESS) proc_exit(0);  // (the backend is gone)
      MemoryContextSwitchTo(part);
      char *msg = (char *)palloc(len);
      memcpy(msg, data, len);
      Reader r = {msg, msg + len};
      seq = TakeValue<uint64>(&r);
      notice_seq = seq;
      // (a cancel of an earlier part, whose answer the backend has dropped;
      // one of this part, sent before it was read, stands)
      pg_read_barrier();
      if (pg_atomic_read_u64(&h->canceled[start.slot]) < seq) QueryCancelPending = false;
      int shard = TakeValue<int32>(&r);
      int n = TakeValue<int32>(&r);
      Oid user = TakeValue<Oid>(&r);
      int sec = TakeValue<int32>(&r);
      Oid outer = TakeValue<Oid>(&r);
      bool outer_super = TakeValue<bool>(&r);
      int iso = TakeValue<int32>(&r);
      TimestampTz xact_ts = TakeValue<TimestampTz>(&r);
      TimestampTz stmt_ts = TakeValue<TimestampTz>(&r);
      Size snap_len = TakeValue<Size>(&r);
      char *snap_bytes = (char *)r.p;
      r.p += snap_len;
      Size guc_len = TakeValue<Size>(&r);
      char *gucs = guc_len ? (char *)r.p : nullptr;
      r.p += guc_len;
      ProgramText prog = {TakeString(&r), nullptr};
      ExecResult res;
      memset(&res, 0, sizeof res);
      res.nparams = TakeValue<int32>(&r);
      res.types = (Oid *)palloc(sizeof(Oid) * Max(res.nparams, 1));
      res.typlens = (int16 *)palloc(sizeof(int16) * Max(res.nparams, 1));
      res.typbyvals = (bool *)palloc(sizeof(bool) * Max(res.nparams, 1));
      res.values = (Datum *)palloc(sizeof(Datum) * Max(res.nparams, 1));
      res.nulls = (char *)palloc(Max(res.nparams, 1));
      for (int i = 0; i < res.nparams; i++) {
        res.types[i] = TakeValue<Oid>(&r);
        res.typlens[i] = TakeValue<int16>(&r);
        res.typbyvals[i] = TakeValue<bool>(&r);
        char *at = (char *)r.p;
        bool isnull;
        res.values[i] = datumRestore(&at, &isnull);
        r.p = at;
        res.nulls[i] = isnull ? 'n' : ' ';
      }
      if (gucs) {  // the backend's settings, restored as a parallel worker restores them
        StartTransactionCommand();
        InitializingParallelWorker = true;
        RestoreGUCState(gucs);
        InitializingParallelWorker = false;
        CommitTransactionCommand();
        MemoryContextSwitchTo(part);
      }
      pgstat_report_activity(STATE_RUNNING, psprintf("ddx part %d of %d", shard + 1, n));
      SetStartTimestamps(xact_ts, xact_ts);  // (a transaction starts at its statement's start)
      StartTransactionCommand();
      SetStartTimestamps(xact_ts, stmt_ts);
      // READ COMMITTED or REPEATABLE READ, as the backend (not SERIALIZABLE:
      // WorkersMay). Under REPEATABLE READ the snapshot restored below is the
      // transaction's, which the loss's own statements then read too, as
      // they do in the backend (SetTransactionSnapshot).
      XactIsoLevel = iso;
      XactReadOnly = true;
      SetCurrentRoleId(outer, outer_super);
      SetUserIdAndSecContext(user, sec);
      InvalidateCatalogSnapshot();
      Snapshot snap = RestoreSnapshot(snap_bytes);
      RestoreTransactionSnapshot(snap, h->leader);
      PushActiveSnapshot(snap);
      this_shard = shard;
      n_shards = n;
      RunProgram(prog, part, &res);
      this_shard = 0;
      n_shards = 1;
      PopActiveSnapshot();
      CommitTransactionCommand();
      // (its own user, no role and no security context again: a commit
      // keeps the part's, and a security-definer function's context left in
      // place would refuse the next part's session_authorization)
      SetUserIdAndSecContext(own_user, own_sec);
      SetCurrentRoleId(InvalidOid, false);
      MemoryContextSwitchTo(part);
      StringInfoData b;
      initStringInfo(&b);
      PutValue(&b, (uint64)seq);
      PutResult(&b, &res);
      notice_seq = 0;  // (before the answer: a message of proc_exit's, the postmaster gone mid-send, would splice into it)
      Reply(reply, &b);
      pgstat_report_activity(STATE_IDLE, nullptr);
    }
    PG_CATCH();
    {
      HOLD_INTERRUPTS();
      notice_seq = 0;
      InitializingParallelWorker = false;
      this_shard = 0;
      n_shards = 1;
      MemoryContextSwitchTo(loop);
      ErrorData *e = CopyErrorData();
      FlushErrorState();
      AbortCurrentTransaction();  // (the user and security context of the part's start)
      SetUserIdAndSecContext(own_user, own_sec);
      SetCurrentRoleId(InvalidOid, false);
      RESUME_INTERRUPTS();
      if (seq) {
        MemoryContextSwitchTo(loop);
        StringInfoData b;
        initStringInfo(&b);
        PutValue(&b, (uint64)seq);
        PutError(&b, e);
        Reply(reply, &b);
        pgstat_report_activity(STATE_IDLE, nullptr);
      }
      MemoryContextReset(loop);
    }
    PG_END_TRY();
  }
}

}  // extern "C"
