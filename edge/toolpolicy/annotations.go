package toolpolicy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"

	"github.com/mcpi-edge/caddy-mcpi/edge/carrier"
	"github.com/mcpi-edge/caddy-mcpi/mcp"
)

// Annotation-derived defaults: optional scopes per tool class, the
// class taken from the ToolAnnotations the upstream gives each tool in its
// tools/list answers.
//
// MCP annotations are hints, and the spec warns clients never to decide on
// annotations from untrusted servers. The edge acts on them only when the
// operator turns this on, and only on annotations of the upstream the
// operator put behind it, read from the tools/list answers that upstream
// gives to credentialed requests the edge admitted; nothing a client sends
// is learned, and anonymous callers teach nothing.
// The classes only replace tool_default, for tools no tool rule matches:
//
//   - an explicit tool rule (exact or glob) always wins;
//   - a tool whose annotations the edge has not seen yet (none of its
//     site's tools/list answers to a credentialed caller went through since
//     start or since the site was evicted, or the site lists more tools
//     than are kept) gets tool_default, deny unless the operator chose allow — never
//     the most permissive class;
//   - a class the operator gave no scopes for gets tool_default too.
//
// The class is part of the policy decision itself, so tools/list filtering
// (which asks the same decision for each listed tool, after learning that
// answer's annotations) and tools/call agree.

// ToolAnnotationsPolicy gives the scopes a tool no tool rule matches needs,
// by the class of its annotations in the upstream's tools/list answers:
//
//   - ReadOnly: readOnlyHint true and destructiveHint not true (the spec
//     gives destructiveHint meaning only when readOnlyHint is false);
//   - Destructive: otherwise, when destructiveHint is true or absent (its
//     spec default is true) — so a tool without annotations is destructive;
//   - Other: readOnlyHint false or absent and destructiveHint false.
//
// Every scope of the class must be granted. A class without scopes, a tool
// whose annotations the edge has not seen, and a tool with ambiguous
// annotations (a hint given twice) fall back to tool_default. An explicit
// tool rule always wins over the class.
type ToolAnnotationsPolicy struct {
	ReadOnly    []string `json:"read_only,omitempty"`
	Destructive []string `json:"destructive,omitempty"`
	Other       []string `json:"other,omitempty"`
}

// Validate checks the scopes of each class.
func (a *ToolAnnotationsPolicy) Validate() error {
	if a == nil {
		return nil
	}
	if len(a.ReadOnly) == 0 && len(a.Destructive) == 0 && len(a.Other) == 0 {
		return errors.New("mcpi: tool_annotations_policy gives no scopes for any class (read_only, destructive, other)")
	}
	for _, s := range [][]string{a.ReadOnly, a.Destructive, a.Other} {
		if slices.Contains(s, "") {
			return errors.New("mcpi: tool_annotations_policy: empty scope")
		}
	}
	return nil
}

// annotationPolicy is the runtime state of a ToolAnnotationsPolicy.
type annotationPolicy struct {
	// rules holds the scopes of each class as a rule (nil: the class has
	// no scopes), indexed by mcp.ToolClass.
	rules [mcp.ToolClassOther + 1]*mcp.ToolRule

	learned *learnedStore
}

// newAnnotationPolicy returns nil when c is nil and forRules is false: the
// annotations are learned for tool_annotations_policy's classes, and for
// the rules and the PDP (forRules), which read them as tool.annotations.
func newAnnotationPolicy(c *ToolAnnotationsPolicy, forRules bool) *annotationPolicy {
	a := &annotationPolicy{learned: newLearnedStore()}
	if c == nil {
		if !forRules {
			return nil
		}
		return a // no class has scopes: decide leaves every tool to tool_default
	}
	for class, scopes := range map[mcp.ToolClass][]string{
		mcp.ToolClassReadOnly:    c.ReadOnly,
		mcp.ToolClassDestructive: c.Destructive,
		mcp.ToolClassOther:       c.Other,
	} {
		if len(scopes) > 0 {
			a.rules[class] = &mcp.ToolRule{Pattern: "annotations:" + class.String(), Scopes: slices.Clone(scopes)}
		}
	}
	return a
}

// learn records the class of tool, at the site named host, from an
// upstream tools/list answer. Classes are kept per host: an upstream that
// answers per Host must not let one client's Host declare another site's
// tools read-only. See learnedStore for the bounds.
func (a *annotationPolicy) learn(host, tool string, class mcp.ToolClass, hints map[string]any) {
	a.learned.learn(host, tool, class, hints)
}

func (a *annotationPolicy) class(host, tool string) mcp.ToolClass {
	return a.learned.get(host, tool).class
}

// hints returns the annotations of tool at host, nil when not learned. The
// map is shared: read only.
func (a *annotationPolicy) hints(host, tool string) map[string]any {
	if a == nil {
		return nil
	}
	return a.learned.get(host, tool).hints
}

