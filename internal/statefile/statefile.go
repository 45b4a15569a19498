package statefile

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/jsonline"
)

// Write replaces the state file at path with st. The file holds the
// contract's fields (seq, level, profile, env, reason); st.Type, which only
// marks socket events, is not written, and a nil Env is written as {} so
// readers always find an object. The directory must exist.
func Write(path string, st api.ProfileState) error { return write(path, st, true, false) }

// write is Write, sweeping the leftovers of crashed writes when sweep is
// set, and freeing the replaced file off this goroutine when hold is.
func write(path string, st api.ProfileState, sweep, hold bool) error {
	st.Type = ""
	if st.Env == nil {
		st.Env = map[string]string{}
	}
	data, err := jsonline.Marshal(st)
	if err != nil {
		return fmt.Errorf("encoding state: %w", err)
	}
	if err := replace(path, append(data, '\n'), sweep, hold); err != nil {
		return fmt.Errorf("writing state file: %w", err)
	}
	return nil
}

// Read reads the state file at path. A missing file is an error matching
// fs.ErrNotExist.
func Read(path string) (api.ProfileState, error) {
	var st api.ProfileState
	data, err := os.ReadFile(path)
	if err != nil {
		return st, fmt.Errorf("reading state file: %w", err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("reading state file %s: %w", path, err)
	}
	return st, nil
}
