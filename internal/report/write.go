package report

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteAll prints summaries as `gpuguard report` does: as text, one after
// another with a blank line between, or as JSON, one object for one
// instance and {"instances": [...]} for several.
func WriteAll(w io.Writer, sums []Summary, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		var v any = sums[0]
		if len(sums) > 1 {
			v = struct {
				Instances []Summary `json:"instances"`
			}{sums}
		}
		return enc.Encode(v)
	}
	for i, s := range sums {
		if i > 0 {
			fmt.Fprintln(w)
		}
		if err := s.WriteText(w); err != nil {
			return err
		}
	}
	return nil
}
