package cmd

import "errors"

// runRun is replaced by run_start.go once its packages have landed.
func runRun(o *RunOptions) error {
	if _, err := resolveRun(o); err != nil {
		return err
	}
	return errors.New("run: not yet wired")
}
