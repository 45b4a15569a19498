package deploy

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/gpuguard/gpuguard/api"
	"github.com/gpuguard/gpuguard/internal/metrics"
)

// series is what a real registry exposes: family name -> label -> values
// seen. It is the reference the rules and the dashboard are checked
// against.
type series map[string]map[string]map[string]bool

// gathered builds a metrics registry, touches every counter and collects
// what it exposes, histogram sample names (_bucket, _sum, _count) included.
func gathered() (series, error) {
	m := metrics.New("llama", func() api.Status {
		return api.Status{ChildPID: 1, Levels: 3, GPUs: []api.GPU{{Index: 0, UUID: "GPU-0"}}}
	})
	m.Observe(api.Event{Event: api.EventRestart, Reason: api.ReasonOOM, From: "fp16", To: "int8"})
	gpu := 0
	m.Observe(api.Event{Event: api.EventGPUFault, GPU: "GPU-0", GPUIndex: &gpu, Xid: 79})
	m.ObserveProbe(time.Millisecond, nil)
	// The front door's series exist with a [serve] section.
	m.EnableServe()
	m.ServeRequest(200)
	m.ServeHold(time.Second)
	mfs, err := m.Gatherer().Gather()
	if err != nil {
		return nil, err
	}
	s := series{}
	for _, mf := range mfs {
		names := []string{mf.GetName()}
		if mf.GetType().String() == "HISTOGRAM" {
			names = append(names, mf.GetName()+"_bucket", mf.GetName()+"_sum", mf.GetName()+"_count")
		}
		for _, n := range names {
			labels := map[string]map[string]bool{}
			for _, mt := range mf.GetMetric() {
				for _, lp := range mt.GetLabel() {
					if labels[lp.GetName()] == nil {
						labels[lp.GetName()] = map[string]bool{}
					}
					labels[lp.GetName()][lp.GetValue()] = true
				}
			}
			if strings.HasSuffix(n, "_bucket") {
				labels["le"] = map[string]bool{}
			}
			s[n] = labels
		}
	}
	return s, nil
}

// Labels every series has once scraped, and the ones PromQL makes up.
var targetLabels = []string{"job", "instance", "le", "quantile"}

// freeLabels are labels whose values are not fixed by gpuguard.
var freeLabels = map[string]bool{"name": true, "gpu": true, "xid": true, "uuid": true, "from": true, "to": true, "job": true, "instance": true, "le": true}

// checkExpr is a cheap PromQL sanity check, standing in for the real parser
// (github.com/prometheus/prometheus/promql/parser drags in most of
// Prometheus): brackets balance, strings close, range durations parse, every
// gpuguard_* name exists, matchers use labels (and, for enumerated labels,
// values) the metric has, and grouping labels exist somewhere.
func (s series) checkExpr(expr string) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	toks, err := lex(expr)
	if err != nil {
		return []error{err}
	}
	allLabels := map[string]bool{}
	for _, labels := range s {
		for l := range labels {
			allLabels[l] = true
		}
	}
	for _, l := range targetLabels {
		allLabels[l] = true
	}
	metricsSeen := 0
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.kind == tokIdent && strings.HasPrefix(t.text, "gpuguard_"):
			metricsSeen++
			labels, ok := s[t.text]
			if !ok {
				fail("unknown metric %s", t.text)
				continue
			}
			if i+1 < len(toks) && toks[i+1].text == "{" {
				n, merrs := checkMatchers(t.text, labels, toks[i+2:])
				errs = append(errs, merrs...)
				i += n + 1
			}
		case t.kind == tokIdent && slices.Contains([]string{"by", "without", "on", "ignoring", "group_left", "group_right"}, t.text):
			if i+1 >= len(toks) || toks[i+1].text != "(" {
				if t.text == "group_left" || t.text == "group_right" {
					continue
				}
				fail("%s without a label list", t.text)
				continue
			}
			for i += 2; i < len(toks) && toks[i].text != ")"; i++ {
				if toks[i].kind == tokIdent && !allLabels[toks[i].text] {
					fail("%s (...) names label %q that no gpuguard series has", t.text, toks[i].text)
				}
			}
		case t.kind == tokRange:
			for _, d := range strings.Split(t.text, ":") {
				if d == "" && strings.Contains(t.text, ":") {
					continue
				}
				if _, err := time.ParseDuration(d); err != nil {
					fail("range [%s]: %v", t.text, err)
				}
			}
		}
	}
	if metricsSeen == 0 && !strings.Contains(expr, "up{") {
		fail("no gpuguard metric in %q", expr)
	}
	return errs
}

