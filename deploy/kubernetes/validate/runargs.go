package validate

import (
	"fmt"
	"path"
	"strings"
	"time"
)

// RunArgs is a `gpuguard run` command line, as a Deployment gives it.
type RunArgs struct {
	Binary      string // argv[0]
	Flags       map[string]string
	Observe     bool
	Command     []string // after "--": overrides the policy's command
	HasDashDash bool
}

// runValueFlags are the flags of `gpuguard run` that take a value
// (CONTRACT.md, "run flags"); --observe is its only boolean.
var runValueFlags = map[string]bool{
	"policy": true, "name": true, "backend": true, "devices": true, "interval": true,
	"state-dir": true, "metrics-addr": true, "profile": true, "priority": true,
	"sim-devices": true, "sim-memory": true, "sim-dir": true,
}

// IsGuarded reports whether argv runs gpuguard (its program is named
// gpuguard), which makes the container one the gpuguard checks apply to.
func IsGuarded(argv []string) bool {
	return len(argv) > 0 && path.Base(argv[0]) == "gpuguard"
}

// ParseRunArgs reads `gpuguard run ...`. A flag run does not have, or a
// subcommand other than run, is an error: gpuguard would exit 64.
func ParseRunArgs(argv []string) (RunArgs, error) {
	if !IsGuarded(argv) {
		return RunArgs{}, fmt.Errorf("%q does not run gpuguard", argv)
	}
	if len(argv) < 2 || argv[1] != "run" {
		return RunArgs{}, fmt.Errorf("%q: want `gpuguard run ...`", argv)
	}
	a := RunArgs{Binary: argv[0], Flags: map[string]string{}}
	for i := 2; i < len(argv); i++ {
		arg := argv[i]
		if arg == "--" {
			a.HasDashDash, a.Command = true, argv[i+1:]
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		switch {
		case !strings.HasPrefix(arg, "--"):
			return RunArgs{}, fmt.Errorf("%q: unexpected argument %q (the server's command goes after --)", argv, arg)
		case name == "observe":
			if hasValue && value != "true" && value != "false" {
				return RunArgs{}, fmt.Errorf("--observe=%s: want true or false", value)
			}
			a.Observe = !hasValue || value == "true"
		case !runValueFlags[name]:
			return RunArgs{}, fmt.Errorf("%q: gpuguard run has no flag --%s", argv, name)
		case hasValue:
			a.Flags[name] = value
		case i+1 < len(argv):
			i++
			a.Flags[name] = argv[i]
		default:
			return RunArgs{}, fmt.Errorf("%q: --%s needs a value", argv, name)
		}
	}
	return a, nil
}

// PolicySummary is what the checks need from `gpuguard policy check`,
// which resolves the defaults the file leaves out.
type PolicySummary struct {
	StopTimeout time.Duration
	Listen      string // [metrics] listen; "" when disabled
}

// ParsePolicySummary reads the resolved settings printed by
// `gpuguard policy check`: the "stop" line (timeout=DUR) and the "metrics"
// line (an address, or "disabled").
func ParsePolicySummary(out string) (PolicySummary, error) {
	var s PolicySummary
	var haveStop, haveMetrics bool
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "stop":
			for _, f := range fields[1:] {
				if v, ok := strings.CutPrefix(f, "timeout="); ok {
					d, err := time.ParseDuration(v)
					if err != nil {
						return s, fmt.Errorf("policy check: stop timeout %q: %w", v, err)
					}
					s.StopTimeout, haveStop = d, true
				}
			}
		case "metrics":
			if fields[1] != "disabled" {
				s.Listen = fields[1]
			}
			haveMetrics = true
		}
	}
	if !haveStop || !haveMetrics {
		return s, fmt.Errorf("policy check printed no stop timeout or metrics line:\n%s", out)
	}
	return s, nil
}
