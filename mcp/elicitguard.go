package mcp

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/mcpi-edge/caddy-mcpi/internal/jsonscan"
)

// URL-mode elicitations are consent links too: the handshake-action guard
// (https only, the tool endpoint's registrable domain or an allowed host,
// context_did added) applies to the url of every URL-mode elicitation/create
// an upstream sends: in the inputRequests of a 2026 input-required result,
// and as a server-to-client request on a 2025 SSE stream. Otherwise a
// server could send the user to a page the same link as an authUrl may not
// reach.

// CheckResponseBody checks the results and server requests in a JSON-RPC
// body (a single message or a batch; an application/json answer or one SSE
// event's data) whatever request they answer: every result for URL-mode
// elicitations in inputRequests (MCP 2026 allows an input-required result on
// tools/call, prompts/get and resources/read), every server-to-client
// elicitation/create (2025: it may ride any stream), the elicitations of
// every error answer (URLElicitationRequiredError, eliciterror.go), and the
// results of a
// tools/call, or of an id not in requestIDs (a replayed stream answers
// requests this edge never saw) or mapped to "" (requests of different
// methods shared it), for handshake actions too (EnforceActions).
// requestIDs maps IDKey(id) to the request's method (see RequestMethods).
// In enforce mode a refused tool result becomes a tool error, any other
// refused result a JSON-RPC error.
//
// An answer that may hold what the guard reads is read strictly: member
// names repeated or differing only in letter case (which case-insensitive
// clients merge) are an error, as is a body that is not JSON-RPC. It returns
// the body, rewritten where needed (the input itself when unchanged), and
// every issue found. On error the body could not be checked and, in enforce
// mode, must not be forwarded.
func CheckResponseBody(body []byte, requestIDs map[string]string, opts ActionOptions, mode ActionMode) ([]byte, []ActionIssue, error) {
	return checkResponseBody(body, requestIDs, opts, mode, false)
}

// CheckReadResponseBody is CheckResponseBody for a body that
// FilterResponseBodyRead reported read (ParseMessages accepted it): when
// nothing in it can be an action, it is not parsed a second time.
func CheckReadResponseBody(body []byte, requestIDs map[string]string, opts ActionOptions, mode ActionMode) ([]byte, []ActionIssue, error) {
	return checkResponseBody(body, requestIDs, opts, mode, true)
}

// checkResponseBody is CheckResponseBody; read: ParseMessages accepted body.
func checkResponseBody(body []byte, requestIDs map[string]string, opts ActionOptions, mode ActionMode, read bool) ([]byte, []ActionIssue, error) {
	if mode == ActionsOff {
		return body, nil, nil
	}
	if !mayHoldGuarded(body) {
		if read {
			return body, nil, nil
		}
		// Nothing to check in it, but it must still be JSON-RPC.
		if err := checkMessages(body); err != nil {
			return nil, nil, err
		}
		return body, nil, nil
	}
	msgs, _, err := ParseMessages(body)
	if err != nil {
		return nil, nil, err
	}
	if err := checkStrict(body, msgs); err != nil {
		return nil, nil, err
	}
	var all []ActionIssue
	out, err := guardResults(body, msgs, func(m *Message, depth int) ([]byte, bool, bool, error) {
		// "" is an id that requests of different methods shared: unknown.
		if method := requestIDs[IDKey(m.ID)]; method != "" && method != MethodToolsCall {
			res, issues, changed, err := checkInputRequests(m.Result, opts, depth)
			all = append(all, issues...)
			if err == nil && mode == ActionsEnforce && len(issues) > 0 {
				return withheldResult(m.ID, issues), true, true, nil
			}
			return res, changed && len(issues) == 0, false, err
		}
		res, issues, changed, err := enforceActions(m.Result, opts, mode, depth)
		all = append(all, issues...)
		return res, changed, false, err
	})
	if err != nil {
		return nil, nil, err
	}
	if hasErrorAnswer(msgs) {
		var issues []ActionIssue
		if out, issues, err = checkElicitErrors(out, opts, mode); err != nil {
			return nil, nil, err
		}
		all = append(all, issues...)
	}
	if hasElicitRequest(msgs) {
		var issues []ActionIssue
		if out, issues, err = checkElicitRequests(out, opts, mode); err != nil {
			return nil, nil, err
		}
		all = append(all, issues...)
	}
	return out, all, nil
}

