package mcp

import "encoding/json"

// ErrorResponseData is ErrorResponse with the error's data member: what a
// client reads to act on the error (a reason, when to retry).
func ErrorResponseData(id json.RawMessage, code int, message string, data any) []byte {
	var r rpcError
	r.JSONRPC, r.ID = "2.0", responseID(id)
	r.Error.Code, r.Error.Message, r.Error.Data = code, message, data
	b, _ := marshal(r)
	return b
}
