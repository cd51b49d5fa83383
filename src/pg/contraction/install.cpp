// ddx.contraction and ddx.in_program, the node's method tables, its planner
// hook and its EXPLAIN hook, installed from _PG_init (contraction.h).
#include "ddx/pg/contraction_node.h"
#include "fill.h"
#include "number.h"
#include "planning.h"

extern "C" {
#include "postgres.h"

#include "utils/guc.h"
#include "utils/plancache.h"
}

namespace ddx::pg::contraction {

namespace {

const struct config_enum_entry kModes[] = {{"off", kOff, false},
                                           {"programs", kPrograms, false},
                                           {"all", kAll, false},
                                           {"on", kAll, true},
                                           {nullptr, 0, false}};

// A changed setting plans cached statements again, ddx's kept programs
// among them (plancache.c: ResetPlanCache marks every cached plan invalid;
// nothing is freed here), so that no cached plan keeps the old choice.
void AssignMode(int newval, void *) {
  if (newval != mode) ResetPlanCache();
}

void AssignFill(bool newval, void *) {
  if (newval != fill_enabled) ResetPlanCache();
}

}  // namespace

int mode = kPrograms;
bool in_program = false;
bool fill_enabled = true;
set_join_pathlist_hook_type prev_join_hook = nullptr;
create_upper_paths_hook_type prev_upper_hook = nullptr;
ExplainOneQuery_hook_type prev_explain_hook = nullptr;

const CustomPathMethods kPathMethods = {"ddx contraction", PlanContraction};
const CustomScanMethods kScanMethods = {"ddx contraction", CreateState};
const CustomExecMethods kExecMethods = {"ddx contraction", Begin,   Exec,    End,     ReScan,  nullptr, nullptr,
                                        nullptr,           nullptr, nullptr, nullptr, nullptr, Explain};

}  // namespace ddx::pg::contraction

namespace ddx::pg {

using namespace contraction;

bool ContractionInPrograms() { return mode != kOff; }

bool InProgram() { return in_program; }

bool ContractionEverywhere() { return mode == kAll; }

void InstallContraction() {
  DefineCustomEnumVariable("ddx.contraction",
                           "Where ddx's contraction node computes a grouped SUM of products over a join.",
                           "off: nowhere; programs: in ddx's gradient programs and jvp queries; all: in every query.",
                           &mode, kPrograms, kModes, PGC_USERSET, 0, nullptr, AssignMode, nullptr);
  DefineCustomBoolVariable("ddx.in_program", "Set by ddx while one of its programs runs.", nullptr, &in_program, false,
                           PGC_USERSET, GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE | GUC_DISALLOW_IN_FILE, nullptr, nullptr,
                           nullptr);
  DefineCustomBoolVariable(
      "ddx.contraction_fill",
      "Whether ddx joins the contraction node's groups to the rows they are joined to by their keys.",
      "Where ddx.contraction lets the node compute a subquery joined to a relation by every group "
      "key, Custom Scan (ddx fill) looks each row's group up instead of a hash join.",
      &fill_enabled, true, PGC_USERSET, 0, nullptr, AssignFill, nullptr);
  RegisterCustomScanMethods(&kScanMethods);
  RegisterCustomScanMethods(&kFillScanMethods);
  RegisterCustomScanMethods(&kNumberScanMethods);
  prev_join_hook = set_join_pathlist_hook;
  set_join_pathlist_hook = FillJoinPaths;
  prev_upper_hook = create_upper_paths_hook;
  create_upper_paths_hook = ContractionUpperPaths;
  KeepAppendRels();
  prev_explain_hook = ExplainOneQuery_hook;
  ExplainOneQuery_hook = ExplainWithRefusals;
}

}  // namespace ddx::pg
