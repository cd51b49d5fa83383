// The settings gradient programs run under, and the runner's GUCs (see
// README.md in this folder).
#include "internal.h"

namespace ddx::pg {

bool show_sql = false;       // ddx.show_sql
bool citus_in_place = true;  // ddx.citus_in_place

// The in-place program does not keep its joins in their written order
// (join_collapse_limit = 1, ProgramSettings): Citus decides which joins stay
// on the workers from the join clauses the planner finds between the
// relations it joins (its restriction equivalence), and with the JOINs kept
// nested it did not see the linear model's transpose join its per-sample
// cotangents to the data on the distribution column. It pulled them to the
// coordinator: 168 kB a step, against 352 bytes of partial sums.
void FreeJoinOrder() {
  (void)set_config_option("join_collapse_limit", GetConfigOptionResetString("join_collapse_limit"), PGC_USERSET,
                          PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
}

// A program over Citus tables in place runs much of itself on the workers,
// as Citus's tasks, under the workers' settings, not the ones set here: with
// JIT on, a worker compiled each task of a 60-sample MLP's gradient for 2.7 s
// (12 s against 59 ms with jit = off). Citus sends a SET LOCAL of the
// transaction to its workers where citus.propagate_set_commands = 'local':
// the planner settings go with the program (restored here at the end of
// the program's GUC level; on the workers they last to the end of the
// transaction, like any SET LOCAL, and only price plans).
//
// Nor does the in-place program repartition: where its joins need it (an
// embedding distributed by token joined to samples distributed by sample),
// Citus refuses it at planning with repartition joins off, and the gathered
// program runs (PlanInPlace). With them on, as a user sets them for such a
// forward, the embedding's gradient took 10.7 s in place against 1 s
// gathered (bench/citus.py).
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
  const char *sets[] = {"SET LOCAL jit = off", "SET LOCAL enable_nestloop = off", "SET LOCAL enable_mergejoin = off",
                        "SET LOCAL enable_sort = off"};
  for (const char *s : sets)
    if (SPI_execute(s, false, 0) != SPI_OK_UTILITY) elog(ERROR, "ddx: %s failed", s);
  // The workers' tasks are the program's grouped sums of products: they
  // plan them with the contraction node as the coordinator would (its
  // ddx.contraction; ddx.in_program for `programs`). Where a worker has not
  // loaded ddx, the two are placeholders there and change nothing. The MLP's
  // gradient in place (bench/citus.py): see the README.
  // (Saved first at the program's GUC level, as ddx.in_program is, so that
  // the SET LOCAL ends with the program here.)
  std::string mode = GetConfigOption("ddx.contraction", false, false);
  (void)set_config_option("ddx.contraction", mode.c_str(), PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
  std::string contraction = "SET LOCAL ddx.contraction = '" + mode + "'";
  for (const char *s : {contraction.c_str(), "SET LOCAL ddx.in_program = on"})
    if (SPI_execute(s, false, 0) != SPI_OK_UTILITY) elog(ERROR, "ddx: %s failed", s);
}

// Runs the program with the parameters in `out`; fills `out` with its
// gradients (a hash allocated in `owner`) and the loss's value.
// The settings a program runs under (see the comments); returns the GUC
// nest level to restore with AtEOXact_GUC.
int ProgramSettings() {
  int nest = NewGUCNestLevel();
  ddx::pg::SetProgramSearchPath();
  // A program of many CTEs looks expensive to the planner, and JIT
  // compilation of it cost 1.2 s against a 5 ms run (measured).
  (void)set_config_option("jit", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
  // The planner estimates a chain of CTEs at a few rows and then pairs
  // cotangents with forward rows by nested loops: 4096 x 16384 comparisons
  // took 4 s of an MLP's 21 s backward; with nested loops off, 17 s (measured).
  (void)set_config_option("enable_nestloop", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
  // The same estimates made it sort 1.28M region rows for a merge join with
  // an 80k-row aggregate instead of hashing the aggregate (matmul backward
  // 3.1 s -> 2.2 s with merge joins off, measured). Both settings only price
  // plans; a join with no other method still runs.
  (void)set_config_option("enable_mergejoin", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
  // A NULL-safe key join is priced far too high (its hash keys are
  // expressions without statistics), and within the planner's 1% fuzz a
  // sorted GROUP BY then wins over hashing: the matmul's backward sorted
  // 1.28M rows onto disk. Sorts that windows need still run. Matmul program
  // 1886 -> 1401 ms (median of 5, interleaved).
  (void)set_config_option("enable_sort", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
  // The planner estimates CTE scans with no statistics (a join of two at one
  // row), so it reorders a program's joins on noise: a GPT's saved final
  // LayerNorm joined the token embedding to the MLP's output on the channel
  // alone, 77,824 rows, before the batch picked the token. The program's
  // joins are written in the order of the user's query, roots first; kept
  // so, the GPT's program took 556 ms instead of 897, the bench's matmul,
  // MLP and attention programs changed within noise (0.94-1.10, interleaved).
  (void)set_config_option("join_collapse_limit", "1", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
  // A program with statement parameters (a training step's batch, $1) would
  // be planned anew for each of its first executions (custom plans): ~200 ms
  // of a GPT step's 900. Its parameters select rows (a batch, a LIMIT); the
  // generic plan is planned once and kept.
  (void)set_config_option("plan_cache_mode", "force_generic_plan", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                          false);
  // Where ddx.contraction = programs, the contraction node plans the
  // program's grouped sums of products (src/pg/contraction_node.cpp).
  (void)set_config_option("ddx.in_program", "on", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
  return nest;
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
  MarkGUCPrefixReserved("ddx");
}

}  // namespace ddx::pg
