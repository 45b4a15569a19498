package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/admission"
)

func TestRequests(t *testing.T) {
	b := newFakeBackend()
	s := serve(t, b, nil)
	c := dialRaw(t, s.Path())

	tests := []struct {
		name, line string
		want       map[string]any // keys that must have these values
	}{
		{"status", `{"type":"status","id":1}`, map[string]any{"ok": true, "id": 1.0, "name": "demo", "pid": 42.0, "profile": "fp16", "levels": 3.0, "state": "running", "last_event": nil}},
		{"status echoes any id", `{"id":{"a":[1,"x"]},"type":"status"}`, map[string]any{"ok": true, "id": map[string]any{"a": []any{1.0, "x"}}}},
		{"subscribe", `{"type":"subscribe","id":"s"}`, map[string]any{"ok": true, "id": "s"}},
		{"oom", `{"type":"oom","detail":"CUDA out of memory","id":2}`, map[string]any{"ok": true, "id": 2.0}},
		{"reserve with defaults", `{"type":"reserve","bytes":1024,"id":3}`, map[string]any{"ok": true, "id": 3.0, "decision": "gpu", "lease": "lease-1", "reason": "fits"}},
		{"reserve that falls back has an empty lease", `{"type":"reserve","bytes":1e12,"priority":"P1","tool":"x","ttl":"5m"}`, map[string]any{"ok": true, "decision": "cpu", "lease": "", "reason": "too big"}},
		{"release", `{"type":"release","lease":"lease-1","id":4}`, map[string]any{"ok": true, "id": 4.0}},
		{"release unknown lease", `{"type":"release","lease":"lease-1","id":5}`, map[string]any{"ok": false, "id": 5.0, "error": `unknown lease "lease-1"`}},
		{"step down", `{"type":"step","direction":"down","id":6}`, map[string]any{"ok": true, "id": 6.0, "profile": "int8"}},
		{"step up", `{"type":"step","direction":"up"}`, map[string]any{"ok": true, "profile": "fp16"}},
		{"step up past the top", `{"type":"step","direction":"up","id":7}`, map[string]any{"ok": false, "id": 7.0, "error": "cannot step up from fp16: no profile there"}},
	}
	for _, tt := range tests {
		got := c.roundTrip(tt.line)
		for k, v := range tt.want {
			if gv, ok := got[k]; !ok || fmt.Sprint(gv) != fmt.Sprint(v) {
				t.Errorf("%s: reply[%q] = %#v, want %#v (reply %v)", tt.name, k, gv, v, got)
			}
		}
		if _, ok := got["id"]; ok && tt.want["id"] == nil {
			t.Errorf("%s: reply has an id the request did not: %v", tt.name, got)
		}
	}
	if len(b.ooms) != 1 || b.ooms[0] != "CUDA out of memory" {
		t.Errorf("MarkOOM calls = %q", b.ooms)
	}
	want := []admission.Request{
		{Bytes: 1024, Priority: "P1", TTL: admission.DefaultTTL},
		{Bytes: 1e12, Priority: "P1", Tool: "x", TTL: 300e9},
	}
	if fmt.Sprint(b.reserves) != fmt.Sprint(want) {
		t.Errorf("Reserve got %+v, want %+v", b.reserves, want)
	}
}

func TestStatusReplyIsTheStatusObject(t *testing.T) {
	s := serve(t, newFakeBackend(), nil)
	c := dialRaw(t, s.Path())
	c.send(`{"type":"status"}`)
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var st api.Status
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.Name != "demo" || len(st.GPUs) != 1 || st.GPUs[0].TotalBytes != 16<<30 {
		t.Errorf("status = %+v", st)
	}
	for _, key := range []string{`"child_pid":43`, `"uptime_seconds":`, `"child_uptime_seconds":`, `"observe":false`, `"leases":0`, `"last_event":null`, `"watermark":0.5`} {
		if !bytes.Contains(line, []byte(key)) {
			t.Errorf("status reply lacks %s: %s", key, line)
		}
	}
}

