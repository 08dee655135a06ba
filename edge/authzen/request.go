package authzen

// Request is an Access Evaluation request. Properties and Context hold
// JSON values; encoding/json writes map keys sorted, so the same request
// always has the same bytes, which the decision cache is keyed by.
type Request struct {
	Subject  Entity         `json:"subject"`
	Action   Action         `json:"action"`
	Resource Entity         `json:"resource"`
	Context  map[string]any `json:"context,omitempty"`
}

// Entity is a subject or a resource: type and id are required by the
// API.
type Entity struct {
	Type       string         `json:"type"`
	ID         string         `json:"id"`
	Properties map[string]any `json:"properties,omitempty"`
}

// Action is what the subject would do.
type Action struct {
	Name       string         `json:"name"`
	Properties map[string]any `json:"properties,omitempty"`
}
