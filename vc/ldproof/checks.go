package ldproof

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/piprate/json-gold/ld"
)

// Limits on blank nodes, against URDNA2015's exponential worst case:
// canonicalizing a complete graph of n indistinguishable blank nodes takes
// about 8 ms for n = 5, 60 ms for 6, 1.2 s for 7 and 11 s for 8 with
// json-gold on one core. Real credentials have a handful of blank nodes,
// and indistinguishable ones only as identical siblings, which are cheap.
const (
	maxBlankNodes = 512
	// maxTwinComponent bounds a connected group of blank nodes that have
	// the same first-degree hash as another blank node: URDNA2015 hashes
	// such nodes by trying the permutations of their neighbours.
	maxTwinComponent = 4
)

var languageTag = regexp.MustCompile(`^[a-zA-Z]{1,8}(-[a-zA-Z0-9]{1,8})*$`)

// checkExpanded refuses what RDF conversion would silently drop from the
// expanded document, so that the signed N-Quads cover all of the JSON:
// relative IRIs as node ids, types, properties or datatypes, blank node
// properties, invalid language tags and @index values. (Properties that
// expand to nothing are refused by json-gold's safe mode.)
func checkExpanded(v any) error {
	return (&expandedChecker{iris: map[string]bool{}}).check(v)
}

// expandedChecker memoizes IRI checks: properties and types repeat, and
// json-gold's http(s) IRI test is a costly regular expression.
type expandedChecker struct {
	iris map[string]bool
}

func (c *expandedChecker) absoluteIRI(s string) bool {
	ok, seen := c.iris[s]
	if !seen {
		ok = absoluteIRI(s)
		c.iris[s] = ok
	}
	return ok
}

func (c *expandedChecker) nodeIRI(s string) bool {
	return strings.HasPrefix(s, "_:") && len(s) > 2 || c.absoluteIRI(s)
}

func (c *expandedChecker) check(v any) error {
	switch t := v.(type) {
	case []any:
		for _, m := range t {
			if err := c.check(m); err != nil {
				return err
			}
		}
	case map[string]any:
		for k, m := range t {
			if err := c.member(t, k, m); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *expandedChecker) member(obj map[string]any, k string, m any) error {
	_, isValue := obj["@value"]
	switch k {
	case "@id":
		s, _ := m.(string)
		if !c.nodeIRI(s) {
			return failf(ErrMalformed, "an id is not an absolute IRI")
		}
	case "@type":
		if isValue {
			s, _ := m.(string)
			if s != "@json" && !c.absoluteIRI(s) {
				return failf(ErrMalformed, "a datatype is not an absolute IRI")
			}
			return nil
		}
		types, _ := m.([]any)
		for _, ty := range types {
			s, _ := ty.(string)
			if !c.nodeIRI(s) {
				return failf(ErrMalformed, "a type is not defined by the contexts")
			}
		}
	case "@language":
		s, _ := m.(string)
		if !languageTag.MatchString(s) {
			return failf(ErrMalformed, "invalid language tag")
		}
	case "@index":
		return failf(ErrMalformed, "@index values are not signed")
	case "@value", "@direction":
	case "@list", "@set", "@graph", "@included":
		return c.check(m)
	case "@reverse":
		rev, _ := m.(map[string]any)
		for p, vals := range rev {
			if !c.absoluteIRI(p) {
				return failf(ErrMalformed, "a reverse property is not an absolute IRI")
			}
			if err := c.check(vals); err != nil {
				return err
			}
		}
	default:
		if strings.HasPrefix(k, "@") {
			return nil
		}
		if !c.absoluteIRI(k) {
			return failf(ErrMalformed, "a property is not an absolute IRI")
		}
		return c.check(m)
	}
	return nil
}

// absoluteIRI mirrors json-gold's test (url.Parse and IsAbs) and its
// validity check for http(s) IRIs, without the blank node exception.
func absoluteIRI(s string) bool {
	if s == "" || strings.HasPrefix(s, "_:") {
		return false
	}
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() {
		return false
	}
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		return ld.IsURL(s)
	}
	return true
}

// checkBlankNodes bounds the blank nodes of the dataset and refuses
// graphs on which URDNA2015 would take exponential time (see
// maxTwinComponent). Nodes are grouped by their first-degree quads, as
// URDNA2015 groups them by hash; twins are nodes sharing a group.
func checkBlankNodes(ds *ld.RDFDataset) error {
	mentions := map[string][]*ld.Quad{}
	for _, quads := range ds.Graphs {
		for _, q := range quads {
			for _, n := range []ld.Node{q.Subject, q.Predicate, q.Object, q.Graph} {
				if b, ok := n.(*ld.BlankNode); ok {
					l := mentions[b.Attribute]
					if len(l) == 0 || l[len(l)-1] != q {
						mentions[b.Attribute] = append(l, q)
					}
				}
			}
		}
	}
	if len(mentions) > maxBlankNodes {
		return failf(ErrMalformed, "more than %d blank nodes", maxBlankNodes)
	}
	groups := map[string][]string{}
	for id, quads := range mentions {
		lines := make([]string, len(quads))
		for i, q := range quads {
			lines[i] = firstDegree(q, id)
		}
		sort.Strings(lines)
		key := strings.Join(lines, "\n")
		groups[key] = append(groups[key], id)
	}
	twin := map[string]bool{}
	for _, ids := range groups {
		if len(ids) > 1 {
			for _, id := range ids {
				twin[id] = true
			}
		}
	}
	if len(twin) <= maxTwinComponent {
		return nil
	}
	// Connected components of the twins, linked through shared quads.
	seen := map[string]bool{}
	for id := range twin {
		if seen[id] {
			continue
		}
		size, stack := 0, []string{id}
		seen[id] = true
		for len(stack) > 0 {
			cur := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			size++
			if size > maxTwinComponent {
				return failf(ErrMalformed, "more than %d interlinked indistinguishable blank nodes", maxTwinComponent)
			}
			for _, q := range mentions[cur] {
				for _, n := range []ld.Node{q.Subject, q.Object, q.Graph} {
					if b, ok := n.(*ld.BlankNode); ok && twin[b.Attribute] && !seen[b.Attribute] {
						seen[b.Attribute] = true
						stack = append(stack, b.Attribute)
					}
				}
			}
		}
	}
	return nil
}

// firstDegree serializes q as URDNA2015's first-degree hash sees it from
// blank node id: id as _:a, other blank nodes as _:z.
func firstDegree(q *ld.Quad, id string) string {
	var sb strings.Builder
	for _, n := range []ld.Node{q.Subject, q.Predicate, q.Object, q.Graph} {
		switch t := n.(type) {
		case nil:
			sb.WriteString("-")
		case *ld.BlankNode:
			if t.Attribute == id {
				sb.WriteString("_:a")
			} else {
				sb.WriteString("_:z")
			}
		case *ld.IRI:
			fmt.Fprintf(&sb, "<%q>", t.Value)
		case *ld.Literal:
			fmt.Fprintf(&sb, "%q^^%q@%q", t.Value, t.Datatype, t.Language)
		default:
			fmt.Fprintf(&sb, "?%q", n.GetValue())
		}
		sb.WriteByte(' ')
	}
	return sb.String()
}