func TestMalformedRequestsKeepTheConnection(t *testing.T) {
	s := serve(t, newFakeBackend(), nil)
	c := dialRaw(t, s.Path())
	tests := []struct {
		line, err string
		id        any
	}{
		{`{"type":"status"`, "malformed request", nil},
		{`not json`, "malformed request", nil},
		{`[1,2]`, "malformed request", nil},
		{`null`, "malformed request", nil},
		{`{"type":"status"} {"type":"status"}`, "malformed request", nil},
		{`{"id":9}`, `missing "type"`, 9.0},
		{`{"type":7,"id":"t"}`, `"type" must be a string`, "t"},
		{`{"type":"launch","id":1}`, `unknown request type "launch"`, 1.0},
		{`{"type":"reserve","id":2}`, `"bytes" is required`, 2.0},
		{`{"type":"reserve","bytes":0}`, `must be > 0`, nil},
		{`{"type":"reserve","bytes":-5}`, `whole number of bytes`, nil},
		{`{"type":"reserve","bytes":1.5}`, `whole number of bytes`, nil},
		{`{"type":"reserve","bytes":"1GiB"}`, `whole number of bytes`, nil},
		{`{"type":"reserve","bytes":1,"priority":"P3"}`, `"priority" "P3"`, nil},
		{`{"type":"reserve","bytes":1,"priority":1}`, `"priority" must be a string`, nil},
		{`{"type":"reserve","bytes":1,"ttl":"soon"}`, `"ttl" "soon"`, nil},
		{`{"type":"reserve","bytes":1,"ttl":"-1s"}`, `positive Go duration`, nil},
		{`{"type":"reserve","bytes":1,"ttl":60}`, `"ttl" must be a string`, nil},
		{`{"type":"release"}`, `"lease" is required`, nil},
		{`{"type":"release","lease":""}`, `"lease" is required`, nil},
		{`{"type":"step"}`, `"direction" must be "down" or "up"`, nil},
		{`{"type":"step","direction":"sideways"}`, `"direction" must be "down" or "up"`, nil},
		{`{"type":"oom","detail":null}`, `"detail" must be a string`, nil},
	}
	for _, tt := range tests {
		got := c.roundTrip(tt.line)
		msg, _ := got["error"].(string)
		if got["ok"] != false || !strings.Contains(msg, tt.err) {
			t.Errorf("%s: reply %v, want ok:false with error containing %q", tt.line, got, tt.err)
		}
		if fmt.Sprint(got["id"]) != fmt.Sprint(tt.id) {
			t.Errorf("%s: id = %v, want %v", tt.line, got["id"], tt.id)
		}
	}
	// Blank lines are ignored, and the connection still answers.
	c.send("")
	c.send("  \r")
	if got := c.roundTrip(`{"type":"status"}`); got["ok"] != true || got["name"] != "demo" {
		t.Errorf("status after errors: %v", got)
	}
}

func TestLineLimit(t *testing.T) {
	s := serve(t, newFakeBackend(), nil)

	// Exactly MaxLineBytes is still a request.
	c := dialRaw(t, s.Path())
	prefix := `{"type":"status","pad":"`
	line := prefix + strings.Repeat("x", MaxLineBytes-len(prefix)-2) + `"}`
	if len(line) != MaxLineBytes {
		t.Fatalf("test line is %d bytes", len(line))
	}
	if got := c.roundTrip(line); got["ok"] != true {
		t.Fatalf("a %d-byte line was refused: %v", MaxLineBytes, got)
	}

	// One more byte gets an error, then the connection closes.
	c = dialRaw(t, s.Path())
	go c.nc.Write([]byte(line + " " + "\n" + `{"type":"status"}` + "\n")) // may fail once we close
	got := c.recv()
	if msg, _ := got["error"].(string); got["ok"] != false || !strings.Contains(msg, "longer than 65536 bytes") {
		t.Fatalf("oversize line: %v", got)
	}
	c.expectEOF()
}

