// SQL functions differentiated through their bodies, as PostgreSQL inlines
// them (see internal.h).
#include "internal.h"

namespace ddx::pg {

// --- inlining SQL functions, as PostgreSQL inlines them -------------------

//
// A call of an SQL function that PostgreSQL would inline computes exactly its
// body, so ddx differentiates the body. Whether it inlines is PostgreSQL's
// own decision (inline_function: one SELECT of one expression, no FROM, not
// SECURITY DEFINER, no SET, no more volatile than declared, strict only over
// strict constructs that use every argument), asked by running
// eval_const_expressions on the call with a stand-in Param per argument: the
// stand-ins are cheap and stable, so PostgreSQL's limits on arguments used
// twice (their cost, their volatility) do not apply; those limits protect
// execution time, not the value, which a non-volatile body computes either
// way (a volatile argument is refused on the gradient path anyway). The
// stand-ins are then replaced by the argument nodes themselves, not copies:
// the translator finds a Query's scalar subqueries and window functions by
// node, and its aggregates and group keys by equal().

// PARAM_EXEC ids of the stand-ins (no Query of a loss holds PARAM_EXEC
// Params: they appear only in plans).
constexpr int kStandIn = 0x7DD00000;

Node *PutArgsBack(Node *node, List *args) {
  if (!node) return nullptr;
  if (IsA(node, Param)) {
    auto *p = castNode(Param, node);
    if (p->paramkind == PARAM_EXEC && p->paramid >= kStandIn && p->paramid < kStandIn + list_length(args))
      return (Node *)list_nth(args, p->paramid - kStandIn);
  }
  return expression_tree_mutator(node, (Node * (*)()) PutArgsBack, (void *)args);
}

// The body of the call funcid(args) as PostgreSQL inlines it, over the
// argument nodes; nullptr where PostgreSQL would not inline it.
Node *InlinedBody(Oid funcid, Oid rettype, Oid retcoll, Oid inputcoll, List *args, bool variadic) {
  return PgCall([&]() -> Node * {
    List *stand_ins = NIL, *inner = NIL;
    int i = 0;
    ListCell *lc;
    foreach (lc, args) {
      Node *a = (Node *)lfirst(lc);
      Node *value = IsA(a, NamedArgExpr) ? (Node *)castNode(NamedArgExpr, a)->arg : a;
      Param *p = makeNode(Param);
      p->paramkind = PARAM_EXEC;
      p->paramid = kStandIn + i++;
      p->paramtype = exprType(value);
      p->paramtypmod = exprTypmod(value);
      p->paramcollid = exprCollation(value);
      p->location = -1;
      Node *s = (Node *)p;
      if (IsA(a, NamedArgExpr)) {
        auto *na = (NamedArgExpr *)copyObjectImpl(a);
        na->arg = (::Expr *)p;
        s = (Node *)na;
      }
      stand_ins = lappend(stand_ins, s);
      inner = lappend(inner, value);
    }
    FuncExpr *call = makeFuncExpr(funcid, rettype, stand_ins, retcoll, inputcoll, COERCE_EXPLICIT_CALL);
    call->funcvariadic = variadic;
    Node *out = eval_const_expressions(nullptr, (Node *)call);
    if (IsA(out, FuncExpr) && castNode(FuncExpr, out)->funcid == funcid) return nullptr;
    return PutArgsBack(out, inner);
  });
}

// The Query a set-returning SQL function in FROM is, as PostgreSQL inlines
// it (inline_set_returning_function, whose rules it applies: one SELECT, the
// function STABLE or IMMUTABLE, not STRICT, not SECURITY DEFINER, no SET, no
// volatile or subquery argument), or nullptr. It plans nothing: the
// PlannerInfo is the little it reads (where it records the function as a
// dependency of a plan).
Query *InlinedSetReturning(RangeTblEntry *rte) {
  return PgCall([&]() -> Query * {
    PlannerInfo *root = makeNode(PlannerInfo);
    root->glob = makeNode(PlannerGlobal);
    root->query_level = 1;
    root->planner_cxt = CurrentMemoryContext;
    return inline_set_returning_function(root, rte);
  });
}

// The translated body of an SQL function's call, where PostgreSQL would
// inline it (see InlinedBody); nullptr otherwise. A function whose body is
// being translated is not inlined again inside it (a recursive function
// stays a call, as PostgreSQL leaves it).
ExprP Translator::Inlined(Oid funcid, Oid rettype, Oid retcoll, Oid inputcoll, List *args, bool variadic,
                          const Ctx &c) {
  if (std::find(inlining_.begin(), inlining_.end(), funcid) != inlining_.end()) return nullptr;
  Node *body = InlinedBody(funcid, rettype, retcoll, inputcoll, args, variadic);
  if (!body) return nullptr;
  Inlining in(inlining_, funcid);
  return Expr(body, c);
}

}  // namespace ddx::pg
