// Custom Scan (ddx dense): the node that runs a loss's dense program over
// the rows of the tables it reads (ddx/pg/dense.h), its planner hook, its
// setting.
//
// Its plan: the dense statement (registry.cpp) is a UNION ALL of one scan
// per table, planned by PostgreSQL as any statement (privileges, row level
// security, inheritance, parallel scans: the scans are ordinary). The
// planner hook puts the node above that plan, its one child, where the
// statement is the one the runner is preparing (ArmDense): never a user's
// statement, whatever its text. (It does so after standard_planner, so the
// node's target list is in its final form already: Vars of INDEX_VAR over
// custom_scan_tlist, which describes its five columns.)
//
// Its rows: a header row (pidx kDenseHeader, g 1 where the program ran, 0
// and the reason in key where it refused), then, where it ran, the rows a
// gradient program's finals return (runner.cpp reads both alike): the loss's
// row count (pidx -1) and value (-4), and one row per parameter row and
// parameter column, its tableoid, ctid, pidx and gradient.
//
// Its memory: the rows it reads and the program's arrays are C++ objects
// (the kernels' library allocates with malloc), owned by one Held object
// that the executor's query context frees (a reset callback), so an error
// or a cancel while the child runs leaks nothing. The program's arrays are
// bounded by the hash tables' limit (work_mem x hash_mem_multiplier): past
// it, Run refuses and the SQL program runs.
//
// Interrupts: the child's scans check them as any scan; the program asks
// between its steps (Interrupted). Not yet: EXPLAIN shows the program's
// scans, not its tensors.
//
// C-style C++ where PostgreSQL calls are made: no object with a destructor
// lives in a frame that an error can longjmp over; the C++ work is in
// noexcept functions.
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "ddx/pg/dense.h"
#include "internal.h"
// (after the core's headers: they refuse to follow PostgreSQL's)
#include "ddx/pg/compat.h"

extern "C" {
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/nodeHash.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/plannodes.h"
#include "optimizer/planner.h"
#include "storage/itemptr.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
}

