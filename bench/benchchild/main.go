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
		d, err := time.ParseDuration(arg(2))
		if err != nil {
			fail(err.Error())
		}
		for range time.Tick(d) {
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
		interval, err := time.ParseDuration(arg(5))
		if err != nil {
			fail(err.Error())
		}
		detect(atoi(arg(2)), arg(3), arg(4), interval)
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

func detect(n int, high, low string, interval time.Duration) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	dir := filepath.Join(os.Getenv("GPUGUARD_SIM_DIR"), "0")
	usage := filepath.Join(dir, strconv.Itoa(os.Getpid()))
	tmp := filepath.Join(dir, "."+strconv.Itoa(os.Getpid())+".tmp")
	write := func(v string) {
		if err := os.WriteFile(tmp, []byte(v), 0o644); err != nil {
			fail(err.Error())
		}
		if err := os.Rename(tmp, usage); err != nil {
			fail(err.Error())
		}
	}
	write(low)
	// Let gpuguard take its first samples (starting -> running).
	time.Sleep(5 * interval)
	for range n {
		// A random pause puts the crossing at a uniformly random point of
		// the polling period, as a real allocation would be.
		time.Sleep(interval + rand.N(interval))
		stale := 0
		for drained := false; !drained; {
			select {
			case <-sig:
				stale++
			default:
				drained = true
			}
		}
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

func arg(i int) string {
	if i >= len(os.Args) {
		fail("missing argument " + strconv.Itoa(i))
	}
	return os.Args[i]
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
