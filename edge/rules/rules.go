// Package rules compiles and evaluates the operator's tool rules: CEL
// expressions over the caller (agent, user, delegation), the tool, the
// tools/call arguments, the request and the time. A rule is compiled and
// type-checked once, when the configuration is loaded, and evaluated on
// every call with a cost limit; docs/config/rules.md says why CEL and
// documents the variables.
package rules

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
)

// Limits of a rule.
const (
	// CostLimit bounds one evaluation, in CEL cost units (about one per
	// operation, more for a comprehension over a list or a string
	// operation over its length). It stops a rule that walks hostile
	// arguments (a huge list, deep nesting) in bounded time: the call is
	// then refused as a policy error.
	CostLimit = 100_000

	// MaxExpressionSize bounds a rule's text, in code points.
	MaxExpressionSize = 4096

	// EvalTimeout bounds one evaluation's wall time, whatever its cost
	// units say: cel-go's cost tracking makes a comprehension's steps
	// dearer as it goes, so units alone do not bound time.
	EvalTimeout = 20 * time.Millisecond

	// interruptEvery is how many comprehension steps run between two
	// checks of the deadline.
	interruptEvery = 64
)

// The variables a rule reads. Every one of them is declared to the type
// checker, so a rule naming another variable does not compile.
const (
	VarAgent      = "agent"
	VarUser       = "user"
	VarDelegation = "delegation"
	VarTool       = "tool"
	VarArguments  = "arguments"
	VarRequest    = "request"
	VarNow        = "now"
)

// env is the CEL environment every rule is compiled in: the standard
// library and the variables. It holds no state of a request.
var env = func() *cel.Env {
	obj := cel.MapType(cel.StringType, cel.DynType)
	e, err := cel.NewEnv(
		cel.Variable(VarAgent, obj),
		cel.Variable(VarUser, obj),
		cel.Variable(VarDelegation, obj),
		cel.Variable(VarTool, obj),
		cel.Variable(VarArguments, obj),
		cel.Variable(VarRequest, obj),
		cel.Variable(VarNow, cel.TimestampType),
		cel.ParserExpressionSizeLimit(MaxExpressionSize),
	)
	if err != nil {
		panic(err) // a static environment: an error is a bug here
	}
	return e
}()

// Rule is a compiled rule.
type Rule struct {
	// Name names the rule in the audit log and in denials.
	Name string
	// Message is the operator's explanation, given to a refused caller.
	Message string
	// Expr is the rule's text.
	Expr string

	prg cel.Program
	// partial evaluates with arguments unknown, for tools/list.
	partial cel.Program
	// untracked, when set, is prg without the runtime cost tracker: the
	// rule's worst case is proved within CostLimit (see boundedCost), for
	// any delegation or, if untrackedNeedsScopes, for one whose scopes are
	// within boundedScopes.
	untracked            cel.Program
	untrackedNeedsScopes bool
	// readsArguments: the rule names the arguments variable, so they are
	// checked for it.
	readsArguments bool
	// walks: the rule has a comprehension (all, exists, map, filter…),
	// the only part of an evaluation whose time the cost limit does not
	// bound well, so it runs under EvalTimeout.
	walks bool
}

// CompileError is a rule that does not parse or type-check. Line and
// Column (both from 1) are those of the first error within the
// expression's text.
type CompileError struct {
	Rule         string
	Line, Column int
	Msg          string
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("rule %q: line %d, column %d of the expression: %s", e.Rule, e.Line, e.Column, e.Msg)
}

// Compile parses and type-checks expr, which must be a bool expression
// over the declared variables. A *CompileError says where it is wrong.
func Compile(name, expr, message string) (*Rule, error) {
	if name == "" {
		return nil, errors.New("a rule needs a name, which the audit log and denials give")
	}
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("rule %q: the expression is empty; write a CEL condition such as `arguments.amount <= 100`", name)
	}
	checked, iss := env.Compile(expr)
	if iss != nil && iss.Err() != nil {
		errs := iss.Errors()
		ce := &CompileError{Rule: name, Line: 1, Column: 1, Msg: iss.Err().Error()}
		if len(errs) > 0 {
			loc := errs[0].Location
			ce.Line, ce.Column, ce.Msg = max(loc.Line(), 1), loc.Column()+1, errs[0].Message
		}
		return nil, ce
	}
	if !checked.OutputType().IsExactType(cel.BoolType) && !checked.OutputType().IsExactType(cel.DynType) {
		return nil, &CompileError{Rule: name, Line: 1, Column: 1,
			Msg: fmt.Sprintf("the expression gives %s, and a rule must give a bool (true admits the call)", checked.OutputType())}
	}
	prg, err := env.Program(checked, cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(interruptEvery))
	if err != nil {
		return nil, fmt.Errorf("rule %q: %w", name, err)
	}
	var untracked cel.Program
	anyScopes := boundedCost(checked, sizes{})
	if anyScopes || boundedCost(checked, sizes{scopes: boundedScopes}) {
		if untracked, err = env.Program(checked, cel.InterruptCheckFrequency(interruptEvery)); err != nil {
			return nil, fmt.Errorf("rule %q: %w", name, err)
		}
	}
	partial, err := env.Program(checked, cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(interruptEvery), cel.EvalOptions(cel.OptPartialEval))
	if err != nil {
		return nil, fmt.Errorf("rule %q: %w", name, err)
	}
	return &Rule{Name: name, Message: message, Expr: expr, prg: prg, partial: partial,
		untracked: untracked, untrackedNeedsScopes: !anyScopes,
		readsArguments: readsVariable(checked.NativeRep().ReferenceMap(), VarArguments),
		walks:          len(ast.MatchDescendants(ast.NavigateAST(checked.NativeRep()), ast.KindMatcher(ast.ComprehensionKind))) > 0}, nil
}

// readsVariable reports whether a checked expression references the
// variable name.
func readsVariable(refs map[int64]*ast.ReferenceInfo, name string) bool {
	for _, r := range refs {
		if r != nil && r.Name == name {
			return true
		}
	}
	return false
}
