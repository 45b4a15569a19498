package bench

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/statefile"
)

// BenchmarkStateFileWrite is one atomic replace of the state file in a
// temp dir on this machine's disk (TMPDIR). The supervisor loop does this
// synchronously before it signals the child on a live change and before it
// launches every child, so its latency adds to detection and restart
// latency.
//
// It is statefile.Write: a new temp file, the write, the rename (which
// frees the replaced file's inode). Writes are 10 ms apart, as writes come.
func BenchmarkStateFileWrite(b *testing.B) {
	st := api.ProfileState{Seq: 1, Level: 1, Profile: "int8",
		Env: map[string]string{"DTYPE": "int8", "MAX_BATCH": "16"}, Reason: "watermark 0.93 > 0.90"}
	run := func(b *testing.B, write func(string, api.ProfileState) error, gap time.Duration) {
		path := filepath.Join(b.TempDir(), "state.json")
		var ds []time.Duration
		for b.Loop() {
			st.Seq++
			t0 := time.Now()
			if err := write(path, st); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(t0))
			if gap > 0 {
				time.Sleep(gap) // spacing, as writes come; not a synchronisation
			}
		}
		stats(b, "", "ms", ds)
	}
	b.Run("write", func(b *testing.B) { run(b, statefile.Write, 10*time.Millisecond) })
}
