package bench

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/statefile"
)

// BenchmarkStateFileWrite is one atomic replace of the state file in a
// temp dir on this machine's disk (TMPDIR). The supervisor loop does this
// synchronously before it signals the child on a live change and before it
// launches every child, so its latency adds to detection and restart
// latency.
//
//   - write: statefile.Write: a new temp file, the write, the rename
//     (which frees the replaced file's inode).
//   - writer: a statefile.Writer, as `run` uses: each write uses the temp
//     file prepared after the last one, and renames it over a file that a
//     hidden link still holds.
//
// Writes are 10 ms apart in both, as writes come (a step or a restart is
// never closer to the last write than a child's start), and so that a
// Writer's write does not wait for the preparation after the last.
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
	b.Run("writer", func(b *testing.B) {
		w := statefile.NewWriter()
		defer w.Close()
		run(b, w.Write, 10*time.Millisecond)
	})
}
