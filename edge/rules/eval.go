package rules

import (
	"context"
	"fmt"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// Eval decides a tools/call: true admits it. An error (a missing key, a
// type mismatch at run time, arguments that cannot be read, the cost
// limit) is for the caller to refuse the call on: rules fail closed.
func (r *Rule) Eval(in *Input) (bool, error) {
	a := activation{in: in}
	if r.readsArguments {
		args, err := in.arguments()
		if err != nil {
			return false, err
		}
		a.args = args
	}
	prg := r.program(in)
	if !r.walks {
		// Only a comprehension checks the deadline: without one, a
		// context would cost a timer and change nothing.
		out, _, err := prg.Eval(&a)
		return r.result(out, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), EvalTimeout)
	defer cancel()
	out, _, err := prg.ContextEval(ctx, &a)
	return r.result(out, err)
}

// program is the program that evaluates r on in: without the cost tracker
// when r's worst case on in is proved within CostLimit.
func (r *Rule) program(in *Input) cel.Program {
	if r.untracked != nil && (!r.untrackedNeedsScopes || scopesWithin(in)) {
		return r.untracked
	}
	return r.prg
}

// EvalListing decides whether a tool is listed for the caller: as Eval,
// with the arguments not known yet. A rule that cannot hold whatever the
// arguments are hides the tool; one whose outcome depends on them lists
// it, and is decided on the call.
func (r *Rule) EvalListing(in *Input) (bool, error) {
	if !r.readsArguments {
		return r.Eval(in)
	}
	vars, err := cel.PartialVars(&activation{in: in}, cel.AttributePattern(VarArguments))
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), EvalTimeout)
	defer cancel()
	out, _, err := r.partial.ContextEval(ctx, vars)
	if err == nil && types.IsUnknown(out) {
		return true, nil
	}
	return r.result(out, err)
}

// ReadsArguments reports whether the rule reads the call's arguments.
func (r *Rule) ReadsArguments() bool { return r.readsArguments }

func (r *Rule) result(out ref.Val, err error) (bool, error) {
	if err != nil {
		return false, fmt.Errorf("rule %q: %w", r.Name, err)
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("rule %q: gave %s, not a bool", r.Name, out.Type().TypeName())
	}
	return b, nil
}