// checkInputRequests checks the URL-mode elicitations in result.inputRequests
// (result an object at depth as for checkActions); it returns the result,
// rewritten when context_did was added, and the issues.
func checkInputRequests(result []byte, opts ActionOptions, depth int) ([]byte, []ActionIssue, bool, error) {
	i := skipSpace(result, 0)
	if i == len(result) || result[i] != '{' {
		return result, nil, false, nil
	}
	f, dup, _, err := findStrict(result, i, depth+1, "inputRequests")
	if err != nil {
		return nil, nil, false, err
	}
	if dup != "" {
		return result, []ActionIssue{{Code: IssueAmbiguous, Field: "inputRequests", Detail: "member given twice (in some letter case)"}}, false, nil
	}
	irs := f[0][0]
	if irs < 0 || result[irs] != '{' {
		return result, nil, false, nil
	}
	var repls []splice
	var issues []ActionIssue
	_, err = eachMember(result, irs, depth+2, func(m member) error {
		if result[m.start] != '{' {
			return nil
		}
		rf, rdup, _, err := findStrict(result, m.start, depth+3, "method", "params")
		if err != nil {
			return err
		}
		field := "inputRequests." + string(m.key)
		// Before the method is read: a client folding "Method" into
		// method may see an elicitation where an exact reader sees none.
		if rdup != "" {
			issues = append(issues, ActionIssue{Code: IssueAmbiguous, Field: field + "." + rdup, Detail: "member given twice (in some letter case)"})
			return nil
		}
		if method, _ := stringValue(result, rf[0][0], rf[0][1]); method != MethodElicit {
			return nil
		}
		ps := rf[1][0]
		if ps < 0 || result[ps] != '{' {
			return nil
		}
		out, is, changed, err := checkURLElicitation(result[ps:rf[1][1]], depth+4, opts, false)
		if err != nil {
			return err
		}
		for k := range is {
			is[k].Field = field + ".params." + is[k].Field
		}
		issues = append(issues, is...)
		if changed {
			repls = append(repls, splice{ps, rf[1][1], out})
		}
		return nil
	})
	if err != nil {
		return nil, nil, false, err
	}
	if len(repls) == 0 || len(issues) > 0 {
		return result, issues, false, nil
	}
	return applySplices(result, repls), nil, true, nil
}

// splice replaces d[s:e] by b.
type splice struct {
	s, e int
	b    []byte
}

// applySplices returns d with each of repls (in order, not overlapping)
// applied.
func applySplices(d []byte, repls []splice) []byte {
	var out []byte
	last := 0
	for _, r := range repls {
		out = append(out, d[last:r.s]...)
		out = append(out, r.b...)
		last = r.e
	}
	return append(out, d[last:]...)
}

// checkURLElicitation checks the params object of one elicitation/create
// (depth: its nesting level): a URL-mode one (mode "url", or a url with a
// mode other than "form", as SDKs infer) needs a url the guard allows. A valid url gets
// context_did when opts.UserDID is set. Form-mode params pass untouched,
// except where every elicitation is URL mode (onlyURL: the list of a
// URLElicitationRequiredError, which clients open without reading mode).
func checkURLElicitation(p []byte, depth int, opts ActionOptions, onlyURL bool) ([]byte, []ActionIssue, bool, error) {
	var mode, raw [2]int
	mode, raw = [2]int{-1, -1}, [2]int{-1, -1}
	var amb string
	if _, err := eachMember(p, 0, depth, func(m member) error {
		switch {
		case string(m.key) == "mode" && mode[0] < 0:
			mode = [2]int{m.start, m.end}
		case string(m.key) == "url" && raw[0] < 0:
			raw = [2]int{m.start, m.end}
		case foldsTo(m.key, "mode"), foldsTo(m.key, "url"):
			amb = strings.ToLower(string(m.key))
		}
		return nil
	}); err != nil {
		return nil, nil, false, err
	}
	if amb != "" {
		return p, []ActionIssue{{Action: "elicitation", Code: IssueAmbiguous, Field: amb, Detail: "member given twice (in some letter case)"}}, false, nil
	}
	// Form mode only when mode says "form", or when there is no url and
	// mode is not "url": clients infer URL mode from a url, and JavaScript
	// ones take a falsy mode ("", null) for an absent one.
	m, hasMode := stringValue(p, mode[0], mode[1])
	if (hasMode && m == "form" && !(onlyURL && raw[0] >= 0)) || (raw[0] < 0 && (!hasMode || m != "url")) {
		return p, nil, false, nil // form mode
	}
	u, ok := stringValue(p, raw[0], raw[1])
	if !ok {
		return p, []ActionIssue{{Action: "elicitation", Code: IssueMalformed, Field: "url", Detail: "missing or not a string"}}, false, nil
	}
	if is := opts.checkAuthURL(u); is != nil {
		is.Action, is.Field = "elicitation", "url"
		return p, []ActionIssue{*is}, false, nil
	}
	if opts.UserDID == "" {
		return p, nil, false, nil
	}
	enc, err := marshal(setQuery(u, [][2]string{{"context_did", opts.UserDID}}))
	if err != nil {
		return nil, nil, false, err
	}
	out := make([]byte, 0, len(p)-(raw[1]-raw[0])+len(enc))
	out = append(out, p[:raw[0]]...)
	out = append(out, enc...)
	return append(out, p[raw[1]:]...), nil, true, nil
}

