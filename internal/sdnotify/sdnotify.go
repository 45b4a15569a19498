package sdnotify

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// sendTimeout bounds one notification: a service manager that stops
// reading must not stall the supervisor loop.
const sendTimeout = time.Second

// Notifier sends sd_notify messages. It satisfies supervisor.Notifier; the
// zero value and a nil *Notifier do nothing.
type Notifier struct {
	socket   string
	watchdog time.Duration
}

// New reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID through getenv.
// A malformed WATCHDOG_USEC disables the watchdog rather than failing:
// systemd sets it, and a broken value would otherwise stop gpuguard from
// starting at all.
func New(getenv func(string) string) *Notifier {
	n := &Notifier{socket: getenv("NOTIFY_SOCKET")}
	if n.socket != "" {
		n.watchdog = watchdogTimeout(getenv, os.Getpid())
	}
	return n
}

// watchdogTimeout applies systemd's rules: WATCHDOG_USEC is the timeout and
// WATCHDOG_PID, when set, must name this process (otherwise the variables
// were inherited and meant for a parent).
func watchdogTimeout(getenv func(string) string, pid int) time.Duration {
	usec, err := strconv.ParseInt(getenv("WATCHDOG_USEC"), 10, 64)
	if err != nil || usec <= 0 {
		return 0
	}
	if p := getenv("WATCHDOG_PID"); p != "" && p != strconv.Itoa(pid) {
		return 0
	}
	return time.Duration(usec) * time.Microsecond
}

// Enabled reports whether a service manager listens.
func (n *Notifier) Enabled() bool { return n != nil && n.socket != "" }

// Ready says start-up is finished.
func (n *Notifier) Ready() error { return n.send(daemon.SdNotifyReady) }

// Stopping says gpuguard is shutting down.
func (n *Notifier) Stopping() error { return n.send(daemon.SdNotifyStopping) }

// Watchdog is one keep-alive.
func (n *Notifier) Watchdog() error { return n.send(daemon.SdNotifyWatchdog) }

// Status sets the one-line status `systemctl status` shows. Newlines would
// end the assignment early, so they become spaces.
func (n *Notifier) Status(text string) error {
	return n.send("STATUS=" + strings.NewReplacer("\n", " ", "\r", " ").Replace(text))
}

// WatchdogInterval is how often to call Watchdog: half of WATCHDOG_USEC, as
// sd_watchdog_enabled(3) recommends, so one late tick does not kill the
// service. It is 0 when systemd asked for no watchdog.
func (n *Notifier) WatchdogInterval() time.Duration {
	if !n.Enabled() {
		return 0
	}
	return n.watchdog / 2
}

func (n *Notifier) send(state string) error {
	if !n.Enabled() {
		return nil
	}
	// Go maps a leading '@' to Linux's abstract namespace, as systemd
	// means it.
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: n.socket, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sd_notify %s: %w", state, err)
	}
	defer conn.Close()
	if err := conn.SetWriteDeadline(time.Now().Add(sendTimeout)); err != nil {
		return fmt.Errorf("sd_notify %s: %w", state, err)
	}
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify %s: %w", state, err)
	}
	return nil
}

// CleanEnv returns env without NOTIFY_SOCKET and WATCHDOG_*, for the child.
func CleanEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == "NOTIFY_SOCKET" || strings.HasPrefix(k, "WATCHDOG_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}