namespace ddx::pg {

bool dense_enabled = false;

namespace {

using dense_path::kFirstValue;

// What one execution of the node holds (see the file comment).
struct Held {
  dense_path::Compiled compiled;        // the program, and the loss it points into
  std::vector<ddx::dense::Rows> rows;   // per scan
  std::vector<std::vector<Oid>> toids;  // per scan, per row
  std::vector<std::vector<ItemPointerData>> tids;
  // per scan: its first column in the child's rows (0-based), and per
  // column its kind: a key's width (2, 4 or 8 bytes), 0 a float8 value, -1
  // a column the program does not read (NULL in the statement, left empty)
  std::vector<int> first;
  std::vector<std::vector<int8_t>> keys;
  size_t row_bytes = 0;  // what the rows read take
  ddx::dense::Outcome out;
};

struct State {
  CustomScanState css;
  int id;
  Held *held;
  MemoryContextCallback cb;
  bool computed;
  bool ran;  // the program ran (else refused: why)
  char why[256];
  int phase;        // the next row: 0 header, 1 loss rows, 2 loss, 3 gradients, 4 none
  size_t col, row;  // phase 3: the gradient column and row
  size_t bytes;     // for EXPLAIN ANALYZE
  int products;
  double rows_read;
};

const char *armed = nullptr;  // the caller's (ArmDense)
planner_hook_type prev_planner = nullptr;

extern const CustomScanMethods kScanMethods;
extern const CustomExecMethods kExecMethods;

struct Column {
  const char *name;
  Oid type;
};
const Column kColumns[] = {{"toid", OIDOID}, {"tid", TIDOID}, {"pidx", INT4OID}, {"g", FLOAT8OID}, {"key", TEXTOID}};

// The node over `child`, the dense statement's plan.
Plan *Wrap(Plan *child, int id) {
  CustomScan *cs = makeNode(CustomScan);
  List *tlist = NIL, *scan = NIL;
  for (int i = 0; i < 5; i++) {
    Oid coll = kColumns[i].type == TEXTOID ? DEFAULT_COLLATION_OID : InvalidOid;
    scan = lappend(scan, makeTargetEntry((::Expr *)makeNullConst(kColumns[i].type, -1, coll), i + 1,
                                         pstrdup(kColumns[i].name), false));
    tlist = lappend(tlist, makeTargetEntry((::Expr *)makeVar(INDEX_VAR, i + 1, kColumns[i].type, -1, coll, 0), i + 1,
                                           pstrdup(kColumns[i].name), false));
  }
  cs->scan.plan.targetlist = tlist;
  cs->custom_scan_tlist = scan;
  cs->scan.plan.startup_cost = child->total_cost;
  cs->scan.plan.total_cost = child->total_cost;
  cs->scan.plan.plan_rows = child->plan_rows;
  cs->scan.plan.plan_width = 32;
  cs->scan.plan.parallel_safe = false;
  cs->scan.scanrelid = 0;
  cs->custom_plans = list_make1(child);
  cs->custom_private = list_make1(makeInteger(id));
  cs->methods = &kScanMethods;
  return &cs->scan.plan;
}

PlannedStmt *Planner(Query *parse, const char *query_string, int cursor_options, ParamListInfo bound_params) {
  PlannedStmt *stmt = prev_planner ? prev_planner(parse, query_string, cursor_options, bound_params)
                                   : standard_planner(parse, query_string, cursor_options, bound_params);
  if (armed && query_string && strcmp(query_string, armed) == 0 && stmt->commandType == CMD_SELECT) {
    int id = dense_path::StatementId(query_string);
    if (id >= 0) stmt->planTree = Wrap(stmt->planTree, id);
  }
  return stmt;
}

void FreeHeld(void *arg) {
  State *st = static_cast<State *>(arg);
  delete st->held;
  st->held = nullptr;
}

Node *CreateState(CustomScan *cs) {
  State *st = static_cast<State *>(palloc0(sizeof(State)));
  NodeSetTag(st, T_CustomScanState);
  st->css.methods = &kExecMethods;
  st->id = intVal(linitial(cs->custom_private));
  return reinterpret_cast<Node *>(st);
}

void Begin(CustomScanState *node, EState *estate, int eflags) {
  State *st = reinterpret_cast<State *>(node);
  CustomScan *cs = reinterpret_cast<CustomScan *>(node->ss.ps.plan);
  node->custom_ps = list_make1(ExecInitNode(static_cast<Plan *>(linitial(cs->custom_plans)), estate, eflags));
  st->cb.func = FreeHeld;
  st->cb.arg = st;
  MemoryContextRegisterResetCallback(estate->es_query_cxt, &st->cb);
}

// The type a column of the translator's spelling `type` has in the catalog.
Oid TypeOid(const std::string &type) {
  if (type == "integer" || type == "pg_catalog.int4") return INT4OID;
  if (type == "bigint" || type == "pg_catalog.int8") return INT8OID;
  if (type == "smallint" || type == "pg_catalog.int2") return INT2OID;
  if (type == "pg_catalog.float8") return FLOAT8OID;
  return InvalidOid;
}

// A fresh Held for program `id`, or false where it is not kept (or memory
// ran out).
bool NewHeld(State *st) noexcept {
  try {
    dense_path::Compiled c = dense_path::ProgramOf(st->id);
    if (!c.program) return false;
    const ddx::dense::Program *p = c.program.get();
    size_t n = ddx::dense::Scans(*p).size();
    Held *h = new Held;
    st->held = h;
    h->compiled = std::move(c);
    h->rows.resize(n);
    h->toids.resize(n);
    h->tids.resize(n);
    h->first.resize(n);
    h->keys.resize(n);
    for (size_t k = 0; k < n; k++) {
      const Rel *scan = ddx::dense::Scans(*p)[k];
      size_t ncols = scan->cols.size();
      h->rows[k].val.resize(ncols);
      h->rows[k].null.resize(ncols);
      h->first[k] = kFirstValue - 1 + dense_path::Offset(*p, k);
      for (size_t c = 0; c < ncols; c++) {
        Oid type = TypeOid(scan->cols[c].sql);
        h->keys[k].push_back(!ddx::dense::ReadsColumn(*p, scan, c) ? -1
                             : type == INT2OID                     ? 2
                             : type == INT4OID                     ? 4
                             : type == INT8OID                     ? 8
                                                                   : 0);
      }
    }
    return true;
  } catch (...) {
    return false;
  }
}

// One row of the child's into its scan's rows; false where memory ran out.
bool Append(Held *h, TupleTableSlot *slot) noexcept {
  try {
    int k = DatumGetInt32(slot->tts_values[0]);
    int first = h->first[k];
    const std::vector<int8_t> &keys = h->keys[k];
    ddx::dense::Rows &r = h->rows[k];
    size_t read = 0;
    for (size_t c = 0; c < keys.size(); c++) {
      if (keys[c] < 0) continue;
      read++;
      bool isnull = slot->tts_isnull[first + c];
      Datum d = slot->tts_values[first + c];
      double v = isnull         ? 0.0
                 : keys[c] == 8 ? static_cast<double>(DatumGetInt64(d))
                 : keys[c] == 4 ? static_cast<double>(DatumGetInt32(d))
                 : keys[c] == 2 ? static_cast<double>(DatumGetInt16(d))
                                : DatumGetFloat8(d);
      r.val[c].push_back(v);
      r.null[c].push_back(isnull ? 1 : 0);
    }
    r.n++;
    h->row_bytes += read * (sizeof(double) + 1) + sizeof(Oid) + sizeof(ItemPointerData);
    if (slot->tts_isnull[1] || slot->tts_isnull[2]) return true;  // (a scan without parameters)
    h->toids[k].push_back(DatumGetObjectId(slot->tts_values[1]));
    h->tids[k].push_back(*reinterpret_cast<ItemPointer>(DatumGetPointer(slot->tts_values[2])));
    return true;
  } catch (...) {
    return false;
  }
}

// Whether an interrupt that ends the statement is pending and can be served
// now (a cancel or a statement timeout, a termination): Run asks between its
// steps, and the node then serves it (CHECK_FOR_INTERRUPTS). Not any
// pending interrupt: a barrier, a client connection check or a memory
// context dump is served by the executor's next check, and stopping for one
// sent every run with client_connection_check_interval set back to the SQL
// program (a review). Reads of flags, no PostgreSQL call.
bool Interrupted() {
  return InterruptPending && (QueryCancelPending || ProcDiePending) && INTERRUPTS_CAN_BE_PROCESSED();
}

// Runs the program over the rows read; the refusal's reason in st->why.
void RunHeld(State *st, size_t limit) noexcept {
  Held *h = st->held;
  try {
    std::vector<const ddx::dense::Rows *> rows;
    for (const ddx::dense::Rows &r : h->rows) rows.push_back(&r);
    h->out = ddx::dense::Run(*h->compiled.program, rows, limit, Interrupted);
    st->ran = h->out.done;
    st->bytes = h->out.bytes;
    st->products = h->out.products;
    if (!st->ran) snprintf(st->why, sizeof st->why, "%s", h->out.why.c_str());
  } catch (...) {
    st->ran = false;
    snprintf(st->why, sizeof st->why, "out of memory");
  }
}

// Reads the child's rows and runs the program over them, or refuses (why):
// the rows and the program's arrays together within the hash tables' limit
// (work_mem x hash_mem_multiplier), the rows counted as they are read, so
// that a table past it is not read whole first. (The child is left where it
// stopped: End and ReScan take care of it.)
void Compute(State *st) {
  st->computed = true;
  st->phase = 0;
  st->ran = false;
  if (!NewHeld(st)) {
    snprintf(st->why, sizeof st->why, "the dense program is no longer kept");
    return;
  }
  size_t limit = get_hash_memory_limit();
  PlanState *child = static_cast<PlanState *>(linitial(st->css.custom_ps));
  for (;;) {
    TupleTableSlot *slot = ExecProcNode(child);
    if (TupIsNull(slot)) break;
    slot_getallattrs(slot);
    if (slot->tts_isnull[0]) elog(ERROR, "ddx: the dense statement returned a row without its scan");
    if (!Append(st->held, slot)) {
      snprintf(st->why, sizeof st->why, "out of memory for the rows it reads");
      return;
    }
    st->rows_read++;
    if (st->held->row_bytes > limit) {
      snprintf(st->why, sizeof st->why, "rows past the memory limit");
      return;
    }
  }
  RunHeld(st, limit - st->held->row_bytes);
  if (st->held->out.interrupted) CHECK_FOR_INTERRUPTS();  // (what does not raise: a refusal)
}

// The next row into the scan slot, or false when none is left.
bool NextRow(State *st, Datum *v, bool *n) {
  for (int i = 0; i < 5; i++) n[i] = true;
  switch (st->phase) {
    case 0:
      st->phase = st->ran ? 1 : 4;
      v[2] = Int32GetDatum(kDenseHeader);
      v[3] = Float8GetDatum(st->ran ? 1.0 : 0.0);
      n[2] = n[3] = false;
      if (!st->ran) {
        v[4] = CStringGetTextDatum(st->why);
        n[4] = false;
      }
      return true;
    case 1:
      st->phase = 2;
      v[2] = Int32GetDatum(-1);
      v[3] = Float8GetDatum(1.0);
      n[2] = n[3] = false;
      return true;
    case 2:
      st->phase = 3;
      st->col = st->row = 0;
      v[2] = Int32GetDatum(-4);
      v[3] = Float8GetDatum(st->held->out.loss);
      n[2] = n[3] = false;
      return true;
    case 3: {
      const Held *h = st->held;
      while (st->col < h->out.grads.size() && st->row >= h->out.grads[st->col].val.size()) {
        st->col++;
        st->row = 0;
      }
      if (st->col >= h->out.grads.size()) {
        st->phase = 4;
        return false;
      }
      const ddx::dense::ColumnGradient &g = h->out.grads[st->col];
      const std::vector<const Rel *> &scans = ddx::dense::Scans(*h->compiled.program);
      size_t k = 0;
      while (k < scans.size() && scans[k] != g.scan) k++;
      size_t r = st->row++;
      if (k == scans.size() || r >= h->toids[k].size())  // (by construction never: an error, not a crash)
        elog(ERROR, "ddx: the dense program's gradient of a row it did not read");
      v[0] = ObjectIdGetDatum(h->toids[k][r]);
      v[1] = PointerGetDatum(&h->tids[k][r]);
      v[2] = Int32GetDatum(g.scan->param[g.col]);
      v[3] = Float8GetDatum(g.val[r]);
      n[0] = n[1] = n[2] = n[3] = false;
      return true;
    }
    default:
      return false;
  }
}

TupleTableSlot *Exec(CustomScanState *node) {
  State *st = reinterpret_cast<State *>(node);
  if (!st->computed) Compute(st);
  TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
  ExecClearTuple(slot);
  if (!NextRow(st, slot->tts_values, slot->tts_isnull)) return slot;
  return ExecStoreVirtualTuple(slot);
}

void End(CustomScanState *node) {
  ExecEndNode(static_cast<PlanState *>(linitial(node->custom_ps)));
  FreeHeld(node);
}

void ReScan(CustomScanState *node) {
  State *st = reinterpret_cast<State *>(node);
  FreeHeld(st);
  st->computed = false;
  st->rows_read = 0;
  st->bytes = 0;
  st->products = 0;
  PlanState *child = static_cast<PlanState *>(linitial(node->custom_ps));
  if (!child->chgParam) ExecReScan(child);
}

// The tables program `id` reads, "a, b", into buf ("" where it is not kept).
void Inputs(int id, char *buf, size_t n) noexcept {
  buf[0] = 0;
  try {
    dense_path::Compiled c = dense_path::ProgramOf(id);
    if (!c.program) return;
    std::string s;
    for (const Rel *scan : ddx::dense::Scans(*c.program)) s += (s.empty() ? "" : ", ") + scan->table;
    snprintf(buf, n, "%s", s.c_str());
  } catch (...) {}
}

// Which tables the program reads; with ANALYZE, the rows it read and the
// arrays' peak memory, or why it refused.
void Explain(CustomScanState *node, List *, ExplainState *es) {
  State *st = reinterpret_cast<State *>(node);
  char inputs[512];
  Inputs(st->id, inputs, sizeof inputs);
  ExplainPropertyText("Dense Inputs", inputs[0] ? inputs : "(the program is no longer kept)", es);
  if (!es->analyze || !st->computed) return;
  ExplainPropertyFloat("Dense Rows Read", nullptr, st->rows_read, 0, es);
  if (st->ran) {
    ExplainPropertyInteger("Dense Products", nullptr, st->products, es);
    ExplainPropertyInteger("Dense Memory", "kB", static_cast<int64>((st->bytes + 1023) / 1024), es);
  } else {
    ExplainPropertyText("Dense Refused", st->why, es);
  }
}

const CustomScanMethods kScanMethods = {"ddx dense", CreateState};
const CustomExecMethods kExecMethods = {"ddx dense", Begin,   Exec,    End,     ReScan,  nullptr, nullptr,
                                        nullptr,     nullptr, nullptr, nullptr, nullptr, Explain};

}  // namespace

namespace {

// Whether every column the program reads still has the type it was compiled
// for (a loss whose text is the same after ALTER TABLE ... TYPE, or a table
// made again, is not the same loss: registry.cpp). The catalog as this
// statement sees it; no lock (the dense statement takes its own).
bool SameColumns(const std::vector<dense_path::ColumnCheck> &checks) {
  Oid relid = InvalidOid;
  const std::string *last = nullptr;
  for (const dense_path::ColumnCheck &c : checks) {
    if (!last || *last != c.table) {
      // (the lock the dense statement takes anyway, taken before the check:
      // no ALTER between them)
      relid =
          RangeVarGetRelid(makeRangeVarFromNameList(compat::QualifiedNameList(c.table.c_str())), AccessShareLock, true);
      last = &c.table;
    }
    if (!OidIsValid(relid)) return false;
    List *names = compat::QualifiedNameList(c.column.c_str());
    if (list_length(names) != 1) return false;
    AttrNumber a = get_attnum(relid, strVal(linitial(names)));
    if (a == InvalidAttrNumber || get_atttype(relid, a) != TypeOid(c.type)) return false;
  }
  return true;
}

}  // namespace

char *DenseStatement(const char *sql) {
  const std::vector<dense_path::ColumnCheck> *checks = nullptr;
  const std::string *s = dense_path::StatementFor(sql, &checks);
  if (!s) return nullptr;
  if (!SameColumns(*checks)) {
    ereport(DEBUG1, (errmsg_internal("ddx: the dense program's tables have changed; it is dropped")));
    dense_path::Forget(sql);
    return nullptr;
  }
  return pstrdup(s->c_str());
}

const char *ArmDense(const char *statement) {
  const char *before = armed;
  armed = statement;
  return before;
}

bool IsDensePlan(const Plan *plan) {
  return plan && IsA(plan, CustomScan) && reinterpret_cast<const CustomScan *>(plan)->methods == &kScanMethods;
}

void InstallDense() {
  DefineCustomBoolVariable("ddx.dense", "Whether ddx runs gradient programs on dense arrays where it can.",
                           "Custom Scan (ddx dense) computes the loss and its gradient from the rows of the tables "
                           "it reads, where every relation of the loss is keyed by integer columns; ddx's SQL program "
                           "runs where it cannot (NULLs, duplicate keys, memory past work_mem x hash_mem_multiplier, "
                           "a construct it has no kernel for).",
                           &dense_enabled, false, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  RegisterCustomScanMethods(&kScanMethods);
  prev_planner = planner_hook;
  planner_hook = Planner;
}

}  // namespace ddx::pg