// withheldElicitation replaces a 2025 server-to-client elicitation/create
// whose URL the guard refused: the client gets a warning log notification
// instead (the server's request then times out, as one a client declines
// to show).
func withheldElicitation(issues []ActionIssue) []byte {
	parts := make([]string, len(issues))
	for k, is := range issues {
		parts[k] = is.String()
	}
	b, _ := marshal(map[string]any{
		"jsonrpc": "2.0",
		"method":  "notifications/message",
		"params": map[string]any{
			"level":  "warning",
			"logger": "mcpi-edge",
			"data":   "The MCP-I edge withheld an elicitation request of the server: " + strings.Join(parts, "; "),
		},
	})
	return b
}

// checkElicitRequests applies mode to the server-to-client
// elicitation/create requests of body (a 2025 SSE event's data): enforce
// replaces a refused one by withheldElicitation, a valid one gets
// context_did. It returns body itself when nothing changed.
func checkElicitRequests(body []byte, opts ActionOptions, mode ActionMode) ([]byte, []ActionIssue, error) {
	return rewriteMessages(body, func(m *Message, depth int) (*splice, []ActionIssue, error) {
		if m.Method != MethodElicit || len(m.Params) == 0 || m.Params[0] != '{' {
			return nil, nil, nil
		}
		// Params is a slice of body: its offset is what the capacities say.
		ps := cap(body) - cap(m.Params)
		np, issues, changed, err := checkURLElicitation(m.Params, depth+1, opts, false)
		switch {
		case err != nil:
			return nil, nil, err
		case len(issues) > 0 && mode == ActionsEnforce:
			return &splice{m.start, m.end, withheldElicitation(issues)}, issues, nil
		case changed && len(issues) == 0:
			return &splice{ps, ps + len(m.Params), np}, issues, nil
		}
		return nil, issues, nil
	})
}

// rewriteMessages parses body and calls fn on each message, with the
// nesting depth of the message's container; it applies the splices fn
// returns (offsets into body) and gathers the issues. It returns body
// itself when nothing changed.
func rewriteMessages(body []byte, fn func(m *Message, depth int) (*splice, []ActionIssue, error)) ([]byte, []ActionIssue, error) {
	msgs, _, err := ParseMessages(body)
	if err != nil {
		return nil, nil, err
	}
	depth := 1
	if i := skipSpace(body, 0); i < len(body) && body[i] == '[' {
		depth = 2
	}
	var repls []splice
	var all []ActionIssue
	for k := range msgs {
		r, issues, err := fn(&msgs[k], depth)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, issues...)
		if r != nil {
			repls = append(repls, *r)
		}
	}
	if repls == nil {
		return body, all, nil
	}
	return applySplices(body, repls), all, nil
}

// hasElicitRequest reports whether msgs hold a server-to-client
// elicitation/create (2025 era).
func hasElicitRequest(msgs []Message) bool {
	for _, m := range msgs {
		if m.Method == MethodElicit {
			return true
		}
	}
	return false
}

// guardedWords are the member names and method the guard looks for
// (handshakeAction, inputRequests, elicitation/create), lower-cased.
var guardedWords = [...]string{"handshakeaction", "inputrequests", "elicitation"}

// foldPartners are the UTF-8 runes that lenient decoders fold into ASCII
// letters (jsonkey.Fold): İ and ı into i, ſ into s, the Kelvin sign into k.
var foldPartners = [...]string{"\u0130", "\u0131", "\u017f", "\u212a"}

