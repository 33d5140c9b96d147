// Command sandboxserver runs inside a sandbox in the port tests and
// benchmarks (uploaded through the file API, started as a background job).
// It listens only on the sandbox's loopback:
//
//	sandboxserver wsecho -addr 127.0.0.1:8001   WebSocket echo at /ws, "ok" at /
//	sandboxserver tcp -addr 127.0.0.1:9000      TCP: "echo" mode copies back,
//	                                            a first line "send N" sends N bytes,
//	                                            "sink N" reads N bytes and answers the count
//	sandboxserver origins -addr 127.0.0.1:8002  a hostile page for the origin tests (origins.go)
//	sandboxserver get -url URL -n N             N sequential GETs on one connection,
//	                                            the latencies in µs as one JSON line
//	sandboxserver headers -addr 127.0.0.1:8002  answers every request with the headers it
//	                                            received as JSON (a WebSocket: as its first message)
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
)

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: sandboxserver wsecho|tcp|get|headers [flags]")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:8001", "listen address")
	url := fs.String("url", "", "URL to GET")
	n := fs.Int("n", 100, "requests")
	fs.Parse(os.Args[2:])
	switch os.Args[1] {
	case "wsecho":
		log.Fatal(wsEcho(*addr))
	case "tcp":
		log.Fatal(tcpServer(*addr))
	case "headers":
		log.Fatal(headersServer(*addr))
	case "origins":
		log.Fatal(originsServer(*addr))
	case "get":
		if err := get(*url, *n); err != nil {
			log.Fatal(err)
		}
	default:
		log.Fatalf("unknown mode %q", os.Args[1])
	}
}

func wsEcho(addr string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "ok %s %s", r.Method, r.URL.RequestURI())
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(16 << 20)
		for {
			typ, b, err := c.Read(context.Background())
			if err != nil {
				return
			}
			if err := c.Write(context.Background(), typ, append([]byte("echo:"), b...)); err != nil {
				return
			}
		}
	})
	return http.ListenAndServe(addr, mux)
}

func tcpServer(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go serveTCP(c)
	}
}

func serveTCP(c net.Conn) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 64<<10)
	line, err := br.ReadString('\n')
	if err != nil {
		return
	}
	cmd := strings.Fields(line)
	switch {
	case len(cmd) == 2 && cmd[0] == "send":
		n, _ := strconv.ParseInt(cmd[1], 10, 64)
		buf := make([]byte, 256<<10)
		for i := range buf {
			buf[i] = byte('a' + i%26)
		}
		for n > 0 {
			k := min(int64(len(buf)), n)
			if _, err := c.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	case len(cmd) == 2 && cmd[0] == "sink":
		want, _ := strconv.ParseInt(cmd[1], 10, 64)
		n, _ := io.CopyN(io.Discard, br, want)
		fmt.Fprintf(c, "%d\n", n)
	default: // echo, the first line included
		c.Write([]byte(line))
		io.Copy(c, br)
	}
}

func get(url string, n int) error {
	tr := &http.Transport{MaxIdleConnsPerHost: 1}
	hc := &http.Client{Transport: tr}
	us := make([]int64, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		us = append(us, time.Since(start).Microseconds())
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"us": us})
}

// seenRequest is what the headers server answers: the request as it
// arrived.
type seenRequest struct {
	Method    string              `json:"method"`
	Path      string              `json:"path"`
	Host      string              `json:"host"`
	Headers   map[string][]string `json:"headers"`
	WebSocket bool                `json:"websocket"`
}

func headersServer(addr string) error {
	return http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen := seenRequest{Method: r.Method, Path: r.URL.RequestURI(), Host: r.Host, Headers: r.Header}
		if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
			seen.WebSocket = true
			b, _ := json.Marshal(seen) // before Accept: the headers as they came
			c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
			if err != nil {
				return
			}
			defer c.CloseNow()
			ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
			defer cancel()
			if err := c.Write(ctx, websocket.MessageText, b); err == nil {
				c.Close(websocket.StatusNormalClosure, "")
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(seen)
	}))
}
