package ldproof

// checkContexts refuses inline contexts: the credential's @context (and
// a Data Integrity proof's) must be a URL or a list of URLs, and no other
// member may hold an @context. JSON-LD does not allow aliasing @context, so
// no other member name can carry one.
func checkContexts(doc map[string]any) error {
	return contextsAt(doc, true)
}

// contextsAt checks the members of the credential (top) or of its proof.
func contextsAt(obj map[string]any, top bool) error {
	for k, m := range obj {
		var err error
		switch {
		case k == "@context":
			if !urlsOnly(m) {
				err = failf(ErrInlineContext, "in @context")
			}
		case top && k == "proof":
			if pf, ok := m.(map[string]any); ok {
				err = contextsAt(pf, false)
			} else {
				err = noContext(m)
			}
		default:
			err = noContext(m)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func noContext(v any) error {
	switch t := v.(type) {
	case map[string]any:
		for k, m := range t {
			if k == "@context" {
				return failf(ErrInlineContext, "in a nested @context")
			}
			if err := noContext(m); err != nil {
				return err
			}
		}
	case []any:
		for _, m := range t {
			if err := noContext(m); err != nil {
				return err
			}
		}
	}
	return nil
}

func urlsOnly(v any) bool {
	switch t := v.(type) {
	case string:
		return true
	case []any:
		for _, m := range t {
			if _, ok := m.(string); !ok {
				return false
			}
		}
		return true
	}
	return false
}
