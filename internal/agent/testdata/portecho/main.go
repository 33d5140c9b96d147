// Command portecho is the far end of BenchmarkPortSplice inside a sandbox
// container: an echo service on the sandbox's loopback, and the direct
// client that times the same exchange without the agent in between.
//
// Usage:
//
//	portecho serve PORT     echo every connection's bytes back
//	portecho probe PORT ROUNDS IDLEROUNDS IDLEMS
//	                        time ROUNDS exchanges back to back and
//	                        IDLEROUNDS after IDLEMS of idleness each
//
// probe prints one line per way: "NAME p50_µs p90_µs".
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"time"
)

// msgSize is the size of one request and of its answer: a small DevTools
// command.
const msgSize = 128

func main() {
	if len(os.Args) < 3 {
		usage()
	}
	port, err := strconv.Atoi(os.Args[2])
	if err != nil {
		usage()
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	switch {
	case os.Args[1] == "serve" && len(os.Args) == 3:
		serve(addr)
	case os.Args[1] == "probe" && len(os.Args) == 6:
		rounds, err1 := strconv.Atoi(os.Args[3])
		idleRounds, err2 := strconv.Atoi(os.Args[4])
		idle, err3 := strconv.Atoi(os.Args[5])
		if err1 != nil || err2 != nil || err3 != nil || rounds < 1 || idleRounds < 1 || idle < 0 {
			usage()
		}
		probe(addr, rounds, idleRounds, time.Duration(idle)*time.Millisecond)
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: portecho serve PORT | portecho probe PORT ROUNDS IDLEROUNDS IDLEMS")
	os.Exit(2)
}

func serve(addr string) {
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "portecho:", err)
		os.Exit(1)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "portecho:", err)
			os.Exit(1)
		}
		go func() {
			defer c.Close()
			io.Copy(c, c)
		}()
	}
}

func probe(addr string, rounds, idleRounds int, idle time.Duration) {
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "portecho:", err)
		os.Exit(1)
	}
	defer c.Close()
	msg := make([]byte, msgSize)
	got := make([]byte, msgSize)
	exchange := func() time.Duration {
		start := time.Now()
		if _, err := c.Write(msg); err != nil {
			fmt.Fprintln(os.Stderr, "portecho:", err)
			os.Exit(1)
		}
		if _, err := io.ReadFull(c, got); err != nil {
			fmt.Fprintln(os.Stderr, "portecho:", err)
			os.Exit(1)
		}
		return time.Since(start)
	}
	for range 10 {
		exchange()
	}
	var b2b, afterIdle []time.Duration
	for range rounds {
		b2b = append(b2b, exchange())
	}
	for range idleRounds {
		time.Sleep(idle)
		afterIdle = append(afterIdle, exchange())
	}
	for _, w := range []struct {
		name string
		d    []time.Duration
	}{{"direct", b2b}, {"direct-idle", afterIdle}} {
		slices.Sort(w.d)
		fmt.Printf("%s %d %d\n", w.name, w.d[len(w.d)/2].Microseconds(), w.d[len(w.d)*9/10].Microseconds())
	}
}
