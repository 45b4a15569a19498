package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/gpuguard/gpuguard/internal/backends"
	"github.com/gpuguard/gpuguard/internal/regfile"
)

// DefaultFile is the policy that run and policy check read when none is
// named, if it exists in the working directory.
const DefaultFile = "policy.toml"

// Limits that keep a hostile or mistyped policy from turning into a
// ladder of a million rungs, a backoff that overflows, or a checkpoint
// rotation that shifts thousands of files.
const (
	MaxFileSize    = 1 << 20
	MaxProfiles    = 256
	MaxDuration    = 30 * 24 * time.Hour
	MaxKeep        = 100
	MaxRestarts    = 1_000_000
	MaxOOMPatterns = 256
	// MaxRetention bounds journal.max_age, which is in days (180d is the
	// regulatory case), not in the minutes and hours of the timers.
	MaxRetention = 10 * 366 * Day
	MaxPriority  = 1000
	MaxJournal   = 1000 // journal.max_files
)

// Default returns the built-in policy: the contract's defaults and one
// profile, "default", with no env.
func Default() *Policy {
	return &Policy{
		Watch: Watch{Backend: backends.Auto, Interval: 200 * time.Millisecond, Scope: ScopeDevice,
			Adaptive: true, MinInterval: 20 * time.Millisecond, MaxInterval: time.Second,
			Settle:    5 * time.Second,
			OnGPULost: OnGPULostKeep, LostAfter: 30 * time.Second},
		Watermark: Watermark{
			High: 0.90, Critical: 0.97, Low: 0.70,
			Sustain: time.Second, Grace: 10 * time.Second,
		},
		Restart: Restart{
			OnCrash:        true,
			Backoff:        time.Second,
			BackoffMax:     time.Minute,
			ResetAfter:     10 * time.Minute,
			MaxRestarts:    10,
			Window:         10 * time.Minute,
			StartSecs:      5 * time.Second,
			StartRetries:   3,
			StopSignal:     syscall.SIGTERM,
			StopTimeout:    30 * time.Second,
			ReleaseTimeout: 30 * time.Second,
			WhenFull:       WhenFullWait,
			OnGPUFault:     OnGPUFaultStop,
		},
		Notify:     Notify{Signal: syscall.SIGUSR1},
		OOM:        OOM{Patterns: builtinOOM(), ScanStderr: true},
		Checkpoint: Checkpoint{Keep: 3},
		Journal:    Journal{MaxSize: 16 << 20, MaxFiles: 4},
		Serve:      defaultServe(),
		Defer:      defaultDefer(),
		Profiles:   []Profile{{Name: "default", Env: map[string]string{}}},
	}
}

// Parse decodes and validates a policy. source names it in errors (the
// file's path, usually). Any error is a non-empty ErrorList holding every
// problem found, each naming the key and the line.
func Parse(data []byte, source string, opts ...Option) (*Policy, error) {
	if len(data) > MaxFileSize {
		return nil, ErrorList{{File: source, Msg: fmt.Sprintf("file is %d bytes; a policy may be at most %s", len(data), FormatSize(MaxFileSize))}}
	}
	if e := checkNesting(source, data); e != nil {
		return nil, ErrorList{e}
	}
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return nil, ErrorList{syntaxError(source, data, err)}
	}
	d := newDecoder(source, data, newParseOptions(opts))
	p := Default()
	p.Source = source
	d.policy(p, raw)
	crossKeys{out: d.out}.validate(p, raw)
	if errs := d.out.errs; len(errs) > 0 {
		errs.sortByLine()
		return nil, errs
	}
	return p, nil
}

func syntaxError(source string, data []byte, err error) *Error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		line := pe.Position.Line
		// The parser counts a line early when the error is at a line end
		// ("[watch\n" is reported on line 2); the byte offset is exact.
		if start := pe.Position.Start; start >= 0 && start < len(data) {
			line = 1 + bytes.Count(data[:start], []byte("\n"))
		}
		return &Error{File: source, Line: line, Msg: "invalid TOML: " + pe.Message, Err: err}
	}
	return &Error{File: source, Msg: "invalid TOML: " + err.Error(), Err: err}
}

// Load reads and parses the policy file at path. A missing or unreadable
// file is an ErrorList too (errors.Is(err, fs.ErrNotExist) holds for a
// missing one): a named policy that cannot be read is a configuration
// error like any other.
func Load(path string, opts ...Option) (*Policy, error) {
	data, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path, opts...)
}

// ReadFile reads the policy file at path, as Load does (at most one byte
// past MaxFileSize, for Parse to refuse): for a caller that also needs the
// text, to Locate a key. Its error is an ErrorList too.
func ReadFile(path string) ([]byte, error) {
	return readAs(path, os.Open)
}

// ReadRegularFile is ReadFile for a file read on a running instance's
// behalf (a reload): it refuses what is not a regular file, without
// blocking, for a FIFO put there would hold the reload for ever, and with
// it every later one. `run --policy /dev/stdin` still reads a pipe.
func ReadRegularFile(path string) ([]byte, error) {
	return readAs(path, func(path string) (*os.File, error) { return regfile.Open(path, os.O_RDONLY, 0) })
}

func readAs(path string, open func(string) (*os.File, error)) ([]byte, error) {
	data, err := readFile(path, open)
	if err != nil {
		msg := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			msg = pe.Err.Error()
		}
		return nil, ErrorList{{File: path, Msg: "cannot read policy: " + msg, Err: err}}
	}
	return data, nil
}

func readFile(path string, open func(string) (*os.File, error)) ([]byte, error) {
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// One byte over the limit is enough for Parse to reject it.
	return io.ReadAll(io.LimitReader(f, MaxFileSize+1))
}

// LoadOrDefault is how commands find their policy: path when one is named
// (missing is an error), else ./policy.toml if it exists, else Default().
// The returned Policy's Source is "" when the defaults were used.
func LoadOrDefault(path string, opts ...Option) (*Policy, error) {
	if path != "" {
		return Load(path, opts...)
	}
	if _, err := os.Stat(DefaultFile); errors.Is(err, fs.ErrNotExist) {
		return Default(), nil
	}
	return Load(DefaultFile, opts...)
}
