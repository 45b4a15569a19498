package cmd

import (
	"context"
	"errors"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/gpuguard/gpuguard/internal/buildinfo"
	"github.com/gpuguard/gpuguard/internal/door"
	"github.com/gpuguard/gpuguard/internal/paths"
	"github.com/gpuguard/gpuguard/policy"
)

// DoorOptions is what `gpuguard door` was asked to do.
type DoorOptions struct {
	IO          *IO
	Listen      string
	RuntimeDir  string
	MetricsAddr string
	MaxBody     uint64
}

// Defaults of `door`.
const (
	doorDefaultListen  = "127.0.0.1:8080"
	doorDefaultMaxBody = "32MiB"
)

// NewCmdDoor builds `gpuguard door`. runF replaces the action in tests
// that only check flag parsing.
func NewCmdDoor(stdio *IO, runF func(*DoorOptions) error) *cobra.Command {
	opts := &DoorOptions{IO: stdio}
	var maxBody string
	c := &cobra.Command{
		Use:   "door [--listen HOST:PORT] [--runtime-dir DIR] [--metrics-addr HOST:PORT] [--max-body SIZE]",
		Short: "One endpoint for every instance's models, routed by the request's model",
		Long: `Listen for OpenAI and Ollama clients on one address and pass each request to
the front door of the instance that serves the model it names: the JSON
body's "model" (or "name"), or /upstream/MODEL/PATH. The instances are the
ones in the runtime dir, as gpuguard status finds them, followed as they come
and go; each names its models in [serve] models (default: its name), the
first being its server's own name, to which an alias is rewritten. Several
instances naming one model are replicas: a ready one with the fewest
requests in flight gets the request.

GET /v1/models and /api/tags list every model; /gpuguard/v1/models each
model's instances. Sleeping models wake behind their own front door: the
door decides nothing about memory. An address in use at start exits 1.`,
		Example: "  gpuguard door\n  gpuguard door --listen 0.0.0.0:8080 --metrics-addr 127.0.0.1:9465",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkHostPort("--listen", opts.Listen, false); err != nil {
				return err
			}
			if err := checkHostPort("--metrics-addr", opts.MetricsAddr, true); err != nil {
				return err
			}
			n, err := policy.ParseSize(maxBody)
			if err != nil || n == 0 || n > 1<<40 {
				return exitf(ExitUsage, "--max-body must be a size such as 32MiB, got %q", maxBody)
			}
			opts.MaxBody = n
			if runF != nil {
				return runF(opts)
			}
			return runDoor(c.Context(), opts)
		},
	}
	f := c.Flags()
	f.StringVar(&opts.Listen, "listen", doorDefaultListen, "HOST:PORT clients connect to")
	f.StringVar(&opts.RuntimeDir, "runtime-dir", "", "directory of control sockets")
	f.StringVar(&opts.MetricsAddr, "metrics-addr", "", "HOST:PORT to serve /metrics on (empty: none)")
	f.StringVar(&maxBody, "max-body", doorDefaultMaxBody, "largest request body read to find its model; larger gets 413")
	return c
}

// checkHostPort refuses an address that is not HOST:PORT (a usage error).
func checkHostPort(flag, addr string, emptyOK bool) error {
	if addr == "" && emptyOK {
		return nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return exitf(ExitUsage, "%s must be HOST:PORT such as 127.0.0.1:8080, got %q", flag, addr)
	}
	return nil
}

func runDoor(ctx context.Context, o *DoorOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	env := paths.System()
	env.Getenv = o.IO.Getenv
	dirs, err := env.RuntimeDirs(o.RuntimeDir)
	if err != nil {
		return err
	}
	logf := lineLog(o.IO.ErrOut, "gpuguard door: ")
	s, err := door.Open(door.Config{Listen: o.Listen, MetricsAddr: o.MetricsAddr, RuntimeDirs: dirs,
		MaxBody: int64(o.MaxBody), Version: buildinfo.Read().Version, Logf: logf})
	var le *door.ListenError
	if errors.As(err, &le) {
		return listenFailed(le.Err, le.Addr, le.Flag, ExitFailure) // as run says it
	}
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	metricsAt := ""
	if o.MetricsAddr != "" {
		metricsAt = ", metrics at http://" + o.MetricsAddr + "/metrics"
	}
	logf("listening on http://%s for the models of the instances in %s%s", s.Addr(), strings.Join(dirs, ", "), metricsAt)
	return s.Run(ctx)
}