// checkMatchers checks `label op "value", ...}` and returns how many tokens
// it used, the closing brace included.
func checkMatchers(metric string, labels map[string]map[string]bool, toks []token) (int, []error) {
	var errs []error
	i := 0
	for i < len(toks) && toks[i].text != "}" {
		if toks[i].text == "," {
			i++
			continue
		}
		if i+2 >= len(toks) || toks[i].kind != tokIdent || toks[i+1].kind != tokOp || toks[i+2].kind != tokString {
			return i, append(errs, fmt.Errorf("%s: malformed matcher near %q", metric, toks[i].text))
		}
		name, op, val := toks[i].text, toks[i+1].text, toks[i+2].text
		values, ok := labels[name]
		switch {
		case !ok && !slices.Contains(targetLabels, name):
			errs = append(errs, fmt.Errorf("%s has no label %q (has %v)", metric, name, slices.Sorted(maps.Keys(labels))))
		case ok && !freeLabels[name] && !strings.Contains(val, "$"):
			alts := []string{val}
			if op == "=~" || op == "!~" {
				if _, err := regexp.Compile(val); err != nil {
					errs = append(errs, fmt.Errorf("%s{%s%s%q}: %v", metric, name, op, val, err))
				}
				alts = strings.Split(val, "|")
			}
			for _, a := range alts {
				if !values[a] {
					errs = append(errs, fmt.Errorf("%s{%s=%q}: no such value (has %v)", metric, name, a, slices.Sorted(maps.Keys(values))))
				}
			}
		}
		i += 3
	}
	if i >= len(toks) {
		errs = append(errs, fmt.Errorf("%s: unclosed {", metric))
	}
	return i + 1, errs
}

type tokKind int

const (
	tokIdent tokKind = iota
	tokString
	tokRange // the inside of [...]
	tokOp    // matcher operator
	tokPunct
	tokNumber
)

type token struct {
	kind tokKind
	text string
}

// lex splits a PromQL expression, checking that brackets balance and
// strings close. Grafana variables ($name, ${name}, $__rate_interval) are
// taken as a 5m range or an opaque value.
func lex(expr string) ([]token, error) {
	var toks []token
	var stack []rune
	pairs := map[rune]rune{')': '(', '}': '{'}
	r := []rune(expr)
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case unicode.IsSpace(c):
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(r) && r[j] != c {
				if r[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			if j >= len(r) {
				return nil, fmt.Errorf("unclosed string in %q", expr)
			}
			toks = append(toks, token{tokString, string(r[i+1 : j])})
			i = j
		case c == '[':
			j := strings.IndexRune(string(r[i:]), ']')
			if j < 0 {
				return nil, fmt.Errorf("unclosed [ in %q", expr)
			}
			inner := strings.ReplaceAll(string(r[i+1:i+j]), "$__rate_interval", "5m")
			toks = append(toks, token{tokRange, inner})
			i += j
		case c == ']':
			return nil, fmt.Errorf("unbalanced ] in %q", expr)
		case c == '(' || c == '{':
			stack = append(stack, c)
			toks = append(toks, token{tokPunct, string(c)})
		case c == ')' || c == '}':
			if len(stack) == 0 || stack[len(stack)-1] != pairs[c] {
				return nil, fmt.Errorf("unbalanced %c in %q", c, expr)
			}
			stack = stack[:len(stack)-1]
			toks = append(toks, token{tokPunct, string(c)})
		case c == '=' || c == '!':
			op := string(c)
			if i+1 < len(r) && (r[i+1] == '=' || r[i+1] == '~') {
				op += string(r[i+1])
				i++
			}
			toks = append(toks, token{tokOp, op})
		case c == '_' || c == ':' || unicode.IsLetter(c):
			j := i
			for j < len(r) && (r[j] == '_' || r[j] == ':' || unicode.IsLetter(r[j]) || unicode.IsDigit(r[j])) {
				j++
			}
			toks = append(toks, token{tokIdent, string(r[i:j])})
			i = j - 1
		case unicode.IsDigit(c) || c == '.':
			j := i
			for j < len(r) && (unicode.IsDigit(r[j]) || r[j] == '.' || r[j] == 'e') {
				j++
			}
			toks = append(toks, token{tokNumber, string(r[i:j])})
			i = j - 1
		case c == '$':
			j := i + 1
			for j < len(r) && (r[j] == '_' || r[j] == '{' || r[j] == '}' || unicode.IsLetter(r[j])) {
				j++
			}
			i = j - 1
		case strings.ContainsRune(",+-*/%^<>", c):
			toks = append(toks, token{tokPunct, string(c)})
		default:
			return nil, fmt.Errorf("unexpected %q in %q", c, expr)
		}
	}
	if len(stack) > 0 {
		return nil, fmt.Errorf("unclosed %c in %q", stack[len(stack)-1], expr)
	}
	return toks, nil
}
