package rules

import (
	"encoding/json"
	"errors"
	"time"

	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// MaxArgumentsDepth bounds the nesting of the arguments a rule may read:
// deeper arguments fail the rule (a policy error) rather than cost a
// conversion proportional to their depth.
const MaxArgumentsDepth = 64

// MaxArgumentsList bounds the length of a list in the arguments a rule
// reads. Walking a list (all, exists, map) costs time that grows faster
// than its length under a cost limit, so a longer one fails the rule (a
// policy error) rather than hold a core.
const MaxArgumentsList = 1000

// Input is what one evaluation reads. The maps hold JSON-like values
// (string, bool, int64, float64, time.Time, []string, []any,
// map[string]any); a nil map reads as an empty one, so that has() tells
// what is known.
type Input struct {
	Agent, User, Delegation, Tool, Request map[string]any
	// Vars, when set, builds a variable whose map above is nil on the
	// first read of it, by a rule or by Var: a rule that never names
	// the delegation costs no delegation map. ToolName is the tool it
	// builds the tool variable of.
	Vars     Vars
	ToolName string
	// Arguments is the raw JSON of a tools/call's params.arguments; nil
	// when the call has none (read as an empty object).
	Arguments json.RawMessage
	Now       time.Time

	// args is Arguments as a CEL map, checked once by the first rule that
	// reads them (readArguments).
	args    ref.Val
	argsErr error
	checked bool
}

// Vars builds the variables of an Input on demand.
type Vars interface {
	// Var returns the variable name (VarAgent, VarUser, VarDelegation,
	// VarTool or VarRequest) of in; nil reads as an empty object.
	Var(in *Input, name string) map[string]any
}

// Var returns the variable name (VarAgent, VarUser, VarDelegation, VarTool
// or VarRequest) of in, built by in.Vars on first use when the field is
// nil; nil when there is none.
func (in *Input) Var(name string) map[string]any {
	f := in.field(name)
	if f == nil {
		return nil
	}
	if *f == nil && in.Vars != nil {
		*f = in.Vars.Var(in, name)
	}
	return *f
}

func (in *Input) field(name string) *map[string]any {
	switch name {
	case VarAgent:
		return &in.Agent
	case VarUser:
		return &in.User
	case VarDelegation:
		return &in.Delegation
	case VarTool:
		return &in.Tool
	case VarRequest:
		return &in.Request
	}
	return nil
}

// arguments returns in.Arguments for a rule, checked once per Input.
func (in *Input) arguments() (ref.Val, error) {
	if !in.checked {
		in.checked = true
		in.args, in.argsErr = readArguments(in.Arguments)
	}
	return in.args, in.argsErr
}

// ErrArguments is wrapped by the errors of arguments a rule cannot read.
var ErrArguments = errors.New("tool arguments cannot be read by a rule")

// activation resolves the variables of one evaluation from an Input.
type activation struct {
	in   *Input
	args ref.Val
}

var emptyObject = map[string]any{}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case VarArguments:
		if a.args == nil {
			return emptyObject, true
		}
		return a.args, true
	case VarNow:
		return a.in.Now, true
	case VarAgent, VarUser, VarDelegation, VarTool, VarRequest:
		if m := a.in.Var(name); m != nil {
			return m, true
		}
		return emptyObject, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }
