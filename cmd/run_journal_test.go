package cmd

import (
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/policy"
)

func TestJournalOptions(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		pol   policy.Journal
		files int
	}{
		{"the defaults", policy.Default().Journal, 4},
		{"max_files 0 keeps none", policy.Journal{MaxSize: 64 << 10, MaxFiles: 0}, -1},
		{"180 days", policy.Journal{MaxSize: 1 << 30, MaxFiles: 10, MaxAge: 180 * policy.Day}, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := journalOptions(tt.pol, "llama", now, t.Logf)
			if o.MaxBytes != int64(tt.pol.MaxSize) || o.MaxFiles != tt.files || o.MaxAge != tt.pol.MaxAge || o.Name != "llama" {
				t.Errorf("options %+v, want max bytes %d, max files %d, max age %v", o, tt.pol.MaxSize, tt.files, tt.pol.MaxAge)
			}
			if o.Totals == nil {
				t.Fatal("no running account: the journal would write no totals records")
			}
			if rec := o.Totals.Record(now); rec.Totals == nil || !rec.Totals.RunStart.Equal(now) {
				t.Errorf("the first record %+v does not start the run now", rec)
			}
		})
	}
}
