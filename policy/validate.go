package policy

import (
	"errors"
	"fmt"
	"strings"
)

// validate checks the rules that tie keys together, after each key has
// been read on its own. A rule involving a key that was already rejected is
// skipped, so one mistake is reported once.
func (d *decoder) validate(pol *Policy, raw map[string]any) {
	wm, rs := path{"watermark"}, path{"restart"}
	w, r := pol.Watermark, pol.Restart
	if d.usable(wm.key("high"), wm.key("critical")) && w.High >= w.Critical {
		d.blame(raw, wm.key("high"), wm.key("critical"),
			fmt.Sprintf("must be below watermark.critical (%v), got %v", w.Critical, w.High),
			fmt.Sprintf("must be above watermark.high (%v), got %v", w.High, w.Critical))
	}
	if d.usable(wm.key("low"), wm.key("high")) && w.Low >= w.High {
		d.blame(raw, wm.key("low"), wm.key("high"),
			fmt.Sprintf("must be below watermark.high (%v), got %v", w.High, w.Low),
			fmt.Sprintf("must be above watermark.low (%v), got %v", w.Low, w.High))
	}
	d.validateIntervals(pol, raw)
	d.validateServe(pol, raw)
	d.validateActions(pol, raw)
	if d.usable(rs.key("backoff"), rs.key("backoff_max")) && r.Backoff > r.BackoffMax {
		d.blame(raw, rs.key("backoff"), rs.key("backoff_max"),
			fmt.Sprintf("must not exceed restart.backoff_max (%s), got %s", fmtDuration(r.BackoffMax), fmtDuration(r.Backoff)),
			fmt.Sprintf("must be at least restart.backoff (%s), got %s", fmtDuration(r.Backoff), fmtDuration(r.BackoffMax)))
	}
	if pol.Command != nil && !d.hasErrorUnder("profile") {
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
			d.fail(p, err, err.Error())
		}
	}
}

// validateIntervals checks min_interval <= interval <= max_interval. A
// bound the file leaves out follows a written interval (interval = "10ms"
// alone lowers min_interval to 10ms), so only bounds the user wrote can
// contradict it.
func (d *decoder) validateIntervals(pol *Policy, raw map[string]any) {
	ws := path{"watch"}
	iv, lo, hi := ws.key("interval"), ws.key("min_interval"), ws.key("max_interval")
	if !d.usable(iv, lo, hi) {
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
		d.blame(raw, lo, iv,
			fmt.Sprintf("must be at most watch.interval (%s), got %s", fmtDuration(w.Interval), fmtDuration(w.MinInterval)),
			fmt.Sprintf("must be at least watch.min_interval (%s), got %s", fmtDuration(w.MinInterval), fmtDuration(w.Interval)))
	}
	if w.MaxInterval < w.Interval {
		d.blame(raw, hi, iv,
			fmt.Sprintf("must be at least watch.interval (%s), got %s", fmtDuration(w.Interval), fmtDuration(w.MaxInterval)),
			fmt.Sprintf("must be at most watch.max_interval (%s), got %s", fmtDuration(w.MaxInterval), fmtDuration(w.Interval)))
	}
}

// usable reports that none of the keys was rejected.
func (d *decoder) usable(keys ...path) bool {
	for _, k := range keys {
		if d.bad[k.String()] {
			return false
		}
	}
	return true
}

// blame reports a broken relation between a and b at a if the file sets
// a, else at b: the key the user wrote is the one to fix.
func (d *decoder) blame(raw map[string]any, a, b path, msgA, msgB string) {
	if written(raw, a) || !written(raw, b) {
		d.errorf(a, "%s", msgA)
		return
	}
	d.errorf(b, "%s", msgB)
}

func (d *decoder) hasErrorUnder(section string) bool {
	for _, e := range d.errs {
		if e.Key == section || strings.HasPrefix(e.Key, section+".") || strings.HasPrefix(e.Key, section+"[") {
			return true
		}
	}
	return false
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