func TestPeerOfAnotherUserIsRefused(t *testing.T) {
	b := newFakeBackend()
	// Pretend the server runs as someone other than the test (and, since
	// root is always allowed, that the test is not root).
	s := serve(t, b, func(s *Server) { s.lim.allowPeer = func(uint32) bool { return false } })
	c := dialRaw(t, s.Path())
	got := c.recv()
	if msg, _ := got["error"].(string); got["ok"] != false || !strings.Contains(msg, "permission denied") {
		t.Fatalf("got %v", got)
	}
	c.expectEOF()
}

func TestSameUserOrRoot(t *testing.T) {
	allow := sameUserOrRoot(1000)
	for uid, want := range map[uint32]bool{0: true, 1000: true, 1001: false, 65534: false} {
		if allow(uid) != want {
			t.Errorf("uid %d: allowed = %v, want %v", uid, !want, want)
		}
	}
}

// TestConnectionLimit: past DefaultMaxConns, a connection that asks for
// anything but the lane's types (here release) is refused, however many
// ask; the regular connections keep answering.
func TestConnectionLimit(t *testing.T) {
	b := newFakeBackend()
	s := serve(t, b, nil)
	const n = 1000
	conns := make([]*rawConn, n)
	for i := range conns {
		conns[i] = dialRaw(t, s.Path())
	}
	// Every connection asks to release a lease: the ones admitted answer
	// (unknown lease), the rest are refused.
	answered, refused := 0, 0
	for _, c := range conns {
		c.nc.Write([]byte(`{"type":"release","lease":"x"}` + "\n")) // fails on a refused one: fine
		got := c.recv()
		switch msg, _ := got["error"].(string); {
		case strings.Contains(msg, "unknown lease"):
			answered++
		case strings.Contains(msg, "too many connections (limit 128)"):
			refused++
			c.expectEOF()
		default:
			t.Fatalf("unexpected reply %v", got)
		}
	}
	if answered != DefaultMaxConns || refused != n-DefaultMaxConns {
		t.Fatalf("answered %d, refused %d; want %d and %d", answered, refused, DefaultMaxConns, n-DefaultMaxConns)
	}
	// Publish is unaffected by a full house, and once connections go
	// away new ones are admitted.
	s.Publish(api.ProfileState{Profile: "int8"})
	for _, c := range conns {
		c.nc.Close()
	}
	// The server notices the closes asynchronously: retry until admitted,
	// each attempt waiting on the server's own reply.
	for {
		c := dialRaw(t, s.Path())
		if got := c.roundTrip(`{"type":"release","lease":"x"}`); strings.Contains(fmt.Sprint(got["error"]), "unknown lease") {
			break
		}
	}
}

// TestLaneWhenFull: with every connection held by clients that trickle a
// line without ending it, the child's oom and ready and an operator's
// status are still answered (each on a connection of its own, as the
// Python client makes them); anything else is refused, and so is a lane
// connection that says nothing within the lane's timeout. Refused, the
// child's OOM report would be lost and a real OOM count as a crash.
func TestLaneWhenFull(t *testing.T) {
	b := newFakeBackend()
	s := serve(t, b, func(s *Server) { s.lim.laneTimeout = 200 * time.Millisecond })
	for range DefaultMaxConns {
		c := dialRaw(t, s.Path())
		c.nc.Write([]byte(`{"type":`)) // and nothing more
	}
	// Whether the regular connections are all admitted yet is not known:
	// wait until a release is refused, which says they are.
	for {
		c := dialRaw(t, s.Path())
		if got := c.roundTrip(`{"type":"release","lease":"x"}`); strings.Contains(fmt.Sprint(got["error"]), "too many connections") {
			c.expectEOF()
			break
		}
	}
	for _, tt := range []struct{ line, want string }{
		{`{"type":"oom","detail":"CUDA out of memory","id":1}`, "true"},
		{`{"type":"ready"}`, "false"}, // the fake has no Tenancy: answered, not refused
		{`{"type":"status"}`, "true"},
		{`{"type":"reserve","bytes":1}`, "too many connections"},
		{`{"type":"subscribe"}`, "too many connections"},
	} {
		c := dialRaw(t, s.Path())
		got := c.roundTrip(tt.line)
		if fmt.Sprint(got["ok"]) != tt.want && !strings.Contains(fmt.Sprint(got["error"]), tt.want) {
			t.Errorf("%s: %v, want %s", tt.line, got, tt.want)
		}
		if tt.want == "false" && strings.Contains(fmt.Sprint(got["error"]), "too many") {
			t.Errorf("%s: refused: %v", tt.line, got)
		}
		c.expectEOF()
	}
	b.mu.Lock()
	ooms := b.ooms
	b.mu.Unlock()
	if len(ooms) != 1 {
		t.Errorf("MarkOOM calls %q, want one", ooms)
	}
	silent := dialRaw(t, s.Path())
	if got := silent.recv(); !strings.Contains(fmt.Sprint(got["error"]), "too many connections") {
		t.Errorf("a silent lane connection: %v", got)
	}
	silent.expectEOF()
}

