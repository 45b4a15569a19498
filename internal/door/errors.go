package door

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// HeaderInstance names the instance that answered a request; the door's
// own answers (listings, its errors) carry it empty.
const HeaderInstance = "X-GPUGuard-Instance"

// The error codes of the door's own answers (the "code" of OpenAI's error
// shape), each a contract value.
const (
	CodeModelNotFound = "model_not_found"
	CodeModelRequired = "model_required"
	CodeInvalidJSON   = "invalid_json"
	CodeBodyTooLarge  = "body_too_large"
	// CodeRequestTimeout (408) is the door's own: a body not all in within
	// bodyTimeout.
	CodeRequestTimeout = "request_timeout"
)

// The error types: a client's mistake, or an instance that cannot be
// reached (the front door's own type for its 503s).
const (
	typeInvalidRequest = "invalid_request_error"
	typeUnavailable    = "gpuguard_unavailable"
)

// errorBody is OpenAI's error shape: {"error":{"message","type","param",
// "code"}}. Code is a string for the door's own errors and the number 503
// for gpuguard_unavailable, as the instance's front door writes it.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    any     `json:"code"`
	} `json:"error"`
}

// answerError writes one error answer.
func answerError(w http.ResponseWriter, status int, typ string, code any, msg string) {
	var b errorBody
	b.Error.Message, b.Error.Type, b.Error.Code = msg, typ, code
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, b)
}

func modelNotFound(w http.ResponseWriter, model string) {
	answerError(w, http.StatusNotFound, typeInvalidRequest, CodeModelNotFound,
		fmt.Sprintf("The model `%s` does not exist: no gpuguard instance on this host serves it (GET /v1/models lists the models served).", model))
}

func modelRequired(w http.ResponseWriter, why string) {
	answerError(w, http.StatusBadRequest, typeInvalidRequest, CodeModelRequired,
		why+`: gpuguard door routes a request by the "model" string of its JSON body (GET /v1/models lists them), or by its path as /upstream/MODEL/PATH.`)
}

func invalidJSON(w http.ResponseWriter, err error) {
	answerError(w, http.StatusBadRequest, typeInvalidRequest, CodeInvalidJSON,
		"The body is not valid JSON ("+err.Error()+`): gpuguard door routes a request by the "model" string of its JSON body.`)
}

func bodyTooLarge(w http.ResponseWriter, limit int64) {
	answerError(w, http.StatusRequestEntityTooLarge, typeInvalidRequest, CodeBodyTooLarge,
		fmt.Sprintf("The body is larger than gpuguard door's --max-body (%d bytes).", limit))
}

func bodyTimedOut(w http.ResponseWriter, timeout time.Duration) {
	w.Header().Set("Connection", "close")
	answerError(w, http.StatusRequestTimeout, typeInvalidRequest, CodeRequestTimeout,
		fmt.Sprintf("The body did not arrive within %s.", timeout))
}

func unavailable(w http.ResponseWriter, msg string) {
	answerError(w, http.StatusServiceUnavailable, typeUnavailable, http.StatusServiceUnavailable, msg)
}

// writeJSON answers v as JSON with its Content-Length, as the door's own
// answer (an empty X-GPUGuard-Instance).
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	h := w.Header()
	h.Set(HeaderInstance, "")
	if err != nil {
		http.Error(w, "gpuguard door: encoding the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	body = append(body, '\n')
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
