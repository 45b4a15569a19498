package serve

import (
	"cmp"
	"context"
	"net/http"
	"time"

	"github.com/gpuguard/gpuguard/api"
)

// Config is what the door does; a reload may replace it (Configure) while
// requests run. Upstream and Fallback are base URLs without a trailing
// slash; Health is a path on Upstream.
type Config struct {
	Upstream string
	Health   string
	Hold     time.Duration // how long a request may wait for a ready child
	MaxHeld  int           // requests waiting at once; one more gets 503 at once
	Retry    bool          // resend, once, a request dropped before any response byte
	Fallback string        // "" or the base URL P1 requests go to while memory is short
	Priority string        // P0, P1 or P2: requests without X-GPUGuard-Priority
	// A request body with no byte for BodyIdle, or not all in within
	// BodyTotal of the request's start, is answered 408; zero: 60 s and
	// 10 min (the contract's; tests shorten them).
	BodyIdle, BodyTotal time.Duration
}

func (c *Config) bodyIdle() time.Duration  { return cmp.Or(c.BodyIdle, bodyIdle) }
func (c *Config) bodyTotal() time.Duration { return cmp.Or(c.BodyTotal, bodyTotal) }

// Priorities of X-GPUGuard-Priority and Config.Priority.
const (
	P0 = "P0"
	P1 = "P1"
	P2 = "P2"
)

// Headers the door reads and writes.
const (
	HeaderPriority = "X-GPUGuard-Priority"
	HeaderProfile  = "X-GPUGuard-Profile"
	HeaderLevel    = "X-GPUGuard-Level"
	// HeaderFallback marks an answer from the fallback server.
	HeaderFallback = "X-GPUGuard-Fallback"
)

// StatusPath answers the instance's status object (a readiness probe).
const StatusPath = "/gpuguard/v1/status"

// Meter counts what the door does (metrics/ implements it). Its methods
// must be cheap and safe for concurrent use.
type Meter interface {
	ServeRequest(code int)
	// ServeHold records the wait of a request that was held.
	ServeHold(d time.Duration)
	ServeRetry()
	// ServeRejected counts a 503 of the door's own: reason "hold" (the
	// wait ran out) or "full" (max_held were held: waiting or being deferred).
	ServeRejected(reason string)
}

// Options are the door's collaborators; all but Status may be nil.
type Options struct {
	// Status is the instance's status object, for StatusPath.
	Status func() api.Status
	// OnHealthy is called once per launch, with the launch's number
	// (Launched), at the child's first 2xx health answer. It may block
	// briefly; it is called from the health poller's goroutine.
	OnHealthy func(gen int)
	// OnRequest is called at each request's arrival, from its own
	// goroutine; held says the child is not ready, so the request waits.
	// It must not block: the supervisor wakes a sleeping server on it and
	// times [serve] idle from it.
	OnRequest func(held bool)
	Meter     Meter
	// Queue stores P2 requests while memory is short (202 with a ticket)
	// and answers their status URLs; nil: P2 is held like P0.
	Queue Queue
	Logf  func(format string, args ...any)
	// Transport reaches the child and the fallback; nil builds one.
	Transport http.RoundTripper
	// Check replaces the health request in tests (ctx bounds it).
	Check func(ctx context.Context, url string) error
}

// Health poll cadence (docs/serving.md): every pollStarting until the
// first 2xx and while not ready, then every pollReady; a poll with no
// answer within pollTimeout fails; failLimit failures in a row make a
// ready child not ready.
const (
	pollStarting = 250 * time.Millisecond
	pollReady    = 5 * time.Second
	pollTimeout  = 5 * time.Second
	failLimit    = 3
)

// maxReplay bounds the request body kept to resend a dropped request: a
// larger body is streamed as usual but not retried.
const maxReplay = 4 << 20

// maxBuffered bounds a request body the door reads whole before it sends
// the request (a prompt's JSON is a few KiB): the child then never holds a
// connection for a client still sending, and gets the request in one
// write. A larger body, or one of unknown length, streams to the child as
// it comes.
const maxBuffered = 64 << 10
