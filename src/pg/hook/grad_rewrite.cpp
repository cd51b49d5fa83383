// grad, vjp, hvp and ddx_value calls rewritten into the runner's (see internal.h).
#include "ddx/pg/dense.h"
#include "internal.h"

namespace ddx::pg {
namespace {

// The refusal of a parameter whose table the loss of group `g` never reads
// (read[p] false): its derivative would be zero, and where the loss calls a
// function ddx cannot see into (`opaque`), the table may be read in there,
// so that zero would be wrong. Each refusal at the position of the first call
// that asks for it.
void RefuseUnread(const std::vector<GradCall> &calls, int g, const std::vector<ParamTarget> &params,
                  const std::vector<bool> &read, const std::vector<std::string> &opaque) {
  for (size_t p = 0; p < params.size(); p++) {
    if (read[p]) continue;
    int position = -1;
    for (const GradCall &call : calls)
      if (call.group == g && call.pidx == static_cast<int>(p) && position < 0) position = call.fe->location;
    std::string table = Str(PgCall([&] {
      return quote_qualified_identifier(get_namespace_name(get_rel_namespace(params[p].relid)),
                                        get_rel_name(params[p].relid));
    }));
    if (!opaque.empty()) {
      std::string fns;
      for (size_t i = 0; i < opaque.size(); i++) fns += (i ? ", " : "") + opaque[i];
      throw Error(sqlstate::kFeatureNotSupported, "ddx cannot see into " + opaque[0] + ", which the loss calls",
                  "The loss reads table " + table + " nowhere else, so it could reach " + params[p].attname +
                      " only inside what ddx cannot differentiate (" + fns +
                      "), whose part of the loss would get no "
                      "gradient.",
                  "Write the loss as a view, a CTE, or an SQL function that PostgreSQL inlines (LANGUAGE sql, one "
                  "SELECT of one expression or a set-returning one SELECT, not SECURITY DEFINER, no SET clause).",
                  position);
    }
    throw Error(sqlstate::kInvalidParameterValue, "the loss does not read table " + table,
                "Column " + params[p].attname + " of " + table +
                    " is not a parameter of this loss: its derivative would be zero for every row.",
                "Ask for the gradient of a column of a table that the loss reads.", position);
  }
}

}  // namespace

namespace {

// The losses of a statement's calls, and each loss's parameters: every call
// gets its group (one program per loss) and its parameter's index in it.
struct Groups {
  std::vector<LossRef> losses;
  std::vector<std::vector<ParamTarget>> params;
};

Groups GroupCalls(std::vector<GradCall> &calls) {
  Groups gs;
  for (GradCall &call : calls) {
    RefuseDistributedWrite(call);
    if (!call.value) ResolveParam(call);
    LossRef ref = ResolveLoss(call);
    if (call.hvp) ref.hvp = TextPairs(call.fe, 2);
    size_t g = 0;
    while (g < gs.losses.size() && !(gs.losses[g] == ref)) g++;
    if (g == gs.losses.size()) {
      gs.losses.push_back(ref);
      gs.params.emplace_back();
    }
    call.group = static_cast<int>(g);
    if (call.value) {
      call.pidx = kLossValue;
      continue;
    }
    auto &ps = gs.params[g];
    size_t p = 0;
    while (p < ps.size() && !(ps[p].relid == call.relid && ps[p].attname == call.attname)) p++;
    if (p == ps.size()) ps.push_back(ParamTarget{call.relid, call.attname});
    call.pidx = static_cast<int>(p);
  }
  return gs;
}

// H·v: the loss's jvp along the tangents (forward mode, as SQL), then that
// query's tangent column differentiated as a loss (reverse mode, by `tr`).
RelP HvpLoss(Translator &tr, const LossRef &ref, const GradCall &first, std::vector<Scope> &scopes,
             const std::vector<Oid> &stop_oids) {
  std::vector<ParamTarget> tparams = PairParams(first.fe, ref.hvp);
  Translator tf(tparams, stop_oids);
  RelP fwd = ref.out.cte ? tf.TranslateCte(ref.out.cte, &scopes[ref.out.owner_level])
             : OidIsValid(ref.out.view)
                 ? tf.TranslateView(ref.out.view)
                 : tf.TranslateQuery(castNode(Query, ref.out.sublink->subselect), &scopes.back());
  if (fwd->cols.size() != 1 || !fwd->cols[0].differentiable)
    throw Error(sqlstate::kInvalidParameterValue, "the loss must be one row and one number");
  std::vector<Tangent> tangents = PairTangents(first.fe, first.stack, static_cast<int>(first.stack.size()) - 1, scopes,
                                               ref.hvp, tparams, stop_oids);
  Query *sub =
      AnalyzeTangentSql(BuildTangentSql(fwd, tangents, TangentUse::Differentiate, oids.stop_sql), tf.ExternParams());
  RelP rel = tr.TranslateQuery(sub, nullptr);  // (c0, t0): the loss and its tangent
  return MakeProject(rel, {MakeCol(1, 0, rel->cols.at(1))});
}

// A loss's programs (see the runner's ProgramText): `sql`, and `in_place`
// where the loss reads Citus tables without parameters; the statement
// parameters they read, their $1, $2, ....
struct Programs {
  std::string sql, in_place;
  std::vector<Param *> extern_params;
};

// The programs of loss group `g`, whose first call is `first`.
Programs BuildPrograms(const Groups &gs, size_t g, const GradCall &first, const std::vector<GradCall> &calls,
                       const std::vector<Oid> &stop_oids) {
  Translator tr(gs.params[g], stop_oids);
  const LossRef &ref = gs.losses[g];
  std::vector<Scope> scopes(first.stack.size());
  for (size_t i = 0; i < scopes.size(); i++) scopes[i] = Scope{first.stack[i], i ? &scopes[i - 1] : nullptr};
  auto translate = [&](const NamedRel &r) {
    if (r.cte) return tr.TranslateCte(r.cte, &scopes[r.owner_level]);
    if (OidIsValid(r.view)) return tr.TranslateView(r.view);
    return tr.TranslateQuery(castNode(Query, r.sublink->subselect), &scopes.back());
  };
  RelP loss;
  if (!ref.hvp.empty()) {
    loss = HvpLoss(tr, ref, first, scopes, stop_oids);
  } else {
    loss = translate(ref.out);
    if (ref.vjp) loss = VjpLoss(loss, ColumnNames(ref.out), translate(ref.cot), ColumnNames(ref.cot));
  }
  if (loss->cols.size() != 1 || !loss->cols[0].differentiable)
    throw Error(sqlstate::kInvalidParameterValue, "the loss must be one row and one number",
                loss->cols.size() != 1 ? "The loss has " + std::to_string(loss->cols.size()) + " columns."
                                       : "The loss column is of type " + loss->cols[0].sql + ".",
                "Compute the loss as a single float8 or numeric value, e.g. SELECT avg(...) AS l.");
  RefuseUnread(calls, static_cast<int>(g), gs.params[g], ParamsRead(loss, gs.params[g].size()), tr.OpaqueFunctions());
  bool node = ContractionInPrograms();
  Programs out;
  out.sql = BuildGradientProgram(loss, CitusPlacement::Gathered, node).sql;
  if (ReadsCitusData(loss)) out.in_place = BuildGradientProgram(loss, CitusPlacement::InPlace, node).sql;
  out.extern_params = tr.ExternParams();
  // the same loss on dense arrays, where it compiles (ddx/pg/dense.h)
  // (only under ddx.dense: the setting as the statement is parsed; a kept
  // statement parsed with it off runs the SQL program)
  if (dense_enabled && out.in_place.empty() && !ReadsCitusData(loss)) {
    std::string why = KeepDenseProgram(out.sql, loss, !out.extern_params.empty());
    if (!why.empty())
      PgCall([&] { ereport(DEBUG1, (errmsg_internal("ddx: no dense program for this loss: %s", why.c_str()))); });
  }
  return out;
}

// The row a call's parameter is at, as the runner finds its gradient: the
// table and ROW(its primary key's columns in attribute order)::text where
// the program identifies the table's rows by key (a Citus table: see
// CitusParameterTable; the table itself, not the tableoid of whichever
// shard the row is read from), else (tableoid, ctid); ddx_value has none.
// PostgreSQL calls only.
void RowOf(const GradCall &call, Node **table, Node **row) {
  if (call.value) {  // no row: constants the runner does not read
    ItemPointer none = (ItemPointer)palloc0(sizeof(ItemPointerData));
    *table = (Node *)makeConst(OIDOID, -1, InvalidOid, 4, ObjectIdGetDatum(InvalidOid), false, true);
    *row = (Node *)makeConst(TIDOID, -1, InvalidOid, sizeof(ItemPointerData), PointerGetDatum(none), false, false);
    return;
  }
  Var *v = call.param;
  if (!call.keyed) {
    *table = (Node *)makeVar(call.base_varno, TableOidAttributeNumber, OIDOID, -1, InvalidOid, v->varlevelsup);
    *row = (Node *)makeVar(call.base_varno, SelfItemPointerAttributeNumber, TIDOID, -1, InvalidOid, v->varlevelsup);
    return;
  }
  RowExpr *r = makeNode(RowExpr);
  r->row_typeid = RECORDOID;
  r->row_format = COERCE_IMPLICIT_CAST;
  r->location = -1;
  for (AttrNumber a : call.key_attnos) {
    Oid type, coll;
    int32 typmod;
    get_atttypetypmodcoll(call.relid, a, &type, &typmod, &coll);
    r->args = lappend(r->args, makeVar(call.base_varno, a, type, typmod, coll, v->varlevelsup));
    r->colnames = lappend(r->colnames, makeString(get_attname(call.relid, a, false)));
  }
  CoerceViaIO *io = makeNode(CoerceViaIO);
  io->arg = (::Expr *)r;
  io->resulttype = TEXTOID;
  io->resultcollid = DEFAULT_COLLATION_OID;
  io->coerceformat = COERCE_EXPLICIT_CAST;
  io->location = -1;
  *table = (Node *)makeConst(OIDOID, -1, InvalidOid, 4, ObjectIdGetDatum(call.relid), false, true);
  *row = (Node *)io;
}

// A call rewritten into the runner's: _ddx.grad_at(program, in_place,
// pidx, tableoid, ctid, value IS NULL [, the statement parameters the loss
// reads ...]), or _ddx.grad_key with the row's key. PostgreSQL calls only.
void RewriteCall(GradCall &call, const Programs &prog) {
  FuncExpr *fe = call.fe;
  bool keyed = call.keyed && !call.value;
  if (keyed && (!OidIsValid(oids.grad_key) || !OidIsValid(oids.grad_key_params)))
    ereport(ERROR,
            (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE), errmsg("ddx's SQL objects are older than its library"),
             errhint("DROP EXTENSION ddx and CREATE EXTENSION ddx again.")));
  Node *text = (Node *)makeConst(TEXTOID, -1, InvalidOid, -1, CStringGetTextDatum(prog.sql.c_str()), false, false);
  Node *in_place = prog.in_place.empty() ? (Node *)makeNullConst(TEXTOID, -1, InvalidOid)
                                         : (Node *)makeConst(TEXTOID, -1, InvalidOid, -1,
                                                             CStringGetTextDatum(prog.in_place.c_str()), false, false);
  Node *pidx = (Node *)makeConst(INT4OID, -1, InvalidOid, 4, Int32GetDatum(call.pidx), false, true);
  Node *table, *row;
  RowOf(call, &table, &row);
  Node *isnull;
  if (call.value) {
    isnull = (Node *)makeBoolConst(false, false);
  } else {
    NullTest *nt = makeNode(NullTest);
    nt->arg = (::Expr *)copyObjectImpl(call.param);
    nt->nulltesttype = IS_NULL;
    nt->argisrow = false;
    nt->location = -1;
    isnull = (Node *)nt;
  }
  bool params = !prog.extern_params.empty();
  Oid funcid = keyed ? (params ? oids.grad_key_params : oids.grad_key) : (params ? oids.grad_at_params : oids.grad_at);
  List *args = lappend(list_make5(text, in_place, pidx, table, row), isnull);
  // each execution's values of the statement parameters the loss reads
  for (Param *p : prog.extern_params) args = lappend(args, copyObjectImpl(p));
  RetargetCall(fe, funcid, args);
}

}  // namespace

