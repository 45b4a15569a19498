// Package door is `gpuguard door`: one HTTP endpoint for every instance of
// the host, routing each request by the model it names to that instance's
// own front door (package serve), which holds, wakes and makes room.
//
// Three parts, each replaceable in tests:
//   - Table (table.go) is the routing table, built purely from the
//     instances' status objects: every name each one answers to ([serve]
//     models, the first being the name its server knows), replicas ranked
//     by readiness, and the door's own count of requests open to each.
//   - Watcher (watch.go) keeps the current Table: it lists the control
//     sockets of the runtime dirs and asks each instance for its status
//     every half second, so an instance started or stopped is routed to,
//     or not, within 2 s.
//   - Door (handler.go) is the http.Handler: the listings answered from the
//     table, the body's "model" (or "name") read from a body read whole, an
//     alias rewritten to the first name, and the request passed on by
//     net/http/httputil.ReverseProxy over one tuned http.Transport.
//
// The door decides nothing about memory: it passes requests to sleeping
// and waiting instances as to ready ones, and their front doors hold them
// while they wake. Per request it does only the routing and bounded
// metrics (its model label is a declared name or "unknown", so a client
// cannot add series).
package door
