// Forward mode: jvp calls rewritten (see internal.h).
#include "internal.h"

#include "ddx/pg/compat.h"

namespace ddx::pg {
// --- forward mode (jvp) --------------------------------------------------------
//
// jvp(o.v, 'w.val', 'tw' [, 'b.val', 'tb' ...]) stands in a query whose FROM
// list holds o, a reference to a CTE, a view or a subquery: the derivative of
// column v of o's current row along the tangent relations tw (of w.val), tb
// .... The reference is replaced by one query (the core's BuildTangentSql)
// whose rows are o's rows, its columns o's columns followed by their
// tangents, and each call by that row's tangent column: forward mode runs as
// the statement runs, in its plan and snapshot, with no program of its own.

// The string arguments of a jvp or hvp call from argument `argno` on:
// (parameter, tangent relation) pairs.
std::vector<std::string> TextPairs(FuncExpr *fe, int argno) {
  auto fail = [&] {
    throw Error(sqlstate::kInvalidParameterValue, "the parameters and tangents of jvp must be string literals",
                "jvp takes a column of a relation in the FROM list, then pairs of a parameter column and its tangent "
                "relation.",
                "Write jvp(o.v, 'w.val', 'tangent_of_w' [, 'b.val', 'tangent_of_b' ...]).", fe->location);
  };
  Node *arr = StripRelabel((Node *)list_nth(fe->args, argno));
  std::vector<std::string> out;
  if (!arr || !IsA(arr, ArrayExpr)) fail();
  ListCell *lc;
  foreach (lc, castNode(ArrayExpr, arr)->elements) {
    Node *e = StripRelabel((Node *)lfirst(lc));
    if (!e || !IsA(e, Const) || castNode(Const, e)->constisnull) fail();
    Const *k = castNode(Const, e);
    out.push_back(Str(PgCall([&] { return TextDatumGetCString(k->constvalue); })));
  }
  if (out.empty() || out.size() % 2)
    throw Error(sqlstate::kInvalidParameterValue, "jvp needs pairs of a parameter column and its tangent relation",
                std::to_string(out.size()) + " string argument(s) given.",
                "Write jvp(o.v, 'w.val', 'tangent_of_w' [, 'b.val', 'tangent_of_b' ...]).", fe->location);
  return out;
}

namespace {

// The live columns of a table or view, in order.
std::vector<std::string> RelColumnNames(Oid relid) {
  struct Raw {
    int n;
    char **names;
  };
  Raw raw = PgCall([&] {
    Relation rel = relation_open(relid, AccessShareLock);
    TupleDesc td = RelationGetDescr(rel);
    Raw x{0, (char **)palloc(sizeof(char *) * Max(td->natts, 1))};
    for (int i = 0; i < td->natts; i++)
      if (!TupleDescAttr(td, i)->attisdropped) x.names[x.n++] = pstrdup(NameStr(TupleDescAttr(td, i)->attname));
    relation_close(rel, AccessShareLock);
    return x;
  });
  return std::vector<std::string>(raw.names, raw.names + raw.n);
}

// A parameter 'table.column' (or 'schema.table.column') of jvp.
ParamTarget JvpParam(FuncExpr *fe, const std::string &spec) {
  struct Found {
    Oid relid;
    char relkind;
    Oid type;
    char *att;
  };
  Found f = PgCall([&] {
    Found r{InvalidOid, 0, InvalidOid, nullptr};
    List *names = compat::QualifiedNameList(spec.c_str());
    if (list_length(names) < 2) return r;
    r.att = pstrdup(strVal(llast(names)));
    names = list_truncate(names, list_length(names) - 1);
    r.relid = RangeVarGetRelid(makeRangeVarFromNameList(names), AccessShareLock, true);
    if (OidIsValid(r.relid)) {
      r.relkind = get_rel_relkind(r.relid);
      AttrNumber a = get_attnum(r.relid, r.att);
      if (a != InvalidAttrNumber) r.type = get_atttype(r.relid, a);
    }
    return r;
  });
  if (!f.att)
    throw Error(sqlstate::kInvalidParameterValue, "parameter \"" + spec + "\" of jvp is not of the form table.column",
                "", "Write 'table.column' or 'schema.table.column'.", fe->location);
  if (!OidIsValid(f.relid) || (f.relkind != RELKIND_RELATION && f.relkind != RELKIND_PARTITIONED_TABLE))
    throw Error(sqlstate::kUndefinedTable, "table of parameter \"" + spec + "\" of jvp does not exist", "",
                "Name a table (ordinary, temporary, unlogged or partitioned) and one of its columns.", fe->location);
  if (!OidIsValid(f.type))
    throw Error(sqlstate::kUndefinedColumn, "parameter column \"" + spec + "\" of jvp does not exist", "", "",
                fe->location);
  if (f.type != FLOAT8OID && f.type != FLOAT4OID)
    throw Error(sqlstate::kDatatypeMismatch, "parameter column \"" + spec + "\" of jvp is not float8 or float4",
                "Derivatives are taken along float8 or float4 columns.", "", fe->location);
  RefuseCitusTable(f.relid, spec, "the parameter's table of");
  return ParamTarget{f.relid, f.att};
}

}  // namespace

// The parameters that pairs (parameter, tangent relation) name.
std::vector<ParamTarget> PairParams(FuncExpr *fe, const std::vector<std::string> &texts) {
  std::vector<ParamTarget> params;
  for (size_t k = 0; k < texts.size(); k += 2) {
    ParamTarget p = JvpParam(fe, texts[k]);
    for (const auto &x : params)
      if (x.relid == p.relid && x.attname == p.attname)
        throw Error(sqlstate::kInvalidParameterValue, "parameter \"" + texts[k] + "\" is given twice to jvp", "", "",
                    fe->location);
    params.push_back(p);
  }
  return params;
}

// The tangent relations of pairs: CTEs visible from `level` of `stack`, or
// tables or views, translated with no parameter (a tangent is a constant of
// the derivative), each with its value column and its keys.
std::vector<Tangent> PairTangents(FuncExpr *fe, const std::vector<Query *> &stack, int level,
                                  std::vector<Scope> &scopes, const std::vector<std::string> &texts,
                                  const std::vector<ParamTarget> &params, const std::vector<Oid> &stop_oids) {
  // The tangent relations: of no parameter (a tangent is a constant of the derivative).
  Translator tt({}, stop_oids);
  std::vector<Tangent> tangents(params.size());
  for (size_t k = 0; k < params.size(); k++) {
    NamedRel t;
    std::vector<std::string> names;
    const std::string &tname = texts[2 * k + 1];
    for (int l = level; l >= 0 && !t.cte; l--) {
      ListCell *lc;
      foreach (lc, stack[l]->cteList) {
        auto *cte = lfirst_node(CommonTableExpr, lc);
        if (tname == cte->ctename) t.cte = cte, t.owner_level = l;
      }
    }
    if (t.cte) {
      tangents[k].rel = tt.TranslateCte(t.cte, &scopes[t.owner_level]);
      ListCell *lc;
      foreach (lc, t.cte->ctecolnames) names.push_back(strVal(lfirst(lc)));
    } else {
      Oid relid = PgCall([&] {
        return RangeVarGetRelid(makeRangeVarFromNameList(compat::QualifiedNameList(tname.c_str())), AccessShareLock,
                                true);
      });
      if (!OidIsValid(relid))
        throw Error(sqlstate::kUndefinedTable, "tangent relation \"" + tname + "\" does not exist",
                    "It is neither a CTE visible where the call stands nor a table or view.", "", fe->location);
      char kind = PgCall([&] { return get_rel_relkind(relid); });
      tangents[k].rel = kind == RELKIND_VIEW ? tt.TranslateView(relid) : tt.TranslateTable(relid);
      names = RelColumnNames(relid);
    }
    if (!tt.ExternParams().empty())
      throw Error(sqlstate::kFeatureNotSupported, "tangent relation \"" + tname + "\" reads statement parameters", "",
                  "Compute the tangents into a table or a CTE of constants.", fe->location);
    for (size_t c = 0; c < names.size(); c++) {
      if (names[c] == params[k].attname) {
        tangents[k].value = static_cast<int>(c);
        continue;
      }
      bool key = PgCall([&] { return get_attnum(params[k].relid, names[c].c_str()) != InvalidAttrNumber; });
      if (!key)
        throw Error(sqlstate::kUndefinedColumn,
                    "column \"" + names[c] + "\" of tangent relation \"" + tname +
                        "\" is not a column of the "
                        "parameter's table",
                    "A tangent relation has the parameter table's key columns and the tangent, under the "
                    "parameter column's name.",
                    "", fe->location);
      tangents[k].keys.push_back(
          {static_cast<int>(c), Str(PgCall([&] { return quote_identifier(names[c].c_str()); }))});
    }
    if (tangents[k].value < 0)
      throw Error(
          sqlstate::kUndefinedColumn, "tangent relation \"" + tname + "\" has no column \"" + params[k].attname + "\"",
          "The tangent of parameter " + texts[2 * k] + " is the column of the parameter's name.", "", fe->location);
  }
  return tangents;
}

namespace {

// Where the output of a jvp call is: its query, range table entry, column.
struct JvpOut {
  int level = -1;  // the query's index in the call's stack
  Index rtindex = 0;
  AttrNumber attno = 0;
  Index varlevelsup = 0;
};

JvpOut ResolveJvpOut(const JvpCall &call) {
  auto refuse = [&](const std::string &detail) {
    throw Error(sqlstate::kUndefinedColumn, "the first argument of jvp must be a column of a CTE, view or subquery",
                detail,
                "Write jvp(o.v, 'w.val', 'tangent_of_w') where o is a CTE, a view or a subquery in the FROM list.",
                call.fe->location);
  };
  Node *arg = StripRelabel((Node *)linitial(call.fe->args));
  if (!arg || !IsA(arg, Var)) refuse("The first argument is an expression, not a column.");
  Var *v = castNode(Var, arg);
  if (v->varlevelsup >= call.stack.size()) throw Error(sqlstate::kInternalError, "ddx internal error: bad Var level");
  JvpOut o;
  o.level = static_cast<int>(call.stack.size() - 1 - v->varlevelsup);
  o.varlevelsup = v->varlevelsup;
  Query *q = call.stack[o.level];
  Index varno = v->varno;
  AttrNumber attno = v->varattno;
  RangeTblEntry *rte = ThroughJoinAliases(q, &varno, &attno);
  bool view = rte->rtekind == RTE_RELATION && PgCall([&] { return get_rel_relkind(rte->relid); }) == RELKIND_VIEW;
  if (attno <= 0 || !(rte->rtekind == RTE_CTE || rte->rtekind == RTE_SUBQUERY || view))
    refuse("It is a column of a table, a function or a join, which holds no computation to differentiate.");
  o.rtindex = varno;
  o.attno = attno;
  return o;
}

// The CTE that range table entry `rte` of the query at `level` reads, and its owner's level.
CommonTableExpr *CteOf(const std::vector<Query *> &stack, int level, RangeTblEntry *rte, int &owner) {
  owner = level - static_cast<int>(rte->ctelevelsup);
  if (owner < 0) throw Error(sqlstate::kInternalError, "ddx internal error: bad CTE level");
  ListCell *lc;
  foreach (lc, stack[owner]->cteList) {
    auto *cte = lfirst_node(CommonTableExpr, lc);
    if (strcmp(cte->ctename, rte->ctename) == 0) return cte;
  }
  throw Error(sqlstate::kInternalError, "ddx internal error: CTE not found");
}

// Statement parameters in the analyzed tangent query: the original Params
// (a plpgsql variable, PREPARE's $n) in place of the query's own $k.
bool RestoreParams(Node *node, void *ctx) {
  if (!node) return false;
  auto *params = static_cast<const std::vector<Param *> *>(ctx);
  if (IsA(node, Param)) {
    Param *p = castNode(Param, node);
    if (p->paramkind == PARAM_EXTERN && p->paramid >= 1 && p->paramid <= static_cast<int>(params->size()))
      *p = *(*params)[p->paramid - 1];
    return false;
  }
  if (IsA(node, Query)) return query_tree_walker(castNode(Query, node), (bool (*)())RestoreParams, ctx, 0);
  return expression_tree_walker(node, (bool (*)())RestoreParams, ctx);
}

}  // namespace

// The analyzed query of `sql` (names resolved as the runner resolves a
// program's: SetProgramSearchPath), with `params` as its $1 ....
Query *AnalyzeTangentSql(const std::string &sql, const std::vector<Param *> &params) {
  return PgCall([&] {
    int nest = NewGUCNestLevel();
    SetProgramSearchPath();
    char *text = pstrdup(sql.c_str());
    List *raw = raw_parser(text, RAW_PARSE_DEFAULT);
    Oid *types = (Oid *)palloc(sizeof(Oid) * Max(params.size(), 1));
    for (size_t i = 0; i < params.size(); i++) types[i] = params[i]->paramtype;
    Query *q =
        parse_analyze_fixedparams(linitial_node(RawStmt, raw), text, types, static_cast<int>(params.size()), NULL);
    AtEOXact_GUC(true, nest);
    RestoreParams((Node *)q, (void *)&params);
    return q;
  });
}

namespace {

// The jvp calls on the same reference to an output relation as calls[i]
// (one rewrite serves them), marked done; refused where they name different
// tangents.
std::vector<size_t> SameOutput(std::vector<JvpCall> &calls, size_t i, std::vector<bool> &done) {
  const JvpCall &first = calls[i];
  JvpOut out = ResolveJvpOut(first);
  std::vector<std::string> texts = TextPairs(first.fe, 1);
  std::vector<size_t> group;
  for (size_t j = i; j < calls.size(); j++) {
    if (done[j]) continue;
    JvpOut o = ResolveJvpOut(calls[j]);
    if (calls[j].stack[o.level] != first.stack[out.level] || o.rtindex != out.rtindex) continue;
    if (TextPairs(calls[j].fe, 1) != texts)
      throw Error(sqlstate::kFeatureNotSupported, "jvp calls on one relation name different tangents",
                  "Every jvp call on one reference to a relation must name the same parameters and tangents.",
                  "Reference the relation twice in the FROM list, once per set of tangents.", calls[j].fe->location);
    group.push_back(j);
    done[j] = true;
  }
  return group;
}

// An output relation's tangent query: its SQL, the statement parameters it
// reads, and how many columns the relation has.
struct TangentQuery {
  std::string sql;
  std::vector<Param *> extern_params;
  size_t ncols = 0;
};

TangentQuery BuildTangentQuery(const JvpCall &first, const JvpOut &out, RangeTblEntry *rte,
                               const std::vector<Oid> &stop_oids) {
  std::vector<Scope> scopes(first.stack.size());
  for (size_t k = 0; k < scopes.size(); k++) scopes[k] = Scope{first.stack[k], k ? &scopes[k - 1] : nullptr};
  std::vector<std::string> texts = TextPairs(first.fe, 1);
  std::vector<ParamTarget> params = PairParams(first.fe, texts);
  Translator tr(params, stop_oids);
  RelP rel;
  if (rte->rtekind == RTE_CTE) {
    int owner = -1;
    CommonTableExpr *cte = CteOf(first.stack, out.level, rte, owner);
    rel = tr.TranslateCte(cte, &scopes[owner]);
  } else if (rte->rtekind == RTE_SUBQUERY) {
    rel = tr.TranslateQuery(rte->subquery, &scopes[out.level]);
  } else {
    rel = tr.TranslateView(rte->relid);
  }
  std::vector<Tangent> tangents = PairTangents(first.fe, first.stack, out.level, scopes, texts, params, stop_oids);
  return TangentQuery{BuildTangentSql(rel, tangents), tr.ExternParams(), rel->cols.size()};
}

// The output's range table entry made _ddx.jvp_rows(query, params ...) AS
// (its columns, their tangents jvp_1 ...), the analyzed query `sub` giving
// the columns' types. PostgreSQL calls only.
void MakeJvpRows(RangeTblEntry *rte, const TangentQuery &tq, Query *sub) {
  Const *text = makeConst(TEXTOID, -1, InvalidOid, -1, CStringGetTextDatum(tq.sql.c_str()), false, false);
  List *args = list_make1(text);
  for (Param *p : tq.extern_params) args = lappend(args, copyObjectImpl(p));
  FuncExpr *call = makeFuncExpr(tq.extern_params.empty() ? oids.jvp_rows : oids.jvp_rows_params, RECORDOID, args,
                                InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
  call->funcretset = true;
  RangeTblFunction *fn = makeNode(RangeTblFunction);
  fn->funcexpr = (Node *)call;
  ListCell *tl;
  int k = 0;
  foreach (tl, sub->targetList) {
    TargetEntry *te = lfirst_node(TargetEntry, tl);
    if (te->resjunk) continue;
    fn->funccolnames = lappend(fn->funccolnames, makeString(psprintf("c%d", k++)));
    fn->funccoltypes = lappend_oid(fn->funccoltypes, exprType((Node *)te->expr));
    fn->funccoltypmods = lappend_int(fn->funccoltypmods, exprTypmod((Node *)te->expr));
    fn->funccolcollations = lappend_oid(fn->funccolcollations, exprCollation((Node *)te->expr));
  }
  fn->funccolcount = k;
  ForgetRelation(rte);
  rte->rtekind = RTE_FUNCTION;
  rte->functions = list_make1(fn);
  rte->funcordinality = false;
  rte->subquery = NULL;
  rte->ctename = NULL;
  rte->ctelevelsup = 0;
  rte->self_reference = false;
  rte->coltypes = rte->coltypmods = rte->colcollations = NIL;
  List *names = NIL;
  ListCell *lc;
  int n = 0;
  foreach (lc, rte->eref->colnames) {
    if (n++ < static_cast<int>(tq.ncols)) names = lappend(names, lfirst(lc));
  }
  for (size_t j = 0; j < tq.ncols; j++) names = lappend(names, makeString(psprintf("jvp_%d", static_cast<int>(j + 1))));
  rte->eref->colnames = names;
}

}  // namespace

void RewriteJvps(std::vector<JvpCall> &calls, const std::vector<Oid> &stop_oids) {
  // One rewrite per output reference (query, range table entry).
  std::vector<bool> done(calls.size(), false);
  for (size_t i = 0; i < calls.size(); i++) {
    if (done[i]) continue;
    const JvpCall &first = calls[i];
    JvpOut out = ResolveJvpOut(first);
    std::vector<size_t> group = SameOutput(calls, i, done);
    RangeTblEntry *rte = rt_fetch(out.rtindex, first.stack[out.level]->rtable);
    TangentQuery tq;
    try {
      tq = BuildTangentQuery(first, out, rte, stop_oids);
    } catch (Error &e) {
      if (e.position < 0) e.position = first.fe->location;
      throw;
    }
    Query *sub = AnalyzeTangentSql(tq.sql, tq.extern_params);
    std::vector<JvpOut> outs;  // (resolved before the entry changes: no C++ exception inside PgCall)
    for (size_t j : group) outs.push_back(ResolveJvpOut(calls[j]));
    int owner = -1;
    CommonTableExpr *out_cte = rte->rtekind == RTE_CTE ? CteOf(first.stack, out.level, rte, owner) : nullptr;
    PgCall([&] {
      if (out_cte) out_cte->cterefcount--;
      MakeJvpRows(rte, tq, sub);
      for (size_t g = 0; g < group.size(); g++) {
        const JvpOut &o = outs[g];
        RetargetCall(calls[group[g]].fe, oids.jvp_at,
                     list_make1(makeVar(o.rtindex, static_cast<AttrNumber>(tq.ncols + o.attno), FLOAT8OID, -1,
                                        InvalidOid, o.varlevelsup)));
      }
    });
  }
}

}  // namespace ddx::pg
