// The plan in custom_private: ToPrivate and FromPrivate, the only code that
// reads or writes it (contraction.h). custom_private must hold copyable
// Nodes (a parallel worker gets the plan through nodeToString), so the plan
// travels as a list of lists, one slot per field, in the order of Slot; an
// AccSpec's fields travel as three int lists of one entry per aggregate.
#include "contraction.h"

extern "C" {
#include "postgres.h"

#include "nodes/pg_list.h"
#include "nodes/value.h"
}

namespace ddx::pg::contraction {

namespace {

enum Slot {
  kBuildKeys,
  kProbeKeys,
  kBuildHash,
  kProbeHash,
  kJoinEq,
  kJoinColl,
  kProbeFirst,
  kGroupKeys,
  kGroupSide,
  kGroupEq,
  kGroupHash,
  kGroupColl,
  kBuildFactors,
  kProbeFactors,
  kAccKind,
  kAccNullZero,
  kAccOverrideSide,
  kKeyQuals,
  kNumbered,
  kLazyFactors,
  kPairTerms,
  kSets,
  kGroupingValues,
  kNSlots
};

List *Copy(const List *l) { return static_cast<List *>(copyObjectImpl(l)); }
List *At(List *priv, Slot s) { return static_cast<List *>(list_nth(priv, s)); }

}  // namespace

List *ToPrivate(const ContractionPlan *p) {
  List *kind = NIL, *null_zero = NIL, *override_side = NIL;
  ListCell *lc;
  foreach (lc, p->accs) {
    const AccSpec *a = static_cast<const AccSpec *>(lfirst(lc));
    kind = lappend_int(kind, static_cast<int>(a->kind));
    null_zero = lappend_int(null_zero, a->null_zero ? 1 : 0);
    override_side = lappend_int(override_side, a->override_side);
  }
  List *slots[kNSlots];
  slots[kBuildKeys] = Copy(p->join_keys[kBuild]);
  slots[kProbeKeys] = Copy(p->join_keys[kProbe]);
  slots[kBuildHash] = Copy(p->join_hash[kBuild]);
  slots[kProbeHash] = Copy(p->join_hash[kProbe]);
  slots[kJoinEq] = Copy(p->join_eq);
  slots[kJoinColl] = Copy(p->join_coll);
  slots[kProbeFirst] = Copy(p->probe_first);
  slots[kGroupKeys] = Copy(p->group_keys);
  slots[kGroupSide] = Copy(p->group_side);
  slots[kGroupEq] = Copy(p->group_eq);
  slots[kGroupHash] = Copy(p->group_hash);
  slots[kGroupColl] = Copy(p->group_coll);
  slots[kBuildFactors] = Copy(p->factors[kBuild]);
  slots[kProbeFactors] = Copy(p->factors[kProbe]);
  slots[kAccKind] = kind;
  slots[kAccNullZero] = null_zero;
  slots[kAccOverrideSide] = override_side;
  slots[kKeyQuals] = Copy(p->key_quals);
  // (an Integer node: a Node where a List would be NIL, never one)
  slots[kNumbered] = reinterpret_cast<List *>(makeInteger(p->numbered ? 1 : 0));
  slots[kLazyFactors] = reinterpret_cast<List *>(makeInteger(p->lazy_factors ? 1 : 0));
  slots[kPairTerms] = Copy(p->pair_terms);
  slots[kSets] = Copy(p->sets);
  slots[kGroupingValues] = Copy(p->grouping_values);
  List *priv = NIL;
  for (int s = 0; s < kNSlots; s++) priv = lappend(priv, slots[s]);
  return priv;
}

void FromPrivate(List *priv, ContractionPlan *p) {
  if (list_length(priv) != kNSlots)
    elog(ERROR, "ddx contraction: a plan of %d slots, not %d", list_length(priv), kNSlots);
  *p = ContractionPlan();
  p->join_keys[kBuild] = At(priv, kBuildKeys);
  p->join_keys[kProbe] = At(priv, kProbeKeys);
  p->join_hash[kBuild] = At(priv, kBuildHash);
  p->join_hash[kProbe] = At(priv, kProbeHash);
  p->join_eq = At(priv, kJoinEq);
  p->join_coll = At(priv, kJoinColl);
  p->probe_first = At(priv, kProbeFirst);
  p->group_keys = At(priv, kGroupKeys);
  p->group_side = At(priv, kGroupSide);
  p->group_eq = At(priv, kGroupEq);
  p->group_hash = At(priv, kGroupHash);
  p->group_coll = At(priv, kGroupColl);
  p->factors[kBuild] = At(priv, kBuildFactors);
  p->factors[kProbe] = At(priv, kProbeFactors);
  ListCell *kc, *zc, *oc;
  forthree(kc, At(priv, kAccKind), zc, At(priv, kAccNullZero), oc, At(priv, kAccOverrideSide)) {
    AccSpec *a = static_cast<AccSpec *>(palloc(sizeof(AccSpec)));
    a->kind = static_cast<AccKind>(lfirst_int(kc));
    a->null_zero = lfirst_int(zc) != 0;
    a->override_side = lfirst_int(oc);
    p->accs = lappend(p->accs, a);
  }
  p->key_quals = At(priv, kKeyQuals);
  p->numbered = intVal(list_nth(priv, kNumbered)) != 0;
  p->lazy_factors = intVal(list_nth(priv, kLazyFactors)) != 0;
  p->pair_terms = At(priv, kPairTerms);
  p->sets = At(priv, kSets);
  p->grouping_values = At(priv, kGroupingValues);
}

}  // namespace ddx::pg::contraction
