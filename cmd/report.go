package cmd

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuguard/gpuguard/internal/paths"
	"github.com/gpuguard/gpuguard/internal/report"
	"github.com/gpuguard/gpuguard/internal/report/instances"
	"github.com/gpuguard/gpuguard/internal/review"
	"github.com/gpuguard/gpuguard/policy"
)

// ReportOptions is what `gpuguard report` was asked to do.
type ReportOptions struct {
	IO    *IO
	Name  string
	Since time.Duration // 0: the whole journal
	JSON  bool
	// Budget is the degraded rate above which an instance is flagged.
	Budget float64
	// HTML is where the review page goes ("-": stdout); "" for none.
	HTML       string
	StateDir   string
	RuntimeDir string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// NewCmdReport builds `gpuguard report`.
func NewCmdReport(stdio *IO, runF func(*ReportOptions) error) *cobra.Command {
	opts := &ReportOptions{IO: stdio}
	c := &cobra.Command{
		Use:   "report [NAME] [--since DUR] [--json] [--html FILE] [--budget RATE]",
		Short: "Summarise an instance's event journal",
		Long: `Summarise <state-dir>/events.jsonl: step-downs, OOM fallbacks, restarts by
reason, time spent in each profile (while a child ran), the fallback rate
(the share of that time spent below the first profile the instance started
in) and the degraded rate (the share spent below the ladder's first profile),
which is judged against --budget: above it, the report warns that the GPU
memory budget should grow.

--html FILE writes the same period as the review page: one self-contained
HTML page (no request leaves it) with a timeline per instance (the profile,
the per-minute watermark against high and critical, a mark for every step,
OOM exit, restart, yield, GPU fault, reload and give-up), the figures and
the verdict against --budget. "-" writes it to stdout. With --html,
--since defaults to 7d.

Without NAME, the instance whose journal is alone under the state root is
summarised; with several, each is (JSON: {"instances":[...]}). Scripts should
name the instance to get one summary object. With --state-dir, the journal
names its instance; a NAME it never carries gets a warning, and the report
says whose journal it is.`,
		Example: `  gpuguard report llama --since 24h
  gpuguard report --state-dir /var/lib/gpuguard/llama --json | jq .degraded_rate
  gpuguard report --html review.html`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Name = args[0]
			}
			if opts.HTML != "" && !c.Flags().Changed("since") {
				opts.Since = reviewPeriod
			}
			if runF != nil {
				return runF(opts)
			}
			return runReport(opts)
		},
	}
	f := c.Flags()
	f.Var((*daysDuration)(&opts.Since), "since", "only the last DUR (e.g. 24h, 7d); default the whole journal")
	f.BoolVar(&opts.JSON, "json", false, "print JSON")
	f.Float64Var(&opts.Budget, "budget", report.DefaultBudget, "the degraded rate (share of time below the ladder's first profile, 0..1) above which the memory budget should grow")
	f.StringVar(&opts.HTML, "html", "", "write the review page to FILE (- for stdout); --since defaults to 7d")
	f.StringVar(&opts.StateDir, "state-dir", "", "the instance's own state dir (holding events.jsonl)")
	f.StringVar(&opts.RuntimeDir, "runtime-dir", "", "directory of control sockets (to tell whether the instance is live)")
	return c
}

// daysDuration is a duration flag that also takes days ("7d"), as policy
// durations do: a weekly review says --since 7d.
type daysDuration time.Duration

func (d *daysDuration) String() string { return time.Duration(*d).String() }
func (d *daysDuration) Type() string   { return "duration" }

func (d *daysDuration) Set(s string) error {
	v, err := policy.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = daysDuration(v)
	return nil
}

func runReport(o *ReportOptions) error {
	if o.Since < 0 {
		return exitf(ExitUsage, "--since must be positive, got %s", o.Since)
	}
	if o.HTML != "" && o.JSON {
		return exitf(ExitUsage, "--html and --json cannot be given together")
	}
	if !(o.Budget >= 0 && o.Budget <= 1) { // NaN too
		return exitf(ExitUsage, "--budget must be a rate between 0 and 1 (0.05 is 5%%), got %v", o.Budget)
	}
	if o.Name != "" {
		if err := paths.ValidName(o.Name); err != nil {
			return withCode(ExitUsage, err)
		}
	}
	now := time.Now()
	if o.Now != nil {
		now = o.Now()
	}
	env := paths.System()
	env.Getenv = o.IO.Getenv
	targets, err := reportTargets(o, env)
	if err != nil {
		return err
	}
	runDirs, err := env.RuntimeDirs(o.RuntimeDir)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	var since time.Time
	if o.Since > 0 {
		since = now.Add(-o.Since)
	}
	reads, err := instances.SummarizeAll(targets, runDirs, since, now, o.Budget, o.JSON || o.HTML != "", o.IO.ErrOut)
	if err != nil {
		return withCode(ExitFailure, err)
	}
	if o.HTML != "" {
		pages := make([]review.Instance, len(reads))
		for i, r := range reads {
			pages[i] = review.Instance{Summary: r.Summary, Events: r.Events}
		}
		return writeReview(o, pages, since, now)
	}
	sums := make([]report.Summary, len(reads))
	for i, r := range reads {
		sums[i] = r.Summary
	}
	return withCode(ExitFailure, report.WriteAll(o.IO.Out, sums, o.JSON))
}

// reportTargets resolves which journals to read: --state-dir, else NAME
// under the state root, else every instance under the state root that has a
// journal.
func reportTargets(o *ReportOptions, env paths.Env) ([]instances.Target, error) {
	targets, root, err := instanceTargets(env, o.StateDir, o.Name, instances.HasJournal)
	if err != nil {
		return nil, err
	}
	if len(targets) == 0 {
		return nil, exitf(ExitFailure, "no instance journal under %s (name one, or give --state-dir)", root)
	}
	return targets, nil
}

// instanceTargets is instances.Targets with exit codes: a bad name or
// state dir is a usage error, a state root that cannot be listed exit 1.
func instanceTargets(env paths.Env, stateDir, name string, has func(dir string) bool) ([]instances.Target, string, error) {
	targets, root, err := instances.Targets(env, stateDir, name, has)
	return targets, root, withCode(ExitFailure, err)
}
