package cmd

import "testing"

// TestServiceManagerOnlyWithNotifySocket: without NOTIFY_SOCKET the
// supervisor gets no notifier (a nil one, which it skips), so a calm
// sample formats no status line for nobody; with it, systemd is told.
func TestServiceManagerOnlyWithNotifySocket(t *testing.T) {
	if n := serviceManager(func(string) string { return "" }); n != nil {
		t.Errorf("without NOTIFY_SOCKET: %#v, want nil", n)
	}
	env := map[string]string{"NOTIFY_SOCKET": "/run/systemd/notify"}
	if n := serviceManager(func(k string) string { return env[k] }); n == nil {
		t.Error("with NOTIFY_SOCKET: nil, want a notifier")
	}
}
