// The post_parse_analyze_hook's parts (see README.md in this folder): what
// hook.cpp, calls.cpp, jvp_rewrite.cpp, citus.cpp and grad_rewrite.cpp share.
// Internal to src/pg/hook.
#pragma once

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "ddx/core/ir.h"
#include "ddx/core/ir_build.h"
#include "ddx/core/program.h"
#include "ddx/pg/contraction_node.h"
#include "ddx/pg/guard.h"
#include "ddx/pg/hook.h"
#include "ddx/pg/runner.h"
#include "ddx/pg/translate.h"

extern "C" {
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/sysattr.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/pg_class.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/analyze.h"
#include "parser/parser.h"
#include "parser/parse_func.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/regproc.h"
#include "utils/rel.h"
}

namespace ddx::pg {

// OIDs of ddx's functions in the current database; forgotten on any
// pg_proc invalidation (CREATE/DROP EXTENSION, CREATE FUNCTION ...).
struct DdxOids {
  bool valid;
  bool present;
  Oid grad;
  Oid vjp;
  Oid value;
  Oid grad_at;
  Oid grad_at_params;  // _ddx.grad_at(..., VARIADIC "any"): a program with statement parameters
  Oid grad_key;        // _ddx.grad_key(text, int4, oid, text, bool): a row identified by primary key
  Oid grad_key_params;
  Oid jvp;       // jvp(out.col, VARIADIC text[]): forward mode
  Oid hvp;       // hvp(loss, t.col, VARIADIC text[]): H·v, the gradient of a jvp
  Oid jvp_at;    // _ddx.jvp_at(float8): what a jvp call becomes (the tangent column, as it is)
  Oid jvp_rows;  // _ddx.jvp_rows(text [, VARIADIC "any"]): the output's rows with their tangents
  Oid jvp_rows_params;
  Oid stop[2];
  // ddx_stop_gradient's schema-qualified name, for hvp's tangent query
  // (BuildTangentSql): plain bytes, no destructor in a global
  char stop_sql[2 * NAMEDATALEN + 8];
};
extern DdxOids oids;

// Looks the OIDs up (PostgreSQL only; may ereport). True if ddx is installed.
bool LookupOids();

struct GradCall {
  FuncExpr *fe;
  bool vjp = false;            // vjp(out, cotangent, t.col); else grad(loss, t.col)
  bool value = false;          // ddx_value(loss): the loss itself, no parameter
  bool hvp = false;            // hvp(loss, t.col, 'w.val', 'tw', ...): (H·tangents) at t.col
  std::vector<Query *> stack;  // outermost first; back() holds the call
  std::vector<bool> via_cte;   // per level: whether it is a CTE of the level above
  // resolved
  Var *param = nullptr;  // as written
  Index base_varno = 0;  // the table's RTE, after join aliases
  Oid relid = InvalidOid;
  std::string attname;
  bool keyed = false;  // a Citus table: the row is identified by its primary key
  std::vector<AttrNumber> key_attnos;
  int group = -1;
  int pidx = -1;
};

struct JvpCall {
  FuncExpr *fe;
  std::vector<Query *> stack;  // outermost first; back() holds the call
};

struct Collector {
  std::vector<GradCall> calls;
  std::vector<JvpCall> jvps;
  std::vector<Query *> stack;
  std::vector<bool> via_cte;
  bool next_is_cte = false;
};

// What a loss argument names: a CTE (and the level that owns it), a view, or
// a scalar subquery.
struct NamedRel {
  CommonTableExpr *cte = nullptr;
  int owner_level = -1;
  Oid view = InvalidOid;
  SubLink *sublink = nullptr;
  std::string name;
  bool operator==(const NamedRel &o) const { return cte == o.cte && view == o.view && sublink == o.sublink; }
};

// A loss: grad's relation, or vjp's output relation and cotangent relation.
struct LossRef {
  NamedRel out, cot;
  bool vjp = false;
  std::vector<std::string> hvp;  // hvp's (parameter, tangent relation) pairs: the loss is the jvp of `out`
  bool operator==(const LossRef &o) const {
    return vjp == o.vjp && out == o.out && (!vjp || cot == o.cot) && hvp == o.hvp;
  }
};

// Every Query level of a statement (a utility statement's query in its
// place), and every relation its range tables name.
struct Levels {
  std::vector<Query *> queries;
  std::vector<Oid> relids;
};

// calls.cpp: the calls of a statement and what their arguments name
Query *InnerQuery(Query *q);
bool IsDdxCall(Node *node);
bool Collect(Node *node, Collector *c);
Node *StripRelabel(Node *n);
void ResolveParam(GradCall &call);
NamedRel ResolveName(const GradCall &call, Node *arg, const char *what, bool allow_sublink);
LossRef ResolveLoss(const GradCall &call);
std::vector<std::string> ColumnNames(const NamedRel &r);
void ForgetRelation(RangeTblEntry *rte);
RangeTblEntry *ThroughJoinAliases(Query *q, Index *varno, AttrNumber *attno);
// A call of ddx's made, in place, a call of one of its own float8 functions
// (the runner's grad_at, jvp's jvp_at) with these arguments.
void RetargetCall(FuncExpr *fe, Oid funcid, List *args);

// jvp_rewrite.cpp: forward mode
std::vector<std::string> TextPairs(FuncExpr *fe, int argno);
std::vector<ParamTarget> PairParams(FuncExpr *fe, const std::vector<std::string> &texts);
std::vector<Tangent> PairTangents(FuncExpr *fe, const std::vector<Query *> &stack, int level,
                                  std::vector<Scope> &scopes, const std::vector<std::string> &texts,
                                  const std::vector<ParamTarget> &params, const std::vector<Oid> &stop_oids);
Query *AnalyzeTangentSql(const std::string &sql, const std::vector<Param *> &params);
void RewriteJvps(std::vector<JvpCall> &calls, const std::vector<Oid> &stop_oids);

// citus.cpp: a statement over Citus tables
bool CollectLevels(Node *node, Levels *l);
void DropUnreadCtes(Query *q);
void GatherLevel(Query *q, int location);
void RefuseDistributedWrite(const GradCall &call);

// grad_rewrite.cpp: grad, vjp, hvp and ddx_value calls rewritten
void RewriteStatement(Query *query, Collector &c, std::vector<Oid> stop_oids);

}  // namespace ddx::pg
