// The operators' rules, by relation kind (see pass.h's OpRule).
#include "../pass.h"

namespace ddx::core {

extern const OpRule kScanOp, kValuesOp, kFunctionOp, kProjectOp, kFilterOp, kJoinOp, kFullJoinOp, kAggregateOp,
    kWindowOp, kUnionAllOp, kLimitOp, kScalarOp;

const OpRule &RuleOf(const Rel &r) {
  switch (r.kind) {
    case RelKind::Scan:
      return kScanOp;
    case RelKind::Values:
      return kValuesOp;
    case RelKind::Function:
      return kFunctionOp;
    case RelKind::Project:
      return kProjectOp;
    case RelKind::Filter:
      return kFilterOp;
    case RelKind::Join:
      return r.join == JoinKind::Full ? kFullJoinOp : kJoinOp;
    case RelKind::Aggregate:
      return kAggregateOp;
    case RelKind::Window:
      return kWindowOp;
    case RelKind::UnionAll:
      return kUnionAllOp;
    case RelKind::Limit:
      return kLimitOp;
    case RelKind::Scalar:
      return kScalarOp;
  }
  Internal("relation of unknown kind");
}

}  // namespace ddx::core