// mayHoldGuarded reports whether body may hold a handshake action, an
// inputRequests member or an elicitation/create, in any letter case, so that
// answers that cannot carry one (most) skip the strict reading. Each word
// the guard reads starts a JSON string (a member name, or the method value),
// so only the bytes after a quote are compared: IndexByte skips the rest
// fast. A JSON escape or a rune that folds into an ASCII letter may spell a
// word in disguise anywhere: such a body is read.
func mayHoldGuarded(body []byte) bool {
	if bytes.Contains(body, []byte(`\u`)) {
		return true
	}
	for _, p := range foldPartners {
		if bytes.Contains(body, []byte(p)) {
			return true
		}
	}
	for i := 0; ; {
		q := bytes.IndexByte(body[i:], '"')
		if q < 0 || i+q+1 >= len(body) {
			return false
		}
		i += q + 1
		c := body[i] | 0x20
		if guardFirst[c] && hasFoldedPrefix(body[i:], guardedWords[guardWord[c]]) {
			return true
		}
	}
}

// guardFirst marks the (lower-case) first letters of guardedWords, and
// guardWord gives the index of the word starting with each.
var guardFirst, guardWord = func() (first [256]bool, word [256]int) {
	for k, w := range guardedWords {
		first[w[0]], word[w[0]] = true, k
	}
	return first, word
}()

// hasFoldedPrefix: b starts with w (lower-case ASCII letters) in any ASCII
// letter case.
func hasFoldedPrefix(b []byte, w string) bool {
	if len(b) < len(w) {
		return false
	}
	for k := 0; k < len(w); k++ {
		if b[k]|0x20 != w[k] {
			return false
		}
	}
	return true
}

// checkStrict refuses an answer that case-insensitive clients could read
// otherwise than the guard: a member name repeated in some letter case in
// any object (jsonscan.CheckMembers), or a message member that is a case
// variant of a JSON-RPC member ("Method" alone is "method" to encoding/json,
// and no member at all to the guard): the request side's rule
// (ParseStrict), applied to answers. msgs are body's messages.
func checkStrict(body []byte, msgs []Message) error {
	if err := jsonscan.CheckMembers(body); err != nil {
		return fmt.Errorf("mcp: answer read strictly: %w", err)
	}
	if Confusable(msgs) {
		return ErrAmbiguous
	}
	return nil
}

// findStrict is findMembers that also counts a case variant of a name
// ("Params", "paramſ") as a repeat: dup names the member whose name a
// lenient decoder could read in two places, or in one the guard does not.
func findStrict(d []byte, i, depth int, names ...string) (found spans, dup string, end int, err error) {
	found = notFound(names)
	end, err = eachMember(d, i, depth, func(m member) error {
		found.add(m, names, &dup)
		if dup != "" {
			return nil
		}
		for _, n := range names {
			if string(m.key) != n && foldsTo(m.key, n) {
				dup = n
			}
		}
		return nil
	})
	return found, dup, end, err
}

// guardResults calls fn on every response with a result and splices what
// it changed back into body: the result, or with whole the entire message
// (a result replaced by a JSON-RPC error). fn gets the nesting depth of the
// container holding the result. body is returned as is when nothing
// changed.
func guardResults(body []byte, msgs []Message, fn func(m *Message, depth int) (out []byte, changed, whole bool, err error)) ([]byte, error) {
	depth := 1
	if i := skipSpace(body, 0); i < len(body) && body[i] == '[' {
		depth = 2
	}
	var out []byte
	last := 0
	for k := range msgs {
		m := &msgs[k]
		if m.Result == nil {
			continue
		}
		res, changed, whole, err := fn(m, depth)
		if err != nil {
			return nil, err
		}
		if !changed {
			continue
		}
		s, e := m.start+m.resultStart, m.start+m.resultEnd
		if whole {
			s, e = m.start, m.end
		}
		if out == nil {
			out = make([]byte, 0, len(body)+len(res)-(e-s))
		}
		out = append(out, body[last:s]...)
		out = append(out, res...)
		last = e
	}
	if out == nil {
		return body, nil
	}
	return append(out, body[last:]...), nil
}

// withheldResult is the JSON-RPC error that replaces a result other than a
// tool result (prompts/get, resources/read, ...) whose URL elicitation the
// guard refused: such results have no error form of their own.
func withheldResult(id []byte, issues []ActionIssue) []byte {
	parts := make([]string, len(issues))
	for k, is := range issues {
		parts[k] = is.String()
	}
	return ErrorResponse(id, CodeInternalError, "mcpi: the edge withheld this result: its URL elicitation failed validation: "+strings.Join(parts, "; "))
}
