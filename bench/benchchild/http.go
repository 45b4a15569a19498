package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// serveHTTP is a stand-in model server for the front door's benchmarks:
// it "loads" for load (nothing listens meanwhile, as with vLLM), then
// answers GET /health with 200 and any other request after work, and
// exits 0 at once on SIGTERM (the door has drained it by then).
func serveHTTP(addr string, load, work time.Duration) {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	go func() {
		<-stop
		os.Exit(0)
	}()
	time.Sleep(load)
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(work)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"profile":%q}`, os.Getenv("GPUGUARD_PROFILE"))
	})
	fmt.Println("listening")
	if err := http.ListenAndServe(addr, mux); err != nil {
		fail(err.Error())
	}
}
