package report

import (
	"cmp"
	"regexp"
	"slices"
	"strings"

	"github.com/gpuguard/gpuguard/api"
)

// Message is one distinct OOM message and how many OOM exits showed it.
type Message struct {
	Message string `json:"message"`
	Count   int    `json:"count"`
}

// oomLine finds the line of a traceback that says what ran out; the policy's
// patterns decide what counts as an OOM, this only picks the line to show.
var oomLine = regexp.MustCompile(`(?i)out of memory|outofmemory|alloc_failed|memoryallocation|resource_exhausted`)

// numbers vary between otherwise identical messages ("Tried to allocate
// 2.00 GiB"); they are masked to group them.
var numbers = regexp.MustCompile(`0x[0-9a-fA-F]+|\d+(\.\d+)?`)

const maxMessage = 200

// oomMessage picks the most telling text of an OOM event: the last stderr
// line that names the failure, else the classifier's evidence, else the last
// non-empty stderr line.
func oomMessage(ev api.Event) string {
	last := ""
	for i := len(ev.Stderr) - 1; i >= 0; i-- {
		line := strings.TrimSpace(ev.Stderr[i])
		if line == "" {
			continue
		}
		if oomLine.MatchString(line) {
			return clip(line)
		}
		if last == "" {
			last = line
		}
	}
	return clip(cmp.Or(strings.TrimSpace(ev.Detail), last))
}

func clip(s string) string {
	if r := []rune(s); len(r) > maxMessage {
		return string(r[:maxMessage-1]) + "…"
	}
	return s
}

// messages counts OOM messages grouped with their numbers masked, keeping
// the first text seen of each group.
type messages struct {
	order []string // group keys, first seen first
	by    map[string]*Message
}

func (m *messages) add(text string) {
	if text == "" {
		return
	}
	key := numbers.ReplaceAllString(text, "N")
	if m.by == nil {
		m.by = map[string]*Message{}
	}
	if g, ok := m.by[key]; ok {
		g.Count++
		return
	}
	m.by[key] = &Message{Message: text, Count: 1}
	m.order = append(m.order, key)
}

// top is the n most frequent messages, ties in order of first appearance.
func (m *messages) top(n int) []Message {
	out := make([]Message, 0, len(m.order))
	for _, k := range m.order {
		out = append(out, *m.by[k])
	}
	slices.SortStableFunc(out, func(a, b Message) int { return cmp.Compare(b.Count, a.Count) })
	return out[:min(n, len(out))]
}
