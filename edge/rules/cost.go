package rules

import (
	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/checker"
)

// A rule whose worst case is provably within CostLimit runs without
// cel-go's runtime cost tracker, which costs about twenty allocations an
// evaluation; the tracker could never stop such a rule, so the outcome is
// the same. The proof is cel-go's static estimate with every size that
// the expression does not itself fix taken as unbounded: any cost that
// grows with an input (a walk over a list, a string's length, a list
// searched with `in`) then estimates above the limit, and the rule keeps
// the tracker. Only rules whose cost does not depend on the inputs' sizes
// lose it.

// unboundedSizes is a checker.CostEstimator that knows no size.
type unboundedSizes struct{}

func (unboundedSizes) EstimateSize(checker.AstNode) *checker.SizeEstimate { return nil }

func (unboundedSizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// boundedCost reports whether checked's worst case, whatever its inputs,
// is within CostLimit. An estimate that fails is not a proof.
func boundedCost(checked *cel.Ast) bool {
	est, err := env.EstimateCost(checked, unboundedSizes{})
	return err == nil && est.Max <= CostLimit
}
