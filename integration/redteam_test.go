package integration

import (
	"bytes"
	"context"
	"net/http"
	"testing"
)

// rawPost POSTs body as is (JSON content type, the MCP Accept header) with
// hdr added verbatim, for bodies json.Marshal cannot produce (duplicate
// members, batches with repeated ids, odd spellings).
func rawPost(ctx context.Context, t *testing.T, h *harness, path, body string, hdr http.Header) rpcResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+path, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header[k] = v
	}
	return h.do(req)
}
