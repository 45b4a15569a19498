// Command plainproxy is the field's plain reverse proxy, for the model
// door's latency benchmark: httputil.NewSingleHostReverseProxy in a
// process of its own, in front of -upstream, with no routing and no
// checks. What it adds to a round trip is the floor of one more Go HTTP
// hop on the machine, against which the door's own cost is read.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	upstream := flag.String("upstream", "", "base URL of the server behind")
	flag.Parse()
	u, err := url.Parse(*upstream)
	if err != nil || u.Host == "" {
		fmt.Fprintf(os.Stderr, "plainproxy: -upstream %q: want a base URL\n", *upstream)
		os.Exit(2)
	}
	p := httputil.NewSingleHostReverseProxy(u)
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256 // the default (2) would open a connection per request under load
	p.Transport = t
	if err := http.ListenAndServe(*listen, p); err != nil {
		fmt.Fprintln(os.Stderr, "plainproxy:", err)
		os.Exit(1)
	}
}
