package control

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gpuguard/gpuguard/internal/admission"
)

// FuzzDecodeRequest checks that no line can crash the decoder, that what it
// accepts is valid, and that the reply to any line (echoing its id) is one
// line of valid JSON, so a client can never desynchronise the framing.
// Seeds live in testdata/fuzz/FuzzDecodeRequest.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"type":"status","id":1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		line = trimLine(line)
		if bytes.IndexByte(line, '\n') >= 0 || len(line) > MaxLineBytes {
			return // the reader never hands such a line to the decoder
		}
		req, err := decodeRequest(line)
		var reply []byte
		if err != nil {
			reply = errorLine(req.ID, err)
		} else {
			checkValid(t, req)
			reply = encodeLine(reserveReply{OK: true, ID: req.ID})
		}
		if !bytes.HasSuffix(reply, []byte("\n")) || bytes.Count(reply, []byte("\n")) != 1 || !json.Valid(reply) {
			t.Fatalf("reply to %q is not one JSON line: %q", line, reply)
		}
		if req.ID != nil {
			var m map[string]json.RawMessage
			if json.Unmarshal(reply, &m) != nil || m["id"] == nil {
				t.Fatalf("reply to %q lost the id: %q", line, reply)
			}
		}
	})
}

func checkValid(t *testing.T, req request) {
	switch req.Type {
	case TypeStatus, TypeSubscribe, TypeOOM:
	case TypeReserve:
		r := req.Reserve
		if r.Bytes == 0 || !admission.ValidPriority(r.Priority) || r.TTL <= 0 {
			t.Fatalf("accepted an invalid reservation %+v", r)
		}
	case TypeRelease:
		if req.Lease == "" {
			t.Fatal("accepted a release without a lease")
		}
	case TypeStep:
		if req.Direction != StepDown && req.Direction != StepUp {
			t.Fatalf("accepted direction %q", req.Direction)
		}
	default:
		t.Fatalf("accepted type %q", req.Type)
	}
}
