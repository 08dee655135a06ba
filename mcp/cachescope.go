package mcp

// Cache scope of list results (MCP 2026-07-28): a list result carries ttlMs
// and cacheScope, and "public" (the default when absent) lets any client or
// shared cache serve it to anyone. A tool list the edge filtered for one
// caller is that caller's alone: it leaves with cacheScope "private", its
// ttlMs kept.

const (
	memberCacheScope = "cacheScope"
	scopePrivate     = `"private"`
)

// markPrivate sets cacheScope to "private" in the list result result (an
// object; depth as for filterToolsList). Every member whose name is
// cacheScope in any letter case gets the value, so that no decoder reads
// "public" from a twin. Without the member, it is added in the 2026 era
// (where absent means public) and left out before, so a 2025 answer stays
// as it was. changed reports a rewrite.
func markPrivate(result []byte, depth int, era Era) (out []byte, changed bool, err error) {
	i := skipSpace(result, 0)
	if i == len(result) || result[i] != '{' {
		return result, false, nil
	}
	var spans [][2]int
	if _, err := eachMember(result, i, depth+1, func(m member) error {
		if string(m.key) == memberCacheScope || foldsTo(m.key, memberCacheScope) {
			spans = append(spans, [2]int{m.start, m.end})
		}
		return nil
	}); err != nil {
		return nil, false, err
	}
	if len(spans) == 0 {
		if era < Era2026 {
			return result, false, nil
		}
		out = make([]byte, 0, len(result)+len(memberCacheScope)+len(scopePrivate)+4)
		out = append(out, result[:i+1]...)
		out = append(out, `"`+memberCacheScope+`":`+scopePrivate...)
		if j := skipSpace(result, i+1); j < len(result) && result[j] != '}' {
			out = append(out, ',')
		}
		return append(out, result[i+1:]...), true, nil
	}
	last := 0
	for _, s := range spans {
		if string(result[s[0]:s[1]]) == scopePrivate {
			continue
		}
		out = append(out, result[last:s[0]]...)
		out = append(out, scopePrivate...)
		last = s[1]
	}
	if out == nil {
		return result, false, nil
	}
	return append(out, result[last:]...), true, nil
}