// decide is the class decision for a verified caller granted scopes, on a
// tool no tool rule matched; ok is false when the class does not apply
// (feature off, tool not learned, class without scopes): tool_default
// decides then. Decision.Rule is the class's rule, outside Policy.Rules; it
// never allows anonymous callers.
func (a *annotationPolicy) decide(host, tool string, granted []string) (_ mcp.Decision, ok bool) {
	if a == nil {
		return mcp.Decision{}, false
	}
	r := a.rules[a.class(host, tool)] // rules[ToolClassUnknown] is nil
	if r == nil {
		return mcp.Decision{}, false
	}
	var missing []string
	for _, s := range r.Scopes {
		if !slices.Contains(granted, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return mcp.Decision{Rule: r, Missing: missing, Reason: mcp.ReasonInsufficientScope}, true
	}
	return mcp.Decision{Allowed: true, Rule: r, Reason: mcp.ReasonGranted}, true
}

// learnFrom wraps w, the response filter of a request holding tools/list,
// so that the annotations of the tools/list answers (application/json or
// text/event-stream) are learned before the filter sees them: the filter
// then decides on the listed tools with their classes known. ids are the
// request's ids and methods. w is returned as is when the feature is off.
func (a *annotationPolicy) learnFrom(w http.ResponseWriter, host string, ids map[string]string, max int64) http.ResponseWriter {
	if a == nil || len(ids) == 0 {
		return w
	}
	return &annotationLearner{ResponseWriter: w, a: a, host: host, ids: ids, max: int(max)}
}

type learnerState uint8

const (
	lsNew  learnerState = iota
	lsOff               // nothing (more) to learn: bytes only pass on
	lsJSON              // copying an application/json body until it is complete
	lsSSE               // reading an event stream
)

// annotationLearner reads a copy of the response on its way to the filter.
// Every byte is passed on unchanged, after the annotations of the messages
// it completes were learned. What it cannot read (too large, compressed,
// not JSON-RPC) it does not learn from; the filter decides on it as it
// would without annotations.
type annotationLearner struct {
	http.ResponseWriter
	a    *annotationPolicy
	host string
	ids  map[string]string
	max  int

	state learnerState
	buf   []byte
	scan  jsonValueEnd
	sse   io.WriteCloser
}

func (l *annotationLearner) WriteHeader(code int) {
	if l.state == lsNew && (code < 100 || code >= 200 || code == http.StatusSwitchingProtocols) {
		l.state = lsOff
		hdr := l.Header()
		mt := carrier.MediaType(hdr.Get("Content-Type"))
		ce := hdr.Get("Content-Encoding")
		if code >= 200 && code < 300 && code != http.StatusNoContent && code != http.StatusResetContent &&
			code != http.StatusPartialContent && (ce == "" || ce == "identity") {
			switch {
			case mt == "text/event-stream":
				l.state = lsSSE
				l.sse = mcp.NewSSERewriter(io.Discard, l.learnEvent, mcp.WithMaxEventSize(l.max),
					mcp.WithOversizePassthrough(), mcp.WithFlush(func() error { return nil }))
			case carrier.IsJSONMediaType(mt):
				l.state = lsJSON
			}
		}
	}
	l.ResponseWriter.WriteHeader(code)
}

func (l *annotationLearner) Write(p []byte) (int, error) {
	if l.state == lsNew {
		l.WriteHeader(http.StatusOK)
	}
	switch l.state {
	case lsJSON:
		l.feedJSON(p)
	case lsSSE:
		if _, err := l.sse.Write(p); err != nil {
			l.state, l.sse = lsOff, nil
		}
	}
	return l.ResponseWriter.Write(p)
}

// feedJSON copies p until the JSON value is complete, then learns from it.
func (l *annotationLearner) feedJSON(p []byte) {
	end, bad := l.scan.feed(p)
	switch {
	case bad:
		l.state, l.buf = lsOff, nil
	case end >= 0:
		if len(l.buf)+end <= l.max {
			l.learnBody(append(l.buf, p[:end]...))
		}
		l.state, l.buf = lsOff, nil
	case len(l.buf)+len(p) > l.max:
		l.state, l.buf = lsOff, nil
	default:
		l.buf = append(l.buf, p...)
	}
}

func (l *annotationLearner) learnEvent(data []byte) ([]byte, error) {
	l.learnBody(data)
	return data, nil
}

// learnBody learns from one JSON-RPC body; one the edge cannot read is the
// filter's to refuse.
func (l *annotationLearner) learnBody(body []byte) {
	_ = mcp.EachListedToolHints(body, l.ids, func(tool string, class mcp.ToolClass, hints map[string]any) {
		l.a.learn(l.host, tool, class, hints)
	})
}

// Flush and FlushError pass on to the filter.
func (l *annotationLearner) Flush() { _ = l.FlushError() }

func (l *annotationLearner) FlushError() error {
	if l.state == lsNew {
		l.WriteHeader(http.StatusOK)
	}
	return http.NewResponseController(l.ResponseWriter).Flush()
}

// Hijack is refused: a hijacked connection would bypass the filter.
func (l *annotationLearner) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, http.ErrNotSupported
}

// Unwrap lets http.ResponseController reach the filter (and through it the
// underlying writer) for deadlines and full duplex.
func (l *annotationLearner) Unwrap() http.ResponseWriter { return l.ResponseWriter }

// Interface guards
var (
	_ http.Flusher  = (*annotationLearner)(nil)
	_ http.Hijacker = (*annotationLearner)(nil)
)
