package rules

import (
	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/checker"
)

// A rule whose worst case is provably within CostLimit runs without
// cel-go's runtime cost tracker, which costs about ten allocations an
// evaluation; the tracker could never stop such a rule, so the outcome is
// the same. The proof is cel-go's static estimate with every size that
// the expression does not itself fix taken as unbounded: any cost that
// grows with an input (a walk over a list, a string's length, a list
// searched with `in`) then estimates above the limit, and the rule keeps
// the tracker.
//
// The one size taken as bounded is that of delegation.scopes, which rules
// commonly search with `in`: a rule proved within the limit for at most
// boundedScopes scopes runs untracked for a delegation that has no more
// (checked on each evaluation, see scopesWithin), and tracked otherwise.

// boundedScopes is the number of a delegation's scopes up to which a rule
// proved for it runs without the cost tracker.
const boundedScopes = 64

// sizes is a checker.CostEstimator that knows the size of no input but,
// when scopes is not zero, delegation.scopes.
type sizes struct{ scopes uint64 }

func (s sizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if p := n.Path(); s.scopes != 0 && len(p) == 2 && p[0] == VarDelegation && p[1] == "scopes" {
		return &checker.SizeEstimate{Min: 0, Max: s.scopes}
	}
	return nil
}

func (sizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// boundedCost reports whether checked's worst case, with the sizes s
// knows, is within CostLimit. An estimate that fails is not a proof.
func boundedCost(checked *cel.Ast, s sizes) bool {
	est, err := env.EstimateCost(checked, s)
	return err == nil && est.Max <= CostLimit
}

// scopesWithin reports whether in's delegation.scopes, if any, holds at
// most boundedScopes values. A value of another type is not known to.
func scopesWithin(in *Input) bool {
	d := in.Var(VarDelegation)
	v, ok := d["scopes"]
	if !ok {
		return true
	}
	switch s := v.(type) {
	case []string:
		return len(s) <= boundedScopes
	case []any:
		return len(s) <= boundedScopes
	}
	return false
}
