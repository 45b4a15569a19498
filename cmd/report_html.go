package cmd

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuguard/gpuguard/internal/durable"
	"github.com/gpuguard/gpuguard/review"
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
	if err := replaceFile(o.HTML, b.Bytes()); err != nil {
		return exitf(ExitFailure, "writing the review page: %v", err)
	}
	return nil
}

// replaceFile puts data at path through a temporary file in the same
// directory and a rename, which replaces a symlink at path rather than
// writing through it.
func replaceFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(0o644) // a page to read, like a report printed to a terminal
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%s: %w", path, err)
	}
	return durable.SyncDir(dir)
}
