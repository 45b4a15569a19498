// Command benchchild is the child the end-to-end benchmarks run under
// gpuguard. It is deliberately tiny (standard library only) so that its own
// exec and runtime start add as little as possible to what is measured, and
// it takes its timestamps itself (CLOCK_REALTIME, nanoseconds), so the pipe
// that carries them adds nothing. It prints one line per measurement on
// stdout, which gpuguard hands the child as its own.
//
//	benchchild spawn              print "start <ns>" and exit 0
//	benchchild idle               do nothing until killed; ignore SIGUSR1 (the
//	                              notify signal), which would kill sleep(1)
//	benchchild tick INTERVAL      wake up every INTERVAL and do nothing: the
//	                              floor cost of any Go program polling that often
//	benchchild probe DIR INTERVAL list DIR every INTERVAL and do nothing
//	                              else: the floor cost of a Go program whose
//	                              every wake-up makes a calm sim sample's
//	                              system calls
//	benchchild sigwait N          N times: wait for SIGUSR1, print "signal <ns>"
//	benchchild restart N          print "start <restarts> <ns>"; then exit 0 once
//	                              GPUGUARD_RESTARTS reaches N, else print
//	                              "exit <restarts> <ns>" and exit 1 (a crash)
//	benchchild detect N HIGH LOW INTERVAL
//	                              N times: write HIGH bytes as its own sim usage,
//	                              wait for the notify signal (SIGUSR1), print
//	                              "detect <t0 ns> <t1 ns> <stale>", write LOW;
//	                              each after a random pause of INTERVAL to
//	                              2*INTERVAL; then exit 0. stale counts signals
//	                              that were already pending before t0 (a second
//	                              step on one crossing), which are discarded.
//	benchchild ramp N FROM RATE HIGH TOTAL PAUSE FIRST
//	                              write FROM and wait FIRST; then N times: after
//	                              a random pause of PAUSE to 2*PAUSE at FROM
//	                              (none before the first), raise its own sim usage from
//	                              FROM (a ratio of TOTAL bytes) at RATE per
//	                              second, rewriting it every millisecond, until
//	                              the notify signal; print "ramp <start ns>
//	                              <cross ns> <t1 ns> <stale>", where cross is
//	                              when the ramp passed HIGH; write FROM again.
//	benchchild jump N LOW HIGH CALM
//	                              write LOW; N times: after CALM plus a random
//	                              0-1 s, write HIGH, wait for the notify signal,
//	                              print "jump <t0 ns> <t1 ns> <stale>", write LOW.
//	benchchild http ADDR LOAD WORK
//	                              after LOAD, serve HTTP on ADDR: /health 200, any
//	                              other path 200 after WORK; exit 0 on SIGTERM
package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

func main() {
	start := time.Now().UnixNano()
	if len(os.Args) < 2 {
		fail("usage: benchchild spawn|restart|detect ...")
	}
	switch os.Args[1] {
	case "spawn":
		fmt.Printf("start %d\n", start)
	case "idle":
		signal.Ignore(syscall.SIGUSR1)
		for {
			time.Sleep(time.Hour)
		}
	case "tick":
		for range time.Tick(duration(arg(2))) {
		}
	case "probe":
		for range time.Tick(duration(arg(3))) {
			_, _ = os.ReadDir(arg(2))
		}
	case "sigwait":
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGUSR1)
		fmt.Println("ready")
		for range atoi(arg(2)) {
			<-sig
			fmt.Printf("signal %d\n", time.Now().UnixNano())
		}
	case "restart":
		restart(start, atoi(arg(2)))
	case "detect":
		detect(atoi(arg(2)), arg(3), arg(4), duration(arg(5)))
	case "ramp":
		ramp(atoi(arg(2)), float(arg(3)), float(arg(4)), float(arg(5)), float(arg(6)), duration(arg(7)), duration(arg(8)))
	case "jump":
		jump(atoi(arg(2)), arg(3), arg(4), duration(arg(5)))
	case "http":
		serveHTTP(arg(2), duration(arg(3)), duration(arg(4)))
	default:
		fail("unknown mode " + os.Args[1])
	}
}

