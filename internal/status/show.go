package status

import (
	"bytes"
	"context"
	"errors"
	"io"
	"time"

	"github.com/gpuguard/gpuguard/internal/status/view"
)

// ShowOptions is how Show prints.
type ShowOptions struct {
	Out  io.Writer
	JSON bool // the contract's JSON (one compact line a refresh when watching)
	// Watch is the refresh period; 0 prints once.
	Watch time.Duration
	// Terminal: Out is a terminal, so a refresh redraws in place.
	Terminal bool
	Color    bool
}

// Show prints one report, or with Watch one every Watch until ctx ends,
// and answers the last report gathered. Printing once, a Name with no
// socket is NoSuchInstance; watching, an instance missing now may start
// later, so it shows as none.
func Show(ctx context.Context, g *Gatherer, o ShowOptions) (view.Report, error) {
	opts := view.Options{Color: o.Color}
	if o.Watch == 0 {
		r, err := g.Gather(ctx)
		if err != nil {
			return r, err
		}
		opts.Now = time.Now()
		return r, render(o.Out, r, o.JSON, false, opts)
	}
	t := time.NewTicker(o.Watch)
	defer t.Stop()
	for {
		r, err := g.Gather(ctx)
		var missing *NoSuchInstance
		if err != nil && !errors.As(err, &missing) {
			return r, err
		}
		// One write a frame, so a reader never sees half of one.
		var frame bytes.Buffer
		if o.Terminal && !o.JSON {
			frame.WriteString("\x1b[H\x1b[2J") // home, clear: redraw in place
		}
		opts.Now = time.Now()
		if err := render(&frame, r, o.JSON, true, opts); err != nil {
			return r, err
		}
		if _, err := o.Out.Write(frame.Bytes()); err != nil {
			return r, err
		}
		select {
		case <-ctx.Done():
			return r, nil
		case <-t.C:
		}
	}
}

func render(w io.Writer, r view.Report, asJSON, watching bool, opts view.Options) error {
	if asJSON {
		return view.WriteJSON(w, r, watching)
	}
	return view.WriteTable(w, r, opts)
}
