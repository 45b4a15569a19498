package serve

import "time"

// The door's activity, as [serve] idle and keep_awake count it: the
// requests passed to the child and not finished answering, and when the
// last of them finished (its answer's last byte; for a stream its last
// chunk). A request is in flight from the gate letting it through until
// its answer is written whole, so a 40-second stream is in flight for 40
// seconds. Requests the door answers itself, deferrals and those sent to
// the fallback never reach the child and are not counted here.

// InFlight is how many requests the door has passed to the child and not
// finished answering.
func (d *Door) InFlight() int {
	n, _ := d.gate.activity()
	return n
}

// LastAnswer is when the door last finished answering a request it had
// passed to the child; zero before the first.
func (d *Door) LastAnswer() time.Time {
	_, t := d.gate.activity()
	return t
}

// activity is the gate's in-flight count and when the last request in
// flight ended.
func (g *gate) activity() (inflight int, lastEnd time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inflight, g.lastEnd
}
