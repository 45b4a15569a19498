package control

import (
	"bytes"
	"testing"

	"github.com/gpuguard/gpuguard/api"
)

func TestEncodeLineKeepsReasonsReadable(t *testing.T) {
	for _, v := range []any{errorReply{Error: "watermark 0.93 > 0.90 & rising"}, api.ProfileState{Reason: "watermark 0.93 > 0.90 & rising"}} {
		line := encodeLine(v)
		if !bytes.Contains(line, []byte("0.93 > 0.90 & rising")) || bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' {
			t.Errorf("encodeLine = %q", line)
		}
	}
}
