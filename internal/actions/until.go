package actions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Until is a wait for the server's own word that an action's work is done:
// GET URL until the answer's status is in Status and its body contains
// Body, for up to Timeout.
type Until struct {
	URL     string // absolute http:// URL with its query; "": no wait
	Status  []int  // the statuses that mean done
	Body    string // "": any body
	Timeout time.Duration
}

// Set reports whether there is anything to wait for.
func (u Until) Set() bool { return u.URL != "" }

// PollEvery is the pause between two polls of an until.
const PollEvery = 250 * time.Millisecond

// maxPollWait bounds one poll: a server that does not answer one GET is
// asked again rather than waited on for the whole timeout.
const maxPollWait = 5 * time.Second

// maxPollBody is how much of a poll's answer is searched for Until.Body.
const maxPollBody = 1 << 20

// await polls u.URL at once and then every PollEvery until an answer
// meets u; it fails naming the last answer when none has within
// u.Timeout, or when ctx ends first.
func (c *Caller) await(ctx context.Context, u Until) error {
	wait, cancel := context.WithTimeout(ctx, u.Timeout)
	defer cancel()
	tick := time.NewTicker(PollEvery)
	defer tick.Stop()
	last := "no answer yet"
	for {
		said, done := c.poll(wait, u)
		if done {
			return nil
		}
		if wait.Err() == nil {
			last = said // a poll cut by the end of the wait says nothing new
		}
		select {
		case <-tick.C:
			if wait.Err() == nil {
				continue
			}
		case <-wait.Done():
		}
		if ctx.Err() != nil {
			return fmt.Errorf("until GET %s: %w", u.URL, ctx.Err())
		}
		return fmt.Errorf("until GET %s: not done within %s (%s)", u.URL, u.Timeout, last)
	}
}

// poll asks once; last describes the answer, for the error if the wait
// runs out.
func (c *Caller) poll(ctx context.Context, u Until) (last string, done bool) {
	ctx, cancel := context.WithTimeout(ctx, maxPollWait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.URL, nil)
	if err != nil {
		return err.Error(), false
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return "last poll: no answer", false
		}
		return "last poll: " + err.Error(), false
	}
	defer resp.Body.Close()
	if !slices.Contains(u.Status, resp.StatusCode) {
		return "last answer: " + resp.Status, false
	}
	if u.Body == "" {
		return "", true
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPollBody))
	if err != nil {
		return fmt.Sprintf("last answer: %s, body cut: %v", resp.Status, err), false
	}
	if !strings.Contains(string(body), u.Body) {
		return fmt.Sprintf("last answer: %s without %q", resp.Status, u.Body), false
	}
	return "", true
}
