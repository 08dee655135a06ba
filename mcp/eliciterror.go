package mcp

import (
	"strconv"
	"strings"
)

// MCP 2025-11-25's URLElicitationRequiredError (error code -32042) answers a
// request with the URL-mode elicitations the user must complete first, in
// error.data.elicitations: each is the params of a URL-mode
// elicitation/create, a consent link as much as an authUrl. The URL guard
// (https only, the tool endpoint's domain or an allowed host, context_did
// added) applies to each, and to the same list in any error answer: a
// client may act on the list whatever the code, and guarding it costs
// nothing to an honest server.

// CodeURLElicitationRequired is URLElicitationRequiredError's code.
const CodeURLElicitationRequired = -32042

// hasErrorAnswer reports whether msgs hold an error response.
func hasErrorAnswer(msgs []Message) bool {
	for _, m := range msgs {
		if m.Error != nil {
			return true
		}
	}
	return false
}

// checkElicitErrors applies mode to the elicitations of the error answers
// of body: enforce replaces an answer holding a refused one by
// withheldError, a valid one gets context_did (when opts.UserDID is set).
// It returns body itself when nothing changed.
func checkElicitErrors(body []byte, opts ActionOptions, mode ActionMode) ([]byte, []ActionIssue, error) {
	return rewriteMessages(body, func(m *Message, depth int) (*splice, []ActionIssue, error) {
		if len(m.Error) == 0 || m.Error[0] != '{' {
			return nil, nil, nil
		}
		// Error is a slice of body: its offset is what the capacities say.
		es := cap(body) - cap(m.Error)
		ne, issues, changed, err := checkErrorElicitations(m.Error, depth+1, opts)
		switch {
		case err != nil:
			return nil, nil, err
		case len(issues) > 0 && mode == ActionsEnforce:
			return &splice{m.start, m.end, withheldError(m.ID, issues)}, issues, nil
		case changed && len(issues) == 0:
			return &splice{es, es + len(m.Error), ne}, issues, nil
		}
		return nil, issues, nil
	})
}

// checkErrorElicitations checks error.data.elicitations of the error object
// e (at nesting level depth). Names are read strictly: "Data" or
// "Elicitations" beside (or instead of) the exact name is an ambiguous
// issue, since a lenient client may read the list there.
func checkErrorElicitations(e []byte, depth int, opts ActionOptions) ([]byte, []ActionIssue, bool, error) {
	f, dup, _, err := findStrict(e, 0, depth, "data")
	if err != nil {
		return nil, nil, false, err
	}
	if dup != "" {
		return e, []ActionIssue{{Action: "elicitation", Code: IssueAmbiguous, Field: "error.data", Detail: "member given twice (in some letter case)"}}, false, nil
	}
	ds := f[0][0]
	if ds < 0 || e[ds] != '{' {
		return e, nil, false, nil
	}
	g, dup, _, err := findStrict(e, ds, depth+1, "elicitations")
	if err != nil {
		return nil, nil, false, err
	}
	if dup != "" {
		return e, []ActionIssue{{Action: "elicitation", Code: IssueAmbiguous, Field: "error.data.elicitations", Detail: "member given twice (in some letter case)"}}, false, nil
	}
	as := g[0][0]
	if as < 0 || e[as] != '[' {
		return e, nil, false, nil
	}
	var repls []splice
	var issues []ActionIssue
	_, err = eachElement(e, as, depth+2, func(idx, start, end int) error {
		if e[start] != '{' {
			return nil
		}
		out, is, changed, err := checkURLElicitation(e[start:end], depth+3, opts, true)
		if err != nil {
			return err
		}
		for k := range is {
			is[k].Field = "error.data.elicitations[" + strconv.Itoa(idx) + "]." + is[k].Field
		}
		issues = append(issues, is...)
		if changed {
			repls = append(repls, splice{start, end, out})
		}
		return nil
	})
	if err != nil {
		return nil, nil, false, err
	}
	if len(repls) == 0 || len(issues) > 0 {
		return e, issues, false, nil
	}
	return applySplices(e, repls), nil, true, nil
}

// withheldError is the JSON-RPC error that replaces an error answer whose
// URL elicitation the guard refused: still an error, now one that sends
// the user nowhere.
func withheldError(id []byte, issues []ActionIssue) []byte {
	parts := make([]string, len(issues))
	for k, is := range issues {
		parts[k] = is.String()
	}
	return ErrorResponse(id, CodeInternalError, "mcpi: the edge withheld this error answer: its URL elicitation failed validation: "+strings.Join(parts, "; "))
}
