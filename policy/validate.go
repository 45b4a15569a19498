package policy

import (
	"errors"
	"fmt"
)

// crossKeys holds the rules that tie keys together (watermark.low <
// high < critical, the interval bounds, [serve] against the ladder, a
// profile's actions), checked once each key has been read on its own. A
// rule involving a key that was already rejected is skipped, so one
// mistake is reported once.
type crossKeys struct {
	out *problems
}

// validate checks every rule between keys.
func (c crossKeys) validate(pol *Policy, raw map[string]any) {
	wm, rs := path{"watermark"}, path{"restart"}
	w, r := pol.Watermark, pol.Restart
	if c.out.usable(wm.key("high"), wm.key("critical")) && w.High >= w.Critical {
		c.out.blame(raw, wm.key("high"), wm.key("critical"),
			fmt.Sprintf("must be below watermark.critical (%v), got %v", w.Critical, w.High),
			fmt.Sprintf("must be above watermark.high (%v), got %v", w.High, w.Critical))
	}
	if c.out.usable(wm.key("low"), wm.key("high")) && w.Low >= w.High {
		c.out.blame(raw, wm.key("low"), wm.key("high"),
			fmt.Sprintf("must be below watermark.high (%v), got %v", w.High, w.Low),
			fmt.Sprintf("must be above watermark.low (%v), got %v", w.Low, w.High))
	}
	c.validateIntervals(pol, raw)
	c.validateServe(pol, raw)
	c.validateActions(pol, raw)
	if c.out.usable(rs.key("backoff"), rs.key("backoff_max")) && r.Backoff > r.BackoffMax {
		c.out.blame(raw, rs.key("backoff"), rs.key("backoff_max"),
			fmt.Sprintf("must not exceed restart.backoff_max (%s), got %s", fmtDuration(r.BackoffMax), fmtDuration(r.Backoff)),
			fmt.Sprintf("must be at least restart.backoff (%s), got %s", fmtDuration(r.Backoff), fmtDuration(r.BackoffMax)))
	}
	if pol.Command != nil && !c.out.hasErrorUnder("profile") {
		if err := pol.CheckArgs(pol.Command); err != nil {
			var ue *UnknownVarError
			var se *ArgSyntaxError
			p := path{"command"}
			switch {
			case errors.As(err, &ue):
				p = p.index(ue.Index)
			case errors.As(err, &se):
				p = p.index(se.Index)
			}
			c.out.fail(p, err, err.Error())
		}
	}
}

// validateIntervals checks min_interval <= interval <= max_interval. A
// bound the file leaves out follows a written interval (interval = "10ms"
// alone lowers min_interval to 10ms), so only bounds the user wrote can
// contradict it.
func (c crossKeys) validateIntervals(pol *Policy, raw map[string]any) {
	ws := path{"watch"}
	iv, lo, hi := ws.key("interval"), ws.key("min_interval"), ws.key("max_interval")
	if !c.out.usable(iv, lo, hi) {
		return
	}
	w := &pol.Watch
	if !written(raw, lo) && w.MinInterval > w.Interval {
		w.MinInterval = w.Interval
	}
	if !written(raw, hi) && w.MaxInterval < w.Interval {
		w.MaxInterval = w.Interval
	}
	if w.MinInterval > w.Interval {
		c.out.blame(raw, lo, iv,
			fmt.Sprintf("must be at most watch.interval (%s), got %s", fmtDuration(w.Interval), fmtDuration(w.MinInterval)),
			fmt.Sprintf("must be at least watch.min_interval (%s), got %s", fmtDuration(w.MinInterval), fmtDuration(w.Interval)))
	}
	if w.MaxInterval < w.Interval {
		c.out.blame(raw, hi, iv,
			fmt.Sprintf("must be at least watch.interval (%s), got %s", fmtDuration(w.Interval), fmtDuration(w.MaxInterval)),
			fmt.Sprintf("must be at most watch.max_interval (%s), got %s", fmtDuration(w.MaxInterval), fmtDuration(w.Interval)))
	}
}

// written reports whether the file sets the key at p (plain table keys only).
func written(raw map[string]any, p path) bool {
	var cur any = raw
	for _, k := range p {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[k]; !ok {
			return false
		}
	}
	return true
}
