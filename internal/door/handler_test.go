package door

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// seen is what a fake instance door received.
type seen struct {
	method, path, rawQuery, body string
	header                       http.Header
}

// fakeInstance is an instance's front door: it records each request and
// answers with its name, or with reply when set.
type fakeInstance struct {
	name  string
	srv   *httptest.Server
	mu    sync.Mutex
	got   []seen
	reply http.HandlerFunc
}

func newFakeInstance(t *testing.T, name string, reply http.HandlerFunc) *fakeInstance {
	t.Helper()
	f := &fakeInstance{name: name, reply: reply}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.got = append(f.got, seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, string(b), r.Header.Clone()})
		f.mu.Unlock()
		if f.reply != nil {
			f.reply(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"instance":%q}`, name)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeInstance) last(t *testing.T) seen {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.got) == 0 {
		t.Fatalf("instance %s got no request", f.name)
	}
	return f.got[len(f.got)-1]
}

func (f *fakeInstance) found(state string, ready bool, models ...string) Found {
	return Found{Socket: "/run/" + f.name + ".sock", At: time.Now(),
		Status: api.Status{Name: f.name, Serve: f.srv.Listener.Addr().String(), State: state, Ready: ready, Models: models,
			Profile: "fp16", UptimeSeconds: 60, GPUs: []api.GPU{}}}
}

// testDoor serves a Door over table tb, with metrics.
func testDoor(t *testing.T, tb *Table, maxBody int64) (string, *Metrics) {
	t.Helper()
	var m *Metrics
	m = NewMetrics(func() int { return len(tb.Backends()) })
	d := New(Options{Table: func() *Table { return tb }, MaxBody: maxBody, Version: "1.2.3", Metrics: m, Logf: t.Logf})
	s := httptest.NewServer(d)
	t.Cleanup(func() { s.Close(); d.CloseIdleConnections() })
	return s.URL, m
}

func do(t *testing.T, method, url, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// instanceHeader is X-GPUGuard-Instance, and whether it is there at all.
func instanceHeader(resp *http.Response) (string, bool) {
	v, ok := resp.Header[http.CanonicalHeaderKey(HeaderInstance)]
	if !ok || len(v) != 1 {
		return "", false
	}
	return v[0], true
}

// TestRouteByModel: each request goes to the instance of the model its
// body names, unchanged but for an alias rewritten to the first name;
// the answer names the instance.
func TestRouteByModel(t *testing.T) {
	llm, emb := newFakeInstance(t, "llm", nil), newFakeInstance(t, "embed", nil)
	tb := Build(nil, []Found{llm.found(api.StateRunning, true, "qwen2.5-7b-instruct", "qwen"), emb.found(api.StateAsleep, false)})
	url, _ := testDoor(t, tb, 1<<20)
	for _, tt := range []struct {
		method, path, body string
		to                 *fakeInstance
		sent               string
	}{
		{"POST", "/v1/chat/completions?x=1&y=%2F", `{"model":"qwen","messages":[{"role":"user","content":"qwen"}]}`, llm,
			`{"model":"qwen2.5-7b-instruct","messages":[{"role":"user","content":"qwen"}]}`},
		{"POST", "/v1/completions", `{"model":"qwen2.5-7b-instruct","prompt":"hi"}`, llm, `{"model":"qwen2.5-7b-instruct","prompt":"hi"}`},
		{"POST", "/api/embed", `{"model":"embed","input":["a"]}`, emb, `{"model":"embed","input":["a"]}`},
		{"POST", "/api/show", `{"name":"qwen"}`, llm, `{"name":"qwen2.5-7b-instruct"}`},
		{"PUT", "/some/server/path", ` {"model" : "embed"} `, emb, ` {"model" : "embed"} `},
	} {
		t.Run(tt.path, func(t *testing.T) {
			resp, body := do(t, tt.method, url+tt.path, tt.body, "X-Custom", "kept", "X-Forwarded-For", "10.1.2.3", "Content-Type", "application/json")
			if resp.StatusCode != 200 || body != fmt.Sprintf(`{"instance":%q}`, tt.to.name) {
				t.Fatalf("answer %d %s, want %s's", resp.StatusCode, body, tt.to.name)
			}
			if got, ok := instanceHeader(resp); !ok || got != tt.to.name {
				t.Errorf("%s = %q (present %v), want %q", HeaderInstance, got, ok, tt.to.name)
			}
			s := tt.to.last(t)
			path, query, _ := strings.Cut(tt.path, "?")
			if s.method != tt.method || s.path != path || s.rawQuery != query || s.body != tt.sent {
				t.Errorf("instance got %s %s?%s %s; want %s %s?%s %s", s.method, s.path, s.rawQuery, s.body, tt.method, path, query, tt.sent)
			}
			if s.header.Get("X-Custom") != "kept" || !strings.HasPrefix(s.header.Get("X-Forwarded-For"), "10.1.2.3, 127.0.0.1") {
				t.Errorf("headers at the instance: %v", s.header)
			}
		})
	}
}

// TestRouteUpstreamPath: /upstream/MODEL/PATH passes PATH and the query to
// MODEL's instance, the body untouched.
func TestRouteUpstreamPath(t *testing.T) {
	llm := newFakeInstance(t, "llm", nil)
	tb := Build(nil, []Found{llm.found(api.StateRunning, true, "org/model")})
	url, _ := testDoor(t, tb, 1<<20)
	for _, p := range []string{"/upstream/org/model/props/a%2Fb?model=x", "/upstream/org%2Fmodel/props/a%2Fb?model=x"} {
		resp, _ := do(t, "POST", url+p, "not json at all")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", p, resp.StatusCode)
		}
		if s := llm.last(t); s.path != "/props/a%2Fb" || s.rawQuery != "model=x" || s.body != "not json at all" {
			t.Errorf("%s: instance got %s?%s %q", p, s.path, s.rawQuery, s.body)
		}
	}
}

// TestReplicasFewestInFlight: with one request open at the first replica,
// the next goes to the other.
func TestReplicasFewestInFlight(t *testing.T) {
	release, arrived := make(chan struct{}), make(chan struct{}, 1)
	hold := func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
		fmt.Fprint(w, "a")
	}
	a, b := newFakeInstance(t, "a", hold), newFakeInstance(t, "b", nil)
	tb := Build(nil, []Found{a.found(api.StateRunning, true, "m"), b.found(api.StateRunning, true, "m")})
	url, _ := testDoor(t, tb, 1<<20)
	done := make(chan string)
	go func() {
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"model":"m"}`))
		if err != nil {
			done <- err.Error()
			return
		}
		resp.Body.Close()
		done <- resp.Header.Get(HeaderInstance)
	}()
	<-arrived
	c := http.Client{Timeout: 10 * time.Second} // sent to a by mistake, it would wait for release
	resp, err := c.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"model":"m"}`))
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get(HeaderInstance); got != "b" {
		t.Errorf("with a busy, the request went to %q", got)
	}
	if got := <-done; got != "a" {
		t.Errorf("the first request: %q", got)
	}
	for _, b := range tb.Backends() {
		eventually(t, "no request counted in flight at "+b.Name, func() bool { return b.InFlight() == 0 })
	}
}

// eventually polls cond: a handler's last step (its deferred count) runs
// just after the client has read the whole answer.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 5s: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// errorShape is OpenAI's error body as a client decodes it.
type errorShape struct {
	Error struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Param   json.RawMessage `json:"param"`
		Code    json.RawMessage `json:"code"`
	} `json:"error"`
}

// TestErrors: each error of the door in OpenAI's shape, with the
// contract's status, type and code, and an empty X-GPUGuard-Instance.
func TestErrors(t *testing.T) {
	llm := newFakeInstance(t, "llm", nil)
	gone := newFakeInstance(t, "gone", nil)
	gone.srv.Close() // its door refuses connections
	hung := llm.found(api.StateUnreachable, false, "hung")
	hung.Status.Name, hung.Socket = "hung", "/run/hung.sock"
	tb := Build(nil, []Found{llm.found(api.StateRunning, true, "qwen"), gone.found(api.StateRunning, true, "gone"), hung})
	url, _ := testDoor(t, tb, 64)
	for _, tt := range []struct {
		name, method, path, body string
		status                   int
		typ, code, inMessage     string
	}{
		{"unknown model", "POST", "/v1/chat/completions", `{"model":"gpt-9"}`, 404, "invalid_request_error", `"model_not_found"`, "`gpt-9`"},
		{"unknown model listed", "GET", "/v1/models/gpt-9", "", 404, "invalid_request_error", `"model_not_found"`, "/v1/models"},
		{"unknown upstream", "GET", "/upstream/gpt-9/health", "", 404, "invalid_request_error", `"model_not_found"`, "`gpt-9`"},
		{"no body", "GET", "/v1/chat/completions", "", 400, "invalid_request_error", `"model_required"`, "no body"},
		{"no model", "POST", "/v1/completions", `{"prompt":"hi"}`, 400, "invalid_request_error", `"model_required"`, `"model"`},
		{"model not a string", "POST", "/v1/completions", `{"model":["qwen"]}`, 400, "invalid_request_error", `"model_required"`, `"model"`},
		{"upstream without a model", "GET", "/upstream/", "", 400, "invalid_request_error", `"model_required"`, "/upstream/"},
		{"not JSON", "POST", "/v1/completions", `model=qwen`, 400, "invalid_request_error", `"invalid_json"`, "not valid JSON"},
		{"too large", "POST", "/v1/completions", `{"model":"qwen","prompt":"` + strings.Repeat("x", 64) + `"}`, 413, "invalid_request_error", `"body_too_large"`, "64 bytes"},
		{"door refuses", "POST", "/v1/completions", `{"model":"gone"}`, 503, "gpuguard_unavailable", `503`, `"gone"`},
		{"socket does not answer", "POST", "/v1/completions", `{"model":"hung"}`, 503, "gpuguard_unavailable", `503`, `"hung"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, tt.method, url+tt.path, tt.body)
			var e errorShape
			if err := json.Unmarshal([]byte(body), &e); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if resp.StatusCode != tt.status || e.Error.Type != tt.typ || string(e.Error.Code) != tt.code || string(e.Error.Param) != "null" ||
				!strings.Contains(e.Error.Message, tt.inMessage) {
				t.Errorf("%d %s, want %d type %s code %s param null, message with %q", resp.StatusCode, body, tt.status, tt.typ, tt.code, tt.inMessage)
			}
			if v, ok := instanceHeader(resp); !ok || v != "" {
				t.Errorf("%s = %q (present %v), want present and empty", HeaderInstance, v, ok)
			}
			if ra := resp.Header.Get("Retry-After"); (tt.status == 503) != (ra == "1") {
				t.Errorf("Retry-After %q with %d", ra, tt.status)
			}
		})
	}
	// A chunked body over the limit, with no Content-Length to refuse it by.
	req, _ := http.NewRequest("POST", url+"/v1/completions", io.MultiReader(strings.NewReader(`{"model":"qwen","p":"`), strings.NewReader(strings.Repeat("x", 100)+`"}`)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if req.ContentLength != 0 || resp.StatusCode != 413 {
		t.Errorf("chunked body over --max-body: %d (content length %d)", resp.StatusCode, req.ContentLength)
	}
}

// TestStreamsPassChunkByChunk: an SSE stream and an NDJSON stream reach the
// client event by event: the client reads each before the instance sends
// the next.
func TestStreamsPassChunkByChunk(t *testing.T) {
	for _, tt := range []struct{ ctype, first, second string }{
		{"text/event-stream", "data: {\"n\":1}\n\n", "data: [DONE]\n\n"},
		{"application/x-ndjson", "{\"n\":1}\n", "{\"done\":true}\n"},
	} {
		t.Run(tt.ctype, func(t *testing.T) {
			next := make(chan struct{})
			stream := func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.ctype)
				fmt.Fprint(w, tt.first)
				w.(http.Flusher).Flush()
				<-next // the client has read the first chunk
				fmt.Fprint(w, tt.second)
			}
			llm := newFakeInstance(t, "llm", stream)
			url, _ := testDoor(t, Build(nil, []Found{llm.found(api.StateRunning, true, "m")}), 1<<20)
			resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			rd := bufio.NewReader(resp.Body)
			line, err := rd.ReadString('\n')
			if err != nil || line != strings.SplitAfter(tt.first, "\n")[0] {
				t.Fatalf("first chunk %q %v", line, err)
			}
			close(next)
			rest, _ := io.ReadAll(rd)
			if got := line + string(rest); got != tt.first+tt.second {
				t.Fatalf("stream %q", got)
			}
		})
	}
}

