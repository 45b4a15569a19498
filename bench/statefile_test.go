package bench

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/statefile"
)

// BenchmarkStateFileWrite is one atomic replace of the state file (temp
// file, fsync, rename, fsync of the directory) in a temp dir on this
// machine's disk. The supervisor loop does this synchronously before it
// signals the child on a live change and before it launches every child,
// so its latency adds to detection and restart latency.
func BenchmarkStateFileWrite(b *testing.B) {
	path := filepath.Join(b.TempDir(), "state.json")
	st := api.ProfileState{Seq: 1, Level: 1, Profile: "int8",
		Env: map[string]string{"DTYPE": "int8", "MAX_BATCH": "16"}, Reason: "watermark 0.93 > 0.90"}
	var ds []time.Duration
	for b.Loop() {
		st.Seq++
		t0 := time.Now()
		if err := statefile.Write(path, st); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	stats(b, "", "ms", ds)
}
