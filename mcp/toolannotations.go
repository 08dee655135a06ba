package mcp

// ToolClass is the class of a tool by the behaviour hints of its MCP
// ToolAnnotations (readOnlyHint, destructiveHint), as ClassifyTool gives it.
// The hints are only hints: an edge may act on them only for an upstream it
// trusts, the one its operator put behind it.
type ToolClass uint8

const (
	// ToolClassUnknown: the annotations are ambiguous (a hint given twice),
	// so the tool has no class.
	ToolClassUnknown ToolClass = iota
	// ToolClassReadOnly: readOnlyHint is true and destructiveHint is not
	// true. The spec makes destructiveHint meaningful only when
	// readOnlyHint is false, so an absent one does not count here.
	ToolClassReadOnly
	// ToolClassDestructive: not read-only, and destructiveHint is true or
	// absent (its spec default is true); also readOnlyHint and
	// destructiveHint both true, which contradict each other.
	ToolClassDestructive
	// ToolClassOther: not read-only, and destructiveHint is false.
	ToolClassOther
)

// String returns "read_only", "destructive", "other" or "unknown".
func (c ToolClass) String() string {
	switch c {
	case ToolClassReadOnly:
		return "read_only"
	case ToolClassDestructive:
		return "destructive"
	case ToolClassOther:
		return "other"
	default:
		return "unknown"
	}
}

// ClassifyTool classifies a tool by its hints; nil means the hint was absent
// (or not a boolean).
func ClassifyTool(readOnly, destructive *bool) ToolClass {
	switch {
	case readOnly != nil && *readOnly && (destructive == nil || !*destructive):
		return ToolClassReadOnly
	case destructive == nil || *destructive:
		return ToolClassDestructive
	default:
		return ToolClassOther
	}
}

// EachListedTool calls fn with the name and class of every tool in the
// answers to tools/list requests in a JSON-RPC body (a single message or a
// batch, e.g. an upstream's application/json answer or one SSE event's
// data). requestIDs maps IDKey(id) to the request's method (see
// RequestMethods); responses to other or unknown requests are skipped, so a
// nil map finds nothing.
//
// It reads the tools the way FilterToolsList does: a tool without a single
// string "name" is skipped (the filter removes it); "annotations" absent,
// null or not an object counts as no hints; a hint that is not a boolean
// counts as absent; "annotations", "readOnlyHint" or "destructiveHint" given
// twice makes the tool ToolClassUnknown. A body that is not valid JSON-RPC,
// or a tools/list result that is not an object with a "tools" array, is an
// error; fn may have been called for the tools before it.
func EachListedTool(body []byte, requestIDs map[string]string, fn func(name string, class ToolClass)) error {
	return EachListedToolHints(body, requestIDs, func(name string, class ToolClass, _ map[string]any) { fn(name, class) })
}

// eachListedToolObject calls fn for every tool in the "tools" array of the
// answers to tools/list requests in body, for EachListedTool and
// EachListedParamHeaders: with its name, the span in result of its member
// named member ({-1,-1} when absent), whether that member is given twice,
// and the nesting level of the member's value. A tool that is not an
// object, or has no single string "name", is skipped. A body that is not
// valid JSON-RPC, or a tools/list result that is not an object with a
// "tools" array, is an error.
func eachListedToolObject(body []byte, requestIDs map[string]string, member string,
	fn func(name string, result []byte, span [2]int, twice bool, depth int) error) error {
	if len(requestIDs) == 0 {
		return nil
	}
	msgs, _, err := ParseMessages(body)
	if err != nil {
		return err
	}
	depth := 1
	if i := skipSpace(body, 0); i < len(body) && body[i] == '[' {
		depth = 2
	}
	for k := range msgs {
		m := &msgs[k]
		if m.Result == nil || requestIDs[IDKey(m.ID)] != MethodToolsList {
			continue
		}
		if err := eachToolObject(m.Result, depth, member, fn); err != nil {
			return err
		}
	}
	return nil
}

// eachToolObject does eachListedToolObject on one result; depth is the
// nesting level of the container holding it.
func eachToolObject(result []byte, depth int, member string, fn func(string, []byte, [2]int, bool, int) error) error {
	i := skipSpace(result, 0)
	if i == len(result) || result[i] != '{' {
		return ErrNotObject
	}
	f, dup, _, err := findMembers(result, i, depth+1, "tools")
	if err != nil {
		return err
	}
	if dup != "" {
		return ErrInvalidToolsList
	}
	as := f[0][0]
	if as < 0 || result[as] == 'n' {
		return nil
	}
	if result[as] != '[' {
		return ErrInvalidToolsList
	}
	_, err = eachElement(result, as, depth+2, func(_, s, _ int) error {
		if result[s] != '{' {
			return nil
		}
		f, dup, _, err := findMembers(result, s, depth+3, "name", member)
		if err != nil {
			return err
		}
		if dup == "name" || f[0][0] < 0 {
			return nil
		}
		name, ok := stringValue(result, f[0][0], f[0][1])
		if !ok {
			return nil
		}
		return fn(name, result, f[1], dup == member, depth+4)
	})
	return err
}

// boolValue reads the JSON literal true or false at d[span[0]:span[1]]; nil
// when absent or of another type.
func boolValue(d []byte, span [2]int) *bool {
	if span[0] < 0 {
		return nil
	}
	var v bool
	switch string(d[span[0]:span[1]]) {
	case "true":
		v = true
	case "false":
	default:
		return nil
	}
	return &v
}
