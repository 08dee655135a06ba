package level3

import (
	"net/http"
)

// Outcome is what the handler is to do with a request after Serve.
type Outcome int

const (
	// NotMine: no handshake traffic; the request goes on through the
	// pipeline.
	NotMine Outcome = iota
	// Answered: write Result.Answer; the request goes no further.
	Answered
	// Refused: Result.Err is why the call could not be read (the body:
	// too large, unreadable); the handler refuses it like any request.
	Refused
	// PassOn: a legacy KYA handshake under legacy_handshake pass, to hand
	// on as it is, without identity.
	PassOn
)

// Result is the step's decision on a request, for the handler to carry
// out.
type Result struct {
	Outcome Outcome
	// Answer is the complete answer (Answered).
	Answer *Answer
	// Err is the refusal's cause (Refused).
	Err error
}

// Answer is a response the step decided on: its own JSON or JSON-RPC
// answer, or the upstream's answer to a forwarded call, read before the
// agent gets it. It is small (a handshake answer, at most
// handshake.MaxResponse) and held whole.
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// answerWriter collects the answer of handshake.Calls, which writes to an
// http.ResponseWriter.
type answerWriter struct {
	a Answer
}

func newAnswer() *answerWriter { return &answerWriter{a: Answer{Header: make(http.Header)}} }

func (w *answerWriter) Header() http.Header { return w.a.Header }

func (w *answerWriter) WriteHeader(status int) {
	if w.a.Status == 0 {
		w.a.Status = status
	}
}

func (w *answerWriter) Write(p []byte) (int, error) {
	if w.a.Status == 0 {
		w.a.Status = http.StatusOK
	}
	w.a.Body = append(w.a.Body, p...)
	return len(p), nil
}

// answer is what was written; nil when nothing was.
func (w *answerWriter) answer() *Answer {
	if w.a.Status == 0 {
		return nil
	}
	return &w.a
}
