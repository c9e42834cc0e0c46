package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// The error types of OpenAI's error shape that tfd answers with.
const (
	errInvalidRequest = "invalid_request_error"
	errServer         = "server_error"
)

// apiError is a failed request, answered in OpenAI's shape
// {"error":{"message","type","param","code"}} with its HTTP status.
type apiError struct {
	status  int
	message string
	typ     string
	param   string // the request field at fault; empty: null
	code    string // a stable machine-readable code; empty: null
	// retryAfter, when positive, is sent as the Retry-After header in seconds.
	retryAfter int
}

func (e *apiError) Error() string { return e.message }

// badRequest is a 400 about the field param (empty when no one field is at fault).
func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: errInvalidRequest, param: param, message: fmt.Sprintf(format, args...)}
}

// internalError is a 500 whose message says what failed; the server's log has the same line.
func internalError(format string, args ...any) *apiError {
	return &apiError{status: http.StatusInternalServerError, typ: errServer, code: "internal_error", message: fmt.Sprintf(format, args...)}
}

// errorBody is the JSON of an apiError; param and code are null when empty, as OpenAI sends them.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func (e *apiError) body() errorBody {
	var b errorBody
	b.Error.Message = e.message
	b.Error.Type = e.typ
	if e.param != "" {
		b.Error.Param = &e.param
	}
	if e.code != "" {
		b.Error.Code = &e.code
	}
	return b
}

// writeError answers the request with e.
func writeError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	WriteJSON(w, e.status, e.body())
}

// WriteMethodNotAllowed answers r, whose path takes only the method allowed, with 405.
func WriteMethodNotAllowed(w http.ResponseWriter, r *http.Request, allowed string) {
	w.Header().Set("Allow", allowed)
	writeError(w, &apiError{status: http.StatusMethodNotAllowed, typ: errInvalidRequest, code: "method_not_allowed",
		message: r.Method + " is not allowed on " + r.URL.Path + "; use " + allowed})
}

// WriteShuttingDown answers 503 shutting_down, with Retry-After: tfd is stopping.
func WriteShuttingDown(w http.ResponseWriter) { writeError(w, shuttingDown()) }

// WriteStopping answers a request that came while tfd stops: 503 with Retry-After, as
// {"status":"stopping"} on /health (what a monitor polls) and shutting_down elsewhere.
func WriteStopping(w http.ResponseWriter, r *http.Request) {
	e := shuttingDown()
	if r.URL.Path == "/health" {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
		WriteJSON(w, e.status, map[string]string{"status": "stopping"})
		return
	}
	writeError(w, e)
}

// WriteNoModel answers 503 no_model, with Retry-After, while no model is loaded; message says
// why.
func WriteNoModel(w http.ResponseWriter, message string) {
	writeError(w, &apiError{status: http.StatusServiceUnavailable, typ: errServer, code: "no_model", retryAfter: 30, message: message})
}

// WriteJSON answers with status and v as the JSON body.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body, _ = json.Marshal(internalError("daemon: encode response: %v", err).body())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}
