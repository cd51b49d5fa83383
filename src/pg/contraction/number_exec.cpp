// What `Custom Scan (ddx number)` does (number.h): each row of its child,
// its columns and its number in the scan tuple, projected to the output.
#include "exec.h"
#include "number.h"

#include "ddx/pg/compat.h"

extern "C" {
#include "postgres.h"

#include "executor/executor.h"
#include "nodes/execnodes.h"
}

namespace ddx::pg::contraction {

namespace {

struct NumberState {
  CustomScanState css;
  int64 n;    // the last row's number
  int ncols;  // the child's columns (the scan tuple's, less the number)
};

void NumberBegin(CustomScanState *node, EState *estate, int eflags) {
  NumberState *st = reinterpret_cast<NumberState *>(node);
  CustomScan *cs = reinterpret_cast<CustomScan *>(node->ss.ps.plan);
  node->custom_ps = list_make1(ExecInitNode(static_cast<Plan *>(linitial(cs->custom_plans)), estate,
                                            eflags & ~(EXEC_FLAG_BACKWARD | EXEC_FLAG_MARK)));
  st->n = 0;
  st->ncols = list_length(cs->custom_scan_tlist) - 1;
}

TupleTableSlot *NumberExec(CustomScanState *node) {
  NumberState *st = reinterpret_cast<NumberState *>(node);
  TupleTableSlot *in = ExecProcNode(static_cast<PlanState *>(linitial(node->custom_ps)));
  if (TupIsNull(in)) return nullptr;
  slot_getallattrs(in);
  TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
  ExecClearTuple(slot);
  // (by reference, as a Result's projection: valid until the child's next row)
  memcpy(slot->tts_values, in->tts_values, sizeof(Datum) * st->ncols);
  memcpy(slot->tts_isnull, in->tts_isnull, st->ncols);
  slot->tts_values[st->ncols] = Int64GetDatum(++st->n);
  slot->tts_isnull[st->ncols] = false;
  ExecStoreVirtualTuple(slot);
  return Projected(node, slot);
}

void NumberEnd(CustomScanState *node) { EndChildren(node); }

void NumberReScan(CustomScanState *node) {
  reinterpret_cast<NumberState *>(node)->n = 0;
  RescanChildren(node, nullptr, 0);
}

void NumberExplain(CustomScanState *node, List *ancestors, ExplainState *es) {
  (void)node;
  (void)ancestors;
  ExplainPropertyText("Numbered", "row_number() OVER (), as the rows come", es);
}

}  // namespace

Node *CreateNumberState(CustomScan *cs) {
  (void)cs;
  NumberState *st = reinterpret_cast<NumberState *>(newNode(sizeof(NumberState), T_CustomScanState));
  st->css.methods = &kNumberExecMethods;
  return reinterpret_cast<Node *>(&st->css);
}

const CustomScanMethods kNumberScanMethods = {"ddx number", CreateNumberState};
const CustomExecMethods kNumberExecMethods = {"ddx number", NumberBegin, NumberExec,   NumberEnd, NumberReScan,
                                              nullptr,      nullptr,     nullptr,      nullptr,   nullptr,
                                              nullptr,      nullptr,     NumberExplain};

}  // namespace ddx::pg::contraction
