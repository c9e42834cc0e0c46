package daemon

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
	writeJSON(w, e.status, e.body())
}

// writeJSON answers with status and v as the JSON body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body, _ = json.Marshal(internalError("daemon: encode response: %v", err).body())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}
