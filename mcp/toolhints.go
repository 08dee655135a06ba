package mcp

// ToolHintNames are the members of an MCP ToolAnnotations object that
// EachListedToolHints reads: the title, a string, and the four behaviour
// hints, booleans.
var ToolHintNames = [...]string{"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}

// MaxToolTitle bounds the title EachListedToolHints keeps, in bytes: a
// longer one is left out of the hints.
const MaxToolTitle = 256

// EachListedToolHints is EachListedTool with the tool's annotations too:
// hints holds those of ToolHintNames the tool gives with their type (a
// title that is a string of at most MaxToolTitle bytes, a hint that is a
// boolean); others are left out. A tool whose annotations are ambiguous
// (ToolClassUnknown: "annotations" or one of the names given twice) has
// nil hints; one without annotations, an empty map.
func EachListedToolHints(body []byte, requestIDs map[string]string, fn func(name string, class ToolClass, hints map[string]any)) error {
	return eachListedToolObject(body, requestIDs, "annotations", func(name string, result []byte, a [2]int, twice bool, depth int) error {
		if twice {
			fn(name, ToolClassUnknown, nil)
			return nil
		}
		hints := map[string]any{}
		if a[0] >= 0 && result[a[0]] == '{' {
			h, dup, _, err := findMembers(result, a[0], depth, ToolHintNames[:]...)
			if err != nil {
				return err
			}
			if dup != "" {
				fn(name, ToolClassUnknown, nil)
				return nil
			}
			if h[0][0] >= 0 {
				if s, ok := stringValue(result, h[0][0], h[0][1]); ok && len(s) <= MaxToolTitle {
					hints["title"] = s
				}
			}
			for k := 1; k < len(ToolHintNames); k++ {
				if b := boolValue(result, h[k]); b != nil {
					hints[ToolHintNames[k]] = *b
				}
			}
		}
		fn(name, ClassifyTool(boolHint(hints, "readOnlyHint"), boolHint(hints, "destructiveHint")), hints)
		return nil
	})
}

// boolHint is the hint name of hints, nil when absent.
func boolHint(hints map[string]any, name string) *bool {
	if b, ok := hints[name].(bool); ok {
		return &b
	}
	return nil
}
