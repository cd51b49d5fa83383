// The settings gradient programs run under, and the runner's GUCs (see
// README.md in this folder).
#include "internal.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace ddx::pg {

bool show_sql = false;           // ddx.show_sql
bool citus_in_place = true;      // ddx.citus_in_place
int retain_memory = 256 * 1024;  // ddx.retain_memory, kB

namespace {

// A setting a gradient program runs under. Every row is set for the
// program's GUC level (restored when it ends): here, where `here`; and on
// the Citus workers, for a program that runs its tasks there in place
// (InPlaceSettings), where `workers`. A NULL value is the session's own
// (what the workers are to use as the coordinator does).
struct Setting {
  const char *name;
  const char *value;
  bool here;
  bool workers;
};

// (bench/RESULTS.md has what each cost before it was set.)
const Setting kSettings[] = {
    // A program of many CTEs looks expensive to the planner, and JIT
    // compiled it for far longer than it ran (on a worker too, per task).
    {"jit", "off", true, true},
    // The planner estimates a chain of CTEs at a few rows and then pairs
    // cotangents with forward rows by nested loops over millions of pairs.
    {"enable_nestloop", "off", true, true},
    // The same estimates made it sort the rows of a region for a merge join
    // with an aggregate instead of hashing the aggregate. This and the
    // setting above only price plans: a join with no other method runs.
    {"enable_mergejoin", "off", true, true},
    // A NULL-safe key join is priced far too high (its hash keys are
    // expressions without statistics), and within the planner's 1% fuzz a
    // sorted GROUP BY then wins over hashing: a matmul's backward sorted
    // a million rows onto disk. Sorts that windows need still run.
    {"enable_sort", "off", true, true},
    // The planner estimates CTE scans with no statistics (a join of two at
    // one row), so it reorders a program's joins on noise: a GPT's saved
    // final LayerNorm joined the token embedding to the MLP's output on the
    // channel alone, before the batch picked the token. The program's joins
    // are written in the order of the user's query, roots first. (Not in
    // place on Citus: FreeJoinOrder.)
    {"join_collapse_limit", "1", true, false},
    // A program with statement parameters (a training step's batch, $1)
    // would be planned anew for each of its first executions (custom
    // plans). Its parameters select rows (a batch, a LIMIT); the generic
    // plan is planned once and kept.
    {"plan_cache_mode", "force_generic_plan", true, false},
    // The workers' tasks are the program's grouped sums of products: they
    // plan them with the contraction node as the coordinator would (its
    // ddx.contraction; ddx.in_program for `programs`). Where a worker has
    // not loaded ddx, the two are placeholders there and change nothing.
    // (ddx.contraction is saved here too, at the program's level, so that
    // the SET LOCAL sent with it ends with the program.)
    {"ddx.contraction", nullptr, true, true},
    // Where ddx.contraction = programs, the contraction node plans the
    // program's grouped sums of products (src/pg/contraction).
    {"ddx.in_program", "on", true, true},
};

const char *ValueOf(const Setting &s) { return s.value ? s.value : GetConfigOption(s.name, false, false); }

}  // namespace

