package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"time"
)

// trace is what BenchmarkRampDetection -ramp.trace writes.
type trace struct {
	From     float64 `json:"from"`
	Rate     float64 `json:"rate_per_second"`
	Low      float64 `json:"low"`
	High     float64 `json:"high"`
	Critical float64 `json:"critical"`
	Ramp     struct {
		Start   time.Time `json:"ramp_start"`
		Cross   time.Time `json:"crossed_high"`
		Signal  time.Time `json:"signal_at_child"`
		Decided time.Time `json:"stepdown_decided"`
	} `json:"ramp"`
	Status []struct {
		Time      time.Time `json:"time"`
		Watermark float64   `json:"watermark"`
		Interval  float64   `json:"interval_seconds"`
	} `json:"status"`
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: plot TRACE.json OUT.svg")
		os.Exit(64)
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail(err)
	}
	var tr trace
	if err := json.Unmarshal(raw, &tr); err != nil {
		fail(fmt.Errorf("%s: %w", os.Args[1], err))
	}
	if len(tr.Status) == 0 || tr.Ramp.Start.IsZero() {
		fail(fmt.Errorf("%s: no ramp or no status points", os.Args[1]))
	}
	if err := os.WriteFile(os.Args[2], []byte(draw(tr)), 0o644); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "plot:", err)
	os.Exit(1)
}

// panel maps seconds (relative to the crossing of high) and a value to
// pixels inside a rectangle.
type panel struct {
	x, y, w, h     float64
	t0, t1         float64 // seconds
	v0, v1         float64
	log            bool
	svg            *strings.Builder
	id             string // of its clip path
	title, ylabel  string
	xticks, yticks []float64
	yfmt           func(float64) string
}

func (p panel) px(t float64) float64 { return p.x + (t-p.t0)/(p.t1-p.t0)*p.w }

func (p panel) py(v float64) float64 {
	a, b := p.v0, p.v1
	if p.log {
		v, a, b = math.Log10(v), math.Log10(a), math.Log10(b)
	}
	return p.y + p.h - (v-a)/(b-a)*p.h
}

func (p panel) in(t float64) bool { return t >= p.t0 && t <= p.t1 }