// TestClientLeavesMidStream: a client that goes away ends the request at
// the instance too, and the in-flight count comes back to zero.
func TestClientLeavesMidStream(t *testing.T) {
	ended := make(chan struct{})
	stream := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(ended)
	}
	llm := newFakeInstance(t, "llm", stream)
	tb := Build(nil, []Found{llm.found(api.StateRunning, true, "m")})
	url, _ := testDoor(t, tb, 1<<20)
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"model":"m","stream":true}`
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("status line %q %v", line, err)
	}
	c.Close()
	<-ended
	eventually(t, "the request no longer counted in flight", func() bool { return tb.Pick("m").InFlight() == 0 })
}

// TestBodyTimeout: a body that does not arrive in time gets 408 in
// OpenAI's shape and the connection closed; nothing reaches an instance.
func TestBodyTimeout(t *testing.T) {
	llm := newFakeInstance(t, "llm", nil)
	tb := Build(nil, []Found{llm.found(api.StateRunning, true, "m")})
	d := New(Options{Table: func() *Table { return tb }, MaxBody: 1 << 20, Logf: t.Logf})
	d.bodyTimeout = 200 * time.Millisecond
	s := httptest.NewServer(d)
	t.Cleanup(s.Close)
	for _, framing := range []string{"Content-Length: 100\r\n", "Content-Length: 1000000\r\n", "Transfer-Encoding: chunked\r\n"} {
		c, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n%s\r\n", framing)
		if strings.HasPrefix(framing, "Transfer") {
			fmt.Fprint(c, "a\r\n{\"model\":\r\n")
		} else {
			fmt.Fprint(c, `{"model":"m"`)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body) // to EOF: the door closes the connection
		c.Close()
		var e errorShape
		if json.Unmarshal(body, &e) != nil || resp.StatusCode != 408 || string(e.Error.Code) != `"request_timeout"` || !resp.Close {
			t.Errorf("%s: %d %s (close %v)", framing, resp.StatusCode, body, resp.Close)
		}
	}
	llm.mu.Lock()
	defer llm.mu.Unlock()
	if len(llm.got) != 0 {
		t.Errorf("the instance got %d requests", len(llm.got))
	}
}

// TestRewriteHeaders: the outgoing request keeps the client's headers and
// Host, appends the client to X-Forwarded-For, keeps its X-Forwarded-Proto,
// and drops Expect once the door has read the body.
func TestRewriteHeaders(t *testing.T) {
	d := New(Options{Table: func() *Table { return Build(nil, nil) }})
	for _, read := range []bool{true, false} {
		in := httptest.NewRequest("POST", "http://door.example/v1/chat/completions?q=1", strings.NewReader("{}"))
		in.RemoteAddr = "192.0.2.7:5555"
		in.Header.Set("Expect", "100-continue")
		in.Header.Set("X-Forwarded-For", "10.0.0.1")
		in.Header.Set("X-Forwarded-Proto", "https")
		in.Header.Set("Authorization", "Bearer k")
		rt := &route{b: &Backend{Addr: "127.0.0.1:8001"}, read: read}
		in = in.WithContext(context.WithValue(in.Context(), routeKey{}, rt))
		out := in.Clone(in.Context())
		out.Header.Del("X-Forwarded-For") // as ReverseProxy does before Rewrite
		out.Header.Del("X-Forwarded-Proto")
		d.rewrite(&httputil.ProxyRequest{In: in, Out: out})
		h := out.Header
		if out.URL.String() != "http://127.0.0.1:8001/v1/chat/completions?q=1" || out.Host != "door.example" ||
			h.Get("X-Forwarded-For") != "10.0.0.1, 192.0.2.7" || h.Get("X-Forwarded-Proto") != "https" ||
			h.Get("Authorization") != "Bearer k" || (h.Get("Expect") == "") != read {
			t.Errorf("read %v: %s host %s headers %v", read, out.URL, out.Host, h)
		}
	}
}

// TestReadBodyClaimNotAllocated: a Content-Length under --max-body but far
// over what arrives costs what arrives, not the claim (docs/serving.md,
// Routing).
func TestReadBodyClaimNotAllocated(t *testing.T) {
	const claim = 256 << 20
	r := httptest.NewRequest("POST", "/v1/completions", io.MultiReader(strings.NewReader(`{"model":`), iotest.ErrReader(io.ErrUnexpectedEOF)))
	r.ContentLength = claim
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readBody(httptest.NewRecorder(), r, 1<<30, time.Minute)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("a body cut short was read whole")
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > claim/16 {
		t.Errorf("%d bytes allocated for a 9-byte body claiming %d", n, claim)
	}
}