// TestSlowLineIsCut: a line whose first byte came and whose newline does
// not within the line timeout gets an error and its connection is closed;
// an idle connection (no byte of a line yet) stays, and one that sends its
// line in pieces within the timeout is answered.
func TestSlowLineIsCut(t *testing.T) {
	s := serve(t, newFakeBackend(), func(s *Server) { s.lim.lineTimeout = 300 * time.Millisecond })
	idle := dialRaw(t, s.Path())
	slow := dialRaw(t, s.Path())
	slow.nc.Write([]byte(`{"type":"sta`))
	got := slow.recv()
	if msg, _ := got["error"].(string); !strings.Contains(msg, "not complete in time") {
		t.Fatalf("slow line: %v", got)
	}
	slow.expectEOF()
	// The idle connection outlived the slow one's timeout and still works.
	if got := idle.roundTrip(`{"type":"status"}`); got["ok"] != true {
		t.Fatalf("idle connection: %v", got)
	}
	pieces := dialRaw(t, s.Path())
	pieces.nc.Write([]byte(`{"type":`))
	pieces.nc.Write([]byte(`"status"}` + "\n"))
	if got := pieces.recv(); got["ok"] != true {
		t.Fatalf("a line in two writes: %v", got)
	}
}

// TestLineLimitCRLF: the limit does not count the line's ending, so a
// 65,536-byte line is a request whether it ends in LF or CRLF (the CR is
// not counted either); one byte more is refused either way.
func TestLineLimitCRLF(t *testing.T) {
	s := serve(t, newFakeBackend(), nil)
	prefix := `{"type":"status","pad":"`
	line := prefix + strings.Repeat("x", MaxLineBytes-len(prefix)-2) + `"}`
	for _, end := range []string{"\n", "\r\n"} {
		c := dialRaw(t, s.Path())
		c.nc.Write([]byte(line + end))
		if got := c.recv(); got["ok"] != true {
			t.Errorf("a %d-byte line ending %q: %.200v", len(line), end, got)
		}
		c = dialRaw(t, s.Path())
		go c.nc.Write([]byte(line + " " + end))
		if got := c.recv(); !strings.Contains(fmt.Sprint(got["error"]), "longer than 65536 bytes") {
			t.Errorf("a %d-byte line ending %q: %.200v", len(line)+1, end, got)
		}
		c.expectEOF()
	}
}

func TestSubscribersGetEventsInOrder(t *testing.T) {
	s := serve(t, newFakeBackend(), nil)
	c := dialRaw(t, s.Path())
	if got := c.roundTrip(`{"type":"subscribe","id":1}`); got["ok"] != true || got["id"] != 1.0 {
		t.Fatalf("subscribe: %v", got)
	}
	for i := range 3 {
		s.Publish(api.ProfileState{Seq: i, Level: i, Profile: fmt.Sprint("p", i), Env: map[string]string{"K": "v"}, Reason: "manual"})
	}
	for i := range 3 {
		got := c.recv()
		if got["type"] != "profile" || got["seq"] != float64(i) || got["profile"] != fmt.Sprint("p", i) || got["reason"] != "manual" {
			t.Fatalf("event %d = %v", i, got)
		}
	}
	// The subscribed connection still takes requests.
	if got := c.roundTrip(`{"type":"status","id":2}`); got["ok"] != true || got["id"] != 2.0 {
		t.Fatalf("status on a subscribed connection: %v", got)
	}
}

