// What the backend's side of ddx.shards (shards.cpp) and its workers
// (shard_worker.cpp) share: the segment's layout, the messages' encoding and
// the part being computed. Internal to src/pg/runner (see shards.cpp for the
// design).
#pragma once

#include "internal.h"

extern "C" {
#include "port/atomics.h"
#include "storage/proc.h"
#include "storage/shm_mq.h"
}

namespace ddx::pg {

// The part this process computes now, and of how many (0 of 1 outside a
// program in parts): what ddx_shard(), ddx_shards() and ddx_in_shard() read.
extern int this_shard;
extern int n_shards;

constexpr Size kRequestQueue = 64 * 1024;
constexpr Size kReplyQueue = 512 * 1024;
constexpr int kMaxWorkers = 63;  // (ddx.shards is at most 64)

// The segment the backend shares with its workers: this header, then per
// worker its request queue and its reply queue. canceled[slot]: the last
// request of that worker the backend gave up on and sent SIGINT for (a
// worker drops a pending cancel only where it is of an earlier request).
struct PoolHeader {
  PGPROC *leader;
  int leader_pid;
  int workers;
  pg_atomic_uint64 canceled[kMaxWorkers];
};

// What a worker gets at start (bgw_extra): it connects as the backend's
// authenticated user, as a parallel worker does (the session user may be
// one that cannot log in, after SET SESSION AUTHORIZATION), and takes the
// session's user from the settings of its first part.
struct WorkerStart {
  Oid database;
  Oid user;
  int slot;
};

inline Size QueuesOffset() { return MAXALIGN(sizeof(PoolHeader)); }
inline shm_mq *RequestQueue(void *base, int slot) {
  return (shm_mq *)((char *)base + QueuesOffset() + slot * (kRequestQueue + kReplyQueue));
}
inline shm_mq *ReplyQueue(void *base, int slot) { return (shm_mq *)((char *)RequestQueue(base, slot) + kRequestQueue); }

// --- messages: a request is the part's number, the backend's user, its
// transaction's isolation level and start times, its snapshot, settings
// (when changed), the program and its parameters (RunSharded's PutRequest);
// an answer is the request's number, then 'R' and the part's
// sums (PutResult) or 'E' and an error's fields (PutError). Before it, the
// part's notices: the request's number, 'N' and a NoticeResponse's fields
// (shard_worker.cpp, PutNotice).

inline void Put(StringInfo b, const void *p, Size n) { appendBinaryStringInfo(b, (const char *)p, (int)n); }
template <typename T>
inline void PutValue(StringInfo b, const T &v) {
  Put(b, &v, sizeof v);
}
inline void PutString(StringInfo b, const char *s) {
  int32 n = s ? (int32)strlen(s) : -1;
  PutValue(b, n);
  if (s) Put(b, s, n);
}

struct Reader {
  const char *p;
  const char *end;
};
inline void Take(Reader *r, void *out, Size n) {
  if ((Size)(r->end - r->p) < n) elog(ERROR, "ddx: a message of a shard worker ends early");
  memcpy(out, r->p, n);
  r->p += n;
}
template <typename T>
inline T TakeValue(Reader *r) {
  T v;
  Take(r, &v, sizeof v);
  return v;
}
inline char *TakeString(Reader *r) {
  int32 n = TakeValue<int32>(r);
  if (n < 0) return nullptr;
  char *s = (char *)palloc(n + 1);
  Take(r, s, n);
  s[n] = '\0';
  return s;
}

void PutResult(StringInfo b, const ExecResult *res);
void PutError(StringInfo b, const ErrorData *e);

}  // namespace ddx::pg
