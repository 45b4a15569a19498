package door

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gpuguard/gpuguard/api"
)

// cannedTransport answers every request at once, without a network: what
// remains is the door's own work per request.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, ContentLength: 2,
		Body: io.NopCloser(strings.NewReader("{}")), Request: r}, nil
}

// BenchmarkServeHTTP is the door's own cost per request, the network
// aside: reading the body, finding its model (an alias, rewritten),
// picking the replica, httputil.ReverseProxy's copy of the request and
// answer, and the metrics. bodies: a chat request of 200 bytes and one of
// 64 KiB (a long prompt, which the model's scan skips over).
func BenchmarkServeHTTP(b *testing.B) {
	for _, size := range []int{200, 64 << 10} {
		b.Run(map[int]string{200: "200B", 64 << 10: "64KiB"}[size], func(b *testing.B) {
			tb := Build(nil, []Found{
				{Socket: "/a", Status: api.Status{Name: "a", Serve: "127.0.0.1:1", State: "running", Ready: true, Models: []string{"qwen2.5", "qwen"}}},
				{Socket: "/b", Status: api.Status{Name: "b", Serve: "127.0.0.1:2", State: "running", Ready: true, Models: []string{"qwen2.5", "qwen"}}},
			})
			d := New(Options{Table: func() *Table { return tb }, MaxBody: 1 << 20, Metrics: NewMetrics(func() int { return 2 })})
			d.proxy.Transport = cannedTransport{}
			prompt := strings.Repeat("x", size-100)
			body := `{"model":"qwen","messages":[{"role":"user","content":"` + prompt + `"}],"stream":false}`
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				r := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
				w := httptest.NewRecorder()
				d.ServeHTTP(w, r)
				if w.Code != 200 || w.Header().Get(HeaderInstance) != "a" {
					b.Fatalf("%d %v", w.Code, w.Header())
				}
			}
		})
	}
}
