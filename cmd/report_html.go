package cmd

import (
	"bytes"
	"time"

	"github.com/gpuguard/gpuguard/internal/durable"
	"github.com/gpuguard/gpuguard/internal/review"
)

// reviewPeriod is --since for --html when none is given: the design's
// review is weekly.
const reviewPeriod = 7 * 24 * time.Hour

// writeReview writes the review page to o.HTML, or stdout for "-". A file
// is replaced whole (written beside it, then renamed), so a reader or a
// browser never sees half a page, and a failed write leaves the old page.
func writeReview(o *ReportOptions, pages []review.Instance, since, now time.Time) error {
	var b bytes.Buffer
	if err := review.Write(&b, pages, review.Options{Since: since, Until: now, Budget: o.Budget, Location: time.Local}); err != nil {
		return withCode(ExitFailure, err)
	}
	if o.HTML == "-" {
		_, err := o.IO.Out.Write(b.Bytes())
		return withCode(ExitFailure, err)
	}
	if err := durable.Replace(o.HTML, b.Bytes(), 0o644, true); err != nil {
		return exitf(ExitFailure, "writing the review page: %v", err)
	}
	return nil
}
