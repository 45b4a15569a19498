// Package serve is gpuguard's front door: an HTTP server that listens for
// the child's clients and passes their requests to the child through
// net/http/httputil.ReverseProxy, so that no request fails because of
// anything gpuguard does to the child (docs/serving.md).
//
// The door is a gate in front of the proxy. It opens when the child's own
// health endpoint first answers 2xx after a launch and closes when the
// supervisor says the child is gone or about to be stopped. While it is
// closed, requests wait in arrival order, bounded by Config.Hold and
// Config.MaxHeld, then get 503 with Retry-After and an OpenAI-shaped JSON
// body. A held request whose client leaves is dropped at once. Drain
// closes the gate and reports when every request passed to the child has
// finished, so that a planned restart fails none. A request whose
// connection to the child failed before any response byte is held and
// sent once more when the child cannot have read it or it may run twice;
// a response already begun is never repeated.
//
// The proxy reaches the child through net/http's Transport
// (transport.go). Around net/http's server and transport, the door checks
// what they accept as RFC 9112 allows but a proxy must not pass: a
// message with both Content-Length and Transfer-Encoding, or a
// Content-Length that is not one number (clientConn, childConn), and it
// bounds a request body's arrival in time (timedBody).
//
// The door knows nothing of policies or of the supervisor: it is told
// "launched", "unready", "drain", the profile and whether memory is short,
// through methods that take plain values, and it reports a child's first
// healthy answer through Options.OnHealthy.
package serve