void RewriteStatement(Query *query, Collector &c, std::vector<Oid> stop_oids) {
  Groups gs = GroupCalls(c.calls);
  std::vector<Programs> programs;
  for (size_t g = 0; g < gs.losses.size(); g++) {
    const GradCall *first = nullptr;
    for (const GradCall &call : c.calls)
      if (call.group == static_cast<int>(g) && !first) first = &call;
    try {
      programs.push_back(BuildPrograms(gs, g, *first, c.calls, stop_oids));
    } catch (Error &e) {
      if (e.position < 0) e.position = first->fe->location;
      throw;
    }
  }
  // PostgreSQL out: rewrite each call in place.
  for (GradCall &call : c.calls) PgCall([&] { RewriteCall(call, programs[call.group]); });
  if (!c.calls.empty() &&
      PgCall([] { return OidIsValid(get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE)); })) {
    Levels levels;
    PgCall([&] { CollectLevels((Node *)query, &levels); });
    PgCall([&] {
      for (Query *q : levels.queries) DropUnreadCtes(q);
    });
    levels = Levels();
    PgCall([&] { CollectLevels((Node *)query, &levels); });
    for (Query *q : levels.queries) GatherLevel(q, c.calls.front().fe->location);
  }
  RewriteJvps(c.jvps, stop_oids);
}

}  // namespace ddx::pg