func (p panel) frame() {
	s := p.svg
	fmt.Fprintf(s, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#fff" stroke="#999"/>`+"\n", p.x, p.y, p.w, p.h)
	fmt.Fprintf(s, `<text x="%.1f" y="%.1f" font-weight="bold">%s</text>`+"\n", p.x, p.y-8, p.title)
	for _, t := range p.xticks {
		x := p.px(t)
		fmt.Fprintf(s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", x, p.y, x, p.y+p.h)
		fmt.Fprintf(s, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>`+"\n", x, p.y+p.h+14, secs(t))
	}
	for _, v := range p.yticks {
		y := p.py(v)
		fmt.Fprintf(s, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", p.x, y, p.x+p.w, y)
		fmt.Fprintf(s, `<text x="%.1f" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", p.x-4, y+4, p.yfmt(v))
	}
	fmt.Fprintf(s, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555" transform="rotate(-90 %.1f %.1f)">%s</text>`+"\n",
		p.x-58, p.y+p.h/2, p.x-58, p.y+p.h/2, p.ylabel)
	fmt.Fprintf(s, `<clipPath id="%s"><rect x="%.1f" y="%.1f" width="%.1f" height="%.1f"/></clipPath>`+"\n", p.id, p.x, p.y, p.w, p.h)
}

// clip starts a group drawn only inside the panel; end it with "</g>".
func (p panel) clip() { fmt.Fprintf(p.svg, `<g clip-path="url(#%s)">`+"\n", p.id) }

func (p panel) hline(v float64, color, label string) {
	y := p.py(v)
	fmt.Fprintf(p.svg, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="5 3"/>`+"\n", p.x, y, p.x+p.w, y, color)
	fmt.Fprintf(p.svg, `<text x="%.1f" y="%.1f" fill="%s">%s</text>`+"\n", p.x+4, y-3, color, label)
}

// vline marks time t, with a label on line row (0 = the top, -1 = the
// bottom) left of the line (end) or right of it.
func (p panel) vline(t float64, color, label string, end bool, row int) {
	if !p.in(t) {
		return
	}
	x := p.px(t)
	fmt.Fprintf(p.svg, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"/>`+"\n", x, p.y, x, p.y+p.h, color)
	anchor, dx := "start", 4.0
	if end {
		anchor, dx = "end", -4
	}
	y := p.y + 14 + 14*float64(row)
	if row < 0 { // from the bottom
		y = p.y + p.h + 14*float64(row)
	}
	fmt.Fprintf(p.svg, `<text x="%.1f" y="%.1f" fill="%s" text-anchor="%s">%s</text>`+"\n", x+dx, y, color, anchor, label)
}

// polyline draws f over the panel's time range, sampled finely.
func (p panel) polyline(f func(t float64) float64, color string) {
	var pts []string
	for i := 0; i <= 600; i++ {
		t := p.t0 + (p.t1-p.t0)*float64(i)/600
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", p.px(t), p.py(f(t))))
	}
	fmt.Fprintf(p.svg, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", strings.Join(pts, " "), color)
}

func secs(t float64) string {
	if t == 0 {
		return "0"
	}
	if math.Abs(t) < 1 {
		return fmt.Sprintf("%+.0f ms", t*1000)
	}
	return fmt.Sprintf("%+g s", math.Round(t*100)/100)
}

func draw(tr trace) string {
	rel := func(at time.Time) float64 { return at.Sub(tr.Ramp.Cross).Seconds() }
	start, signal, decided := rel(tr.Ramp.Start), rel(tr.Ramp.Signal), rel(tr.Ramp.Decided)
	// The watermark as the child wrote it: flat, the ramp, flat again
	// once the signal came.
	written := func(t float64) float64 {
		switch {
		case t < start || t > signal:
			return tr.From
		}
		return tr.From + tr.Rate*(t-start)
	}
	type sample struct{ t, v, period float64 }
	var samples []sample
	for _, s := range tr.Status {
		if s.Watermark > 0 {
			samples = append(samples, sample{rel(s.Time), s.Watermark, s.Interval})
		}
	}

	var b strings.Builder
	const width, height = 900.0, 790.0
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#fafafa"/>`+"\n")
	fmt.Fprintf(&b, `<text x="20" y="22" font-size="15" font-weight="bold">One ramp of BenchmarkRampDetection: high crossed -&gt; SIGUSR1 at the child in %.1f ms</text>`+"\n",
		signal*1000)
	fmt.Fprintf(&b, `<text x="20" y="40" fill="#555">GPU memory from %.2f rising %.2f/s. Default policy: interval 200 ms, adaptive between 20 ms and 1 s; sustain and grace 0.</text>`+"\n",
		tr.From, tr.Rate)

	pct := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	over := panel{x: 90, y: 80, id: "over", w: 780, h: 250, t0: start - 2, t1: signal + 0.3, v0: 0.45, v1: 1.0, svg: &b,
		title: "Watermark: as written by the child (line) and as gpuguard sampled it (dots, from its status)", ylabel: "used / total",
		yticks: []float64{0.5, 0.6, 0.7, 0.8, 0.9, 1.0}, yfmt: pct}
	for t := math.Ceil(over.t0); t <= over.t1; t++ {
		over.xticks = append(over.xticks, t)
	}
	zoom := panel{x: 90, y: 380, id: "zoom", w: 780, h: 200, t0: -0.45, t1: signal + 0.03, v0: tr.High - 0.05, v1: tr.High + 0.01, svg: &b,
		title: "The last 450 ms before the crossing", ylabel: "used / total",
		yticks: []float64{tr.High - 0.04, tr.High - 0.02, tr.High}, yfmt: pct}
	for t := -0.4; t <= zoom.t1; t += 0.1 {
		zoom.xticks = append(zoom.xticks, math.Round(t*10)/10)
	}
	period := panel{x: 90, y: 630, id: "period", w: 780, h: 110, t0: over.t0, t1: over.t1, v0: 0.01, v1: 1.5, log: true, svg: &b,
		title: "Polling period (log scale): 1 s while calm, 200 ms, then shorter as the trend nears high", ylabel: "period",
		xticks: over.xticks, yticks: []float64{0.02, 0.05, 0.2, 1}, yfmt: func(v float64) string { return fmt.Sprintf("%.0f ms", v*1000) }}

	for i, p := range []panel{over, zoom} {
		p.frame()
		p.hline(tr.High, "#c0392b", fmt.Sprintf("high %.2f", tr.High))
		if p.v0 < tr.Low {
			p.hline(tr.Low, "#2e86c1", fmt.Sprintf("low %.2f", tr.Low))
		}
		if p.v1 > tr.Critical {
			p.hline(tr.Critical, "#7d3c98", fmt.Sprintf("critical %.2f", tr.Critical))
		}
		p.clip()
		p.polyline(written, "#888")
		for _, s := range samples {
			if p.in(s.t) {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="#1e8449"/>`+"\n", p.px(s.t), p.py(s.v))
			}
		}
		b.WriteString("</g>\n")
		row := []int{1, -2}[i] // clear of the samples
		p.vline(decided, "#d35400", fmt.Sprintf("step decided +%.1f ms", decided*1000), true, row)
		p.vline(signal, "#c0392b", fmt.Sprintf("SIGUSR1 at the child +%.1f ms", signal*1000), true, row+1)
	}
	over.vline(start, "#555", "ramp starts", false, 0)

	period.frame()
	// A step line; a point before the window (the state it opens in)
	// starts at the window's edge.
	var pts []string
	for i, s := range samples {
		t := math.Max(s.t, period.t0)
		if t > period.t1 {
			break
		}
		if i > 0 && len(pts) > 0 {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", period.px(t), period.py(samples[i-1].period)))
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", period.px(t), period.py(s.period)))
	}
	if n := len(samples); n > 0 {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", period.px(period.t1), period.py(samples[n-1].period)))
	}
	fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="#1e8449" stroke-width="1.5"/>`+"\n", strings.Join(pts, " "))
	period.vline(signal, "#c0392b", "", false, 0)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#555">time from crossing high</text>`+"\n", period.x+period.w/2-60, period.y+period.h+30)
	b.WriteString("</svg>\n")
	return b.String()
}