// The in-place program does not keep its joins in their written order
// (join_collapse_limit, kSettings): Citus decides which joins stay on the
// workers from the join clauses the planner finds between the relations it
// joins (its restriction equivalence), and with the JOINs kept nested it did
// not see the linear model's transpose join its per-sample cotangents to the
// data on the distribution column, and pulled them to the coordinator.
void FreeJoinOrder() {
  (void)set_config_option("join_collapse_limit", GetConfigOptionResetString("join_collapse_limit"), PGC_USERSET,
                          PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
}

// A program over Citus tables in place runs much of itself on the workers,
// as Citus's tasks, under the workers' settings, not the ones set here.
// Citus sends a SET LOCAL of the transaction to its workers where
// citus.propagate_set_commands = 'local': the settings marked `workers` go
// with the program (restored here at the end of the program's GUC level; on
// the workers they last to the end of the transaction, like any SET LOCAL,
// and only price plans).
//
// Nor does the in-place program repartition: where its joins need it (an
// embedding distributed by token joined to samples distributed by sample),
// Citus refuses it at planning with repartition joins off, and the gathered
// program runs (PlanInPlace); with them on, the embedding's gradient took
// many times longer in place than gathered (bench/citus.py).
//
// Only the in-place program: the gathered one, where the runner falls back,
// runs as any statement does.
void NoRepartition() {
  if (GetConfigOption("citus.enable_repartition_joins", true, false))
    (void)set_config_option("citus.enable_repartition_joins", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true,
                            0, false);
}
void InPlaceSettings() {
  NoRepartition();
  FreeJoinOrder();
  if (!GetConfigOption("citus.propagate_set_commands", true, false)) return;
  (void)set_config_option("citus.propagate_set_commands", "local", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                          false);
  for (const Setting &s : kSettings) {
    if (!s.workers) continue;
    char *set = psprintf("SET LOCAL %s = %s", s.name, quote_literal_cstr(ValueOf(s)));
    if (SPI_execute(set, false, 0) != SPI_OK_UTILITY) elog(ERROR, "ddx: %s failed", set);
    pfree(set);
  }
}

// The settings a program runs under (kSettings, and the search path of
// SetProgramSearchPath); returns the GUC nest level to restore with
// AtEOXact_GUC.
int ProgramSettings() {
  int nest = NewGUCNestLevel();
  ddx::pg::SetProgramSearchPath();
  for (const Setting &s : kSettings) {
    if (!s.here) continue;
    // (a copy: the session's value may be freed when it is set again)
    char *value = pstrdup(ValueOf(s));
    (void)set_config_option(s.name, value, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
    pfree(value);
  }
  return nest;
}

// A program's execution allocates its hash tables, tuplestores and node
// states, and frees them all when it ends; the next step of a training run
// allocates them again. glibc gives freed memory at the top of the heap back
// to the kernel once more than M_TRIM_THRESHOLD of it is free (128 kB at
// first; its dynamic threshold grows only with blocks served by mmap), and
// serves each block above M_MMAP_THRESHOLD by an mmap of its own: either
// way the next execution takes page faults for memory it had a moment ago
// (perf: a sixth of a demo-size GPT gradient's time was the kernel's, in
// page faults, clearing pages and brk; bench/RESULTS.md has the figures).
// From the first program a backend runs, the heap keeps up to
// ddx.retain_memory of freed memory (never more than its programs used:
// the heap only grows to what they allocated), as PyTorch's caching
// allocator keeps its blocks; 0 gives glibc's static defaults back and
// returns what is free. A backend that never runs a program keeps glibc's
// own policy. (mallopt's M_MMAP_THRESHOLD is at most 32 MB on 64-bit.)
//   Up to, not all or nothing: glibc trims the top of the heap down to
// M_TOP_PAD once more than M_TRIM_THRESHOLD is free, and M_TOP_PAD was
// glibc's 128 kB, so a program that used more than ddx.retain_memory kept
// nothing: a larger GPT under a work_mem that kept its CTEs in memory
// faulted most of it in again at every execution (bench/RESULTS.md, "Users'
// memory settings and freed memory"). With M_TOP_PAD at the same size, a
// trim keeps that much. Where the heap grows, glibc asks the kernel for
// M_TOP_PAD more than it needs at once: address space, not memory, until it
// is touched (under vm.overcommit_memory = 2 it is counted against the
// commit limit).
void RetainMemory() {
#ifdef __GLIBC__
  static int applied = -1;  // kB; -1: glibc's own policy
  if (retain_memory == applied || (applied < 0 && retain_memory == 0)) return;
  size_t bytes = static_cast<size_t>(retain_memory) * 1024;
  constexpr size_t kDefault = 128 * 1024, kMmapMax = 32 * 1024 * 1024;
  (void)mallopt(M_MMAP_THRESHOLD, static_cast<int>(Max(kDefault, Min(bytes, kMmapMax))));
  (void)mallopt(M_TRIM_THRESHOLD, static_cast<int>(Max(kDefault, bytes)));
  // (and when more than that is free, a trim keeps M_TOP_PAD of it: without
  // it glibc gave back all of it, so that a program a little larger than
  // ddx.retain_memory faulted in all of its memory again at every step)
  (void)mallopt(M_TOP_PAD, static_cast<int>(retain_memory == 0 ? kDefault : bytes));
  if (retain_memory == 0) (void)malloc_trim(0);
  applied = retain_memory;
#endif
}

void SetProgramSearchPath() {
  const char *path = namespace_search_path ? namespace_search_path : "";
  char *full = psprintf("pg_catalog%s%s", *path ? ", " : "", path);
  (void)set_config_option("search_path", full, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
  pfree(full);
}

void DefineRunnerSettings() {
  DefineCustomBoolVariable("ddx.show_sql", "Shows the generated SQL in the context of errors raised inside it.",
                           "Off: an error inside a gradient program, or inside an optimizer step, names the step "
                           "and the statement instead of quoting kilobytes of generated SQL; ddx_explain shows "
                           "the program of any statement.",
                           &show_sql, false, PGC_USERSET, 0, NULL, NULL, NULL);
  DefineCustomBoolVariable("ddx.citus_in_place",
                           "Runs gradient programs over Citus tables with the data in place, on the workers.",
                           "On (the default): the data tables are read in place where Citus can plan it, so that "
                           "the per-row work runs on the workers and only partial sums cross the network; where "
                           "Citus cannot, the program reads them gathered on the coordinator. Off: always gathered "
                           "(every program runs so; bench/citus.py measures both).",
                           &citus_in_place, true, PGC_USERSET, 0, NULL, NULL, NULL);
  DefineCustomIntVariable("ddx.retain_memory", "Freed memory a backend keeps for its next gradient program.",
                          "A training step's program allocates its working memory again at every step; a backend "
                          "that has run a program keeps up to this much of it when freed, instead of giving it back "
                          "to the kernel and faulting it in again (bench/RESULTS.md). Never more than the programs "
                          "used. 0: memory is returned as glibc does by default.",
                          &retain_memory, 256 * 1024, 0, 1024 * 1024, PGC_USERSET, GUC_UNIT_KB, NULL, NULL, NULL);
  DefineShardSettings();
  MarkGUCPrefixReserved("ddx");
}

}  // namespace ddx::pg