func TestSlowSubscriberDoesNotBlockPublish(t *testing.T) {
	s := serve(t, newFakeBackend(), func(s *Server) { s.lim.subBuffer = 8 })
	slow := dialRaw(t, s.Path())
	if got := slow.roundTrip(`{"type":"subscribe"}`); got["ok"] != true {
		t.Fatal(got)
	}
	// Large events fill the socket buffer quickly; the client reads none.
	env := map[string]string{"PAD": strings.Repeat("x", 4096)}
	for i := range 5000 {
		s.Publish(api.ProfileState{Seq: i, Profile: "int8", Env: env})
	}
	// Publish returned every time. Now the slow client reads: it gets
	// events, then the error line saying it was dropped, then EOF.
	var last map[string]any
	events := 0
	for {
		line, err := slow.r.ReadBytes('\n')
		if err != nil {
			break
		}
		last = nil
		json.Unmarshal(line, &last)
		if last["type"] == "profile" {
			events++
		}
	}
	if msg, _ := last["error"].(string); last["ok"] != false || !strings.Contains(msg, "fell behind") {
		t.Fatalf("last line %v, want the drop notice", last)
	}
	if events >= 5000 {
		t.Fatalf("got all %d events: the subscriber was never dropped", events)
	}
}

func TestServeStopsWithOpenConnections(t *testing.T) {
	s, err := Listen(filepath.Join(t.TempDir(), "run"), "demo")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := contextWithCancel()
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, newFakeBackend()) }()
	idle := dialRaw(t, s.Path())
	sub := dialRaw(t, s.Path())
	if got := sub.roundTrip(`{"type":"subscribe"}`); got["ok"] != true {
		t.Fatal(got)
	}
	idle.roundTrip(`{"type":"status"}`)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve = %v", err)
	}
	idle.expectEOF()
	sub.expectEOF()
	if err := s.Serve(ctx, newFakeBackend()); err == nil {
		t.Error("second Serve succeeded")
	}
}

func TestListenTwiceIsAlreadyRunning(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	s, err := Listen(dir, "demo")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Listen(dir, "demo")
	if !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second Listen: %v, want ErrAlreadyRunning", err)
	}
	want := fmt.Sprintf(`instance "demo" is already running (pid %d)`, os.Getpid())
	if err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	var are *AlreadyRunningError
	if !errors.As(err, &are) || are.PID != os.Getpid() {
		t.Errorf("errors.As: %+v", are)
	}
	// The loser touched nothing: the winner's socket still answers.
	if _, err := net.Dial("unix", s.Path()); err != nil {
		t.Errorf("winner's socket: %v", err)
	}
	other, err := Listen(dir, "other")
	if err != nil {
		t.Fatalf("another name: %v", err)
	}
	other.Close()

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"demo.sock", "demo.lock"} {
		if _, err := os.Lstat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after Close: %v", f, err)
		}
	}
	s2, err := Listen(dir, "demo")
	if err != nil {
		t.Fatalf("Listen after Close: %v", err)
	}
	s2.Close()
}

func TestStaleSocketIsReclaimed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "demo.sock")
	// A dead instance: its socket file and an unlocked lock file remain.
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	os.WriteFile(filepath.Join(dir, "demo.lock"), []byte("999999\n"), 0o600)
	if _, err := net.Dial("unix", path); err == nil {
		t.Fatal("stale socket answered")
	}

	s2, err := Listen(dir, "demo")
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer s2.Close()
	ctx, cancel := contextWithCancel()
	done := make(chan error, 1)
	go func() { done <- s2.Serve(ctx, newFakeBackend()) }()
	if got := dialRaw(t, path).roundTrip(`{"type":"status"}`); got["ok"] != true {
		t.Errorf("status: %v", got)
	}
	cancel()
	<-done
	if b, _ := os.ReadFile(filepath.Join(dir, "demo.lock")); string(b) != fmt.Sprintln(os.Getpid()) {
		t.Errorf("lock file holds %q", b)
	}
}

func TestModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "run")
	s, err := Listen(dir, "demo")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for path, want := range map[string]os.FileMode{dir: os.ModeDir | 0o700, s.Path(): os.ModeSocket | 0o600} {
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode(), want)
		}
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "demo.lock demo.sock" {
		t.Errorf("runtime dir holds %v", names)
	}
}

func TestListenRefusesBadDirsAndNames(t *testing.T) {
	shared := t.TempDir()
	os.Chmod(shared, 0o777)
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, nil, 0o600)
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	for _, tt := range []struct{ dir, name, err string }{
		{shared, "demo", "writable by group or others"},
		{notDir, "demo", "not a directory"},
		{t.TempDir(), "../x", "invalid instance name"},
		{long, "demo", "over the 107-byte limit"},
	} {
		s, err := Listen(tt.dir, tt.name)
		if err == nil {
			s.Close()
			t.Errorf("Listen(%s, %s) succeeded", tt.dir, tt.name)
		} else if !strings.Contains(err.Error(), tt.err) {
			t.Errorf("Listen(%s, %s) = %v, want %q", tt.dir, tt.name, err, tt.err)
		}
	}
}

// TestReserveBounds: a tool of 256 bytes and a ttl of 24h are accepted;
// one byte or one nanosecond more is an error reply naming the bound, and
// so is a ttl too large for a Go duration ("10000000h", which was called
// not positive); a malformed ttl still says what a ttl looks like.
func TestReserveBounds(t *testing.T) {
	b := newFakeBackend()
	s := serve(t, b, nil)
	c := dialRaw(t, s.Path())
	tool := strings.Repeat("t", admission.MaxToolBytes)
	for _, tt := range []struct{ line, want string }{
		{`{"type":"reserve","bytes":1,"tool":"` + tool + `","ttl":"24h"}`, "gpu"},
		{`{"type":"reserve","bytes":1,"tool":"` + tool + `x"}`, `"tool" is 257 bytes, at most 256`},
		{`{"type":"reserve","bytes":1,"ttl":"24h0m0.000000001s"}`, "at most 24h0m0s"},
		{`{"type":"reserve","bytes":1,"ttl":"10000000h"}`, "at most 24h0m0s"},
		{`{"type":"reserve","bytes":1,"ttl":"1e9999h"}`, "want a positive Go duration"},
		{`{"type":"reserve","bytes":1,"ttl":"-5s"}`, "want a positive Go duration"},
		{`{"type":"reserve","bytes":1,"ttl":"soon"}`, "want a positive Go duration"},
	} {
		got := c.roundTrip(tt.line)
		if got["decision"] != tt.want && !strings.Contains(fmt.Sprint(got["error"]), tt.want) {
			t.Errorf("%.80s: %v, want %s", tt.line, got, tt.want)
		}
	}
	if len(b.reserves) != 1 || b.reserves[0].TTL != admission.MaxTTL {
		t.Errorf("Reserve got %+v, want the one at the bounds", b.reserves)
	}
}

// TestBindErrorNamesTheSocket: a bind that fails names the socket's path,
// never the temporary one it was bound at.
func TestBindErrorNamesTheSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.sock")
	err := bindError(path, &net.OpError{Op: "listen", Net: "unix", Addr: &net.UnixAddr{Name: filepath.Join(dir, ".b1234/s")},
		Err: os.NewSyscallError("bind", syscall.EADDRINUSE)})
	if msg := err.Error(); !strings.Contains(msg, path) || strings.Contains(msg, ".b1234") || !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("error %q: want the socket's path, not the bind path, and the cause", msg)
	}
	// And for real: a runtime dir where nothing can be created.
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		t.Skip("root can write a 0500 dir")
	}
	_, err = Listen(ro, "demo")
	if err == nil || strings.Contains(err.Error(), ".b") {
		t.Errorf("Listen in a read-only dir: %v", err)
	}
}
