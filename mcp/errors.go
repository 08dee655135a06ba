package mcp

import (
	"errors"
	"fmt"
)

// Errors. Every error returned by this package wraps one of these, so callers
// map them with errors.Is (or with ErrorCode). Messages never quote message
// content: they end up in logs and in JSON-RPC error responses.
var (
	// ErrEmpty: the body holds nothing but whitespace (-32700).
	ErrEmpty = errors.New("mcp: empty body")
	// ErrParse: the input is not valid JSON (-32700).
	ErrParse = errors.New("mcp: invalid JSON")
	// ErrTooDeep: valid JSON nested deeper than MaxDepth (-32600).
	ErrTooDeep = errors.New("mcp: JSON nested too deeply")
	// ErrEmptyBatch: the body is the empty array "[]" (-32600, as the
	// JSON-RPC 2.0 specification requires).
	ErrEmptyBatch = errors.New("mcp: empty batch")
	// ErrNotObject: a message (the body, or a batch element) is not a JSON
	// object (-32600).
	ErrNotObject = errors.New("mcp: message is not a JSON object")
	// ErrInvalidMessage: a JSON object that is not a JSON-RPC 2.0 message:
	// "jsonrpc" is not "2.0", "method" is not a non-empty string, "id" is
	// not a string, number or null, "params" is not structured, a response
	// without "id" or with both or neither of "result" and "error", or one of
	// these members given twice (-32600).
	ErrInvalidMessage = errors.New("mcp: invalid JSON-RPC message")
	// ErrRequestAndResponse: a message with "method" and also "result" or
	// "error" (-32600). It is ErrInvalidMessage and ErrAmbiguous at once:
	// the edge reads neither a request nor a response in it, while SDKs
	// read one or the other (the Go SDK runs it as a request), so every
	// step that checks a body or its answer refuses it rather than pass on
	// what it could not read.
	ErrRequestAndResponse error = &kindError{
		msg:   `mcp: a message has "method" and also "result" or "error": send a request (method, params) or a response (result or error), not both in one message`,
		kinds: []error{ErrInvalidMessage, ErrAmbiguous},
	}
	// ErrInvalidParams: a tools/call whose params is not an object with a
	// single string "name" (-32602).
	ErrInvalidParams = errors.New("mcp: invalid tools/call params")
	// ErrDuplicateID: two requests of a batch have ids a server could take
	// for the same id (-32600); see CheckUniqueIDs.
	ErrDuplicateID = errors.New("mcp: request id repeated in the batch")
	// ErrInvalidToolsList: a tools/list result whose "tools" member is not
	// an array, or is given twice.
	ErrInvalidToolsList = errors.New("mcp: invalid tools/list result")
	// ErrEventTooLarge: an SSE event grew past the rewriter's size limit.
	ErrEventTooLarge = errors.New("mcp: SSE event too large")
	// ErrClosed: Write after Close on an SSE rewriter.
	ErrClosed = errors.New("mcp: SSE rewriter closed")
)

// kindError is a sentinel error that is also each of kinds (errors.Is).
type kindError struct {
	msg   string
	kinds []error
}

func (e *kindError) Error() string   { return e.msg }
func (e *kindError) Unwrap() []error { return e.kinds }

// MessageError says which message of a body was rejected, and why.
type MessageError struct {
	// Index of the message in the batch; -1 when the body is a single
	// message.
	Index int
	// Member is the offending member ("jsonrpc", "id", "method", "params",
	// "params.name", "result", "error"), or "" when the message as a whole
	// is at fault.
	Member string
	// Err is one of the package's sentinel errors.
	Err error
}

func (e *MessageError) Error() string {
	var where string
	if e.Index >= 0 {
		where = fmt.Sprintf(" (batch element %d", e.Index)
		if e.Member != "" {
			where += ", member " + e.Member
		}
		where += ")"
	} else if e.Member != "" {
		where = " (member " + e.Member + ")"
	}
	return e.Err.Error() + where
}

func (e *MessageError) Unwrap() error { return e.Err }

// JSON-RPC 2.0 error codes, for ErrorCode and ErrorResponse.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// ErrorCode maps an error from ParseMessages, CheckUniqueIDs or CheckFraming to the
// JSON-RPC error code the edge answers with, so the mapping lives in one
// place.
func ErrorCode(err error) int {
	switch {
	case errors.Is(err, ErrEmpty), errors.Is(err, ErrParse):
		return CodeParseError
	case errors.Is(err, ErrInvalidParams):
		return CodeInvalidParams
	case errors.Is(err, ErrHeaderMismatch):
		return CodeHeaderMismatch
	case errors.Is(err, ErrTooDeep), errors.Is(err, ErrEmptyBatch),
		errors.Is(err, ErrNotObject), errors.Is(err, ErrInvalidMessage),
		errors.Is(err, ErrDuplicateID), errors.Is(err, ErrAmbiguous):
		return CodeInvalidRequest
	default:
		return CodeInternalError
	}
}