func restart(start int64, n int) {
	r := atoi(os.Getenv("GPUGUARD_RESTARTS"))
	fmt.Printf("start %d %d\n", r, start)
	if r >= n {
		os.Exit(0)
	}
	fmt.Printf("exit %d %d\n", r, time.Now().UnixNano())
	os.Exit(1)
}

// simWriter writes the child's own sim usage (a temp file, then rename).
func simWriter() func(v string) {
	dir := filepath.Join(os.Getenv("GPUGUARD_SIM_DIR"), "0")
	usage := filepath.Join(dir, strconv.Itoa(os.Getpid()))
	tmp := filepath.Join(dir, "."+strconv.Itoa(os.Getpid())+".tmp")
	return func(v string) {
		if err := os.WriteFile(tmp, []byte(v), 0o644); err != nil {
			fail(err.Error())
		}
		if err := os.Rename(tmp, usage); err != nil {
			fail(err.Error())
		}
	}
}

// drain discards notify signals already pending and counts them: a second
// step on one crossing, whose signal belongs to no measurement.
func drain(sig chan os.Signal) int {
	for stale := 0; ; stale++ {
		select {
		case <-sig:
		default:
			return stale
		}
	}
}

func detect(n int, high, low string, interval time.Duration) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	write := simWriter()
	write(low)
	// Let gpuguard take its first samples (starting -> running).
	time.Sleep(5 * interval)
	for range n {
		// A random pause puts the crossing at a uniformly random point of
		// the polling period, as a real allocation would be.
		time.Sleep(interval + rand.N(interval))
		stale := drain(sig)
		t0 := time.Now()
		write(high)
		select {
		case <-sig:
		case <-time.After(100 * interval):
			fail("no notify signal within 100 intervals")
		}
		t1 := time.Now()
		fmt.Printf("detect %d %d %d\n", t0.UnixNano(), t1.UnixNano(), stale)
		write(low)
	}
}

func ramp(n int, from, rate, high, total float64, pause, first time.Duration) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	write := simWriter()
	bytes := func(r float64) string { return strconv.FormatUint(uint64(min(r, 1)*total), 10) }
	write(bytes(from))
	toHigh := time.Duration((high - from) / rate * float64(time.Second))
	time.Sleep(first)
	for i := range n {
		if i > 0 {
			time.Sleep(pause + rand.N(pause))
		}
		stale := drain(sig)
		start := time.Now()
		var t1 time.Time
		for t1.IsZero() {
			el := time.Since(start)
			if el > toHigh+20*time.Second {
				fail("no notify signal within 20 s of crossing high")
			}
			write(bytes(from + rate*el.Seconds()))
			select {
			case <-sig:
				t1 = time.Now()
			case <-time.After(time.Millisecond):
			}
		}
		fmt.Printf("ramp %d %d %d %d\n", start.UnixNano(), start.Add(toHigh).UnixNano(), t1.UnixNano(), stale)
		write(bytes(from))
	}
}

func jump(n int, low, high string, calm time.Duration) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	write := simWriter()
	write(low)
	for range n {
		time.Sleep(calm + rand.N(time.Second))
		stale := drain(sig)
		t0 := time.Now()
		write(high)
		select {
		case <-sig:
		case <-time.After(10 * time.Second):
			fail("no notify signal within 10 s of the jump")
		}
		fmt.Printf("jump %d %d %d\n", t0.UnixNano(), time.Now().UnixNano(), stale)
		write(low)
	}
}

func arg(i int) string {
	if i >= len(os.Args) {
		fail("missing argument " + strconv.Itoa(i))
	}
	return os.Args[i]
}

func duration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		fail(err.Error())
	}
	return d
}

func float(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		fail(err.Error())
	}
	return f
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fail(err.Error())
	}
	return n
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "benchchild:", msg)
	os.Exit(2)
}
