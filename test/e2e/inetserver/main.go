// Command inetserver stands in for "the internet" in the network tests and
// benchmarks: a static HTTP (:80) and HTTPS (:443, self-signed) server run
// in a container on a Docker network the test creates. It answers
// "hello from NAME via http|https", serves N bytes at /bytes?n=N, counts an
// upload at /sink, and at /tool/… logs the Authorization header it got to
// stdout (so a test can see an injected credential without the sandbox
// ever receiving it) and answers "tool ok". For the browser tests it serves
// a form at /form (input #q, button #go) whose submission /done shows
// "got Q" in #out, and a file to download at /download (linked from
// /download-page).
//
// With -bench URL it is instead the client of the network benchmark: it
// times -n requests on a new connection each, -n requests on one kept-alive
// connection, and one download of -bytes bytes, and prints the samples as
// one JSON line.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"io"
	"log"
	"math/big"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	name := flag.String("name", "inet", "name in answers")
	bench := flag.String("bench", "", "run as benchmark client against this base URL")
	n := flag.Int("n", 100, "benchmark: requests per latency sample")
	size := flag.Int64("bytes", 32<<20, "benchmark: bytes to download")
	flag.Parse()
	if *bench != "" {
		if err := runBench(*bench, *n, *size); err != nil {
			log.Fatal(err)
		}
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/tool/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(os.Stdout, "AUTH %s %s\n", r.URL.Path, r.Header.Get("Authorization"))
		io.WriteString(w, "tool ok\n")
	})
	mux.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		buf := make([]byte, 64<<10)
		for n > 0 {
			k := min(n, int64(len(buf)))
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	mux.HandleFunc("/sink", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d\n", n)
	})
	mux.HandleFunc("/form", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `<!doctype html><html><head><title>form</title></head><body>
<form action="/done"><input id="q" name="q"><button id="go">Go</button></form></body></html>`)
	})
	mux.HandleFunc("/done", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><html><head><title>done</title></head><body><p id="out">got %s</p></body></html>`,
			html.EscapeString(r.URL.Query().Get("q")))
	})
	mux.HandleFunc("/download-page", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `<!doctype html><html><head><title>download</title></head><body><a id="dl" href="/download">report</a></body></html>`)
	})
	mux.HandleFunc("/download", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="report.bin"`)
		w.Write(DownloadBody())
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		fmt.Fprintf(w, "hello from %s via %s\n", *name, scheme)
	})
	cert, err := selfSigned(*name)
	if err != nil {
		log.Fatal(err)
	}
	tlsSrv := &http.Server{Addr: ":443", Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ReadHeaderTimeout: 10 * time.Second}
	go func() { log.Fatal(tlsSrv.ListenAndServeTLS("", "")) }()
	srv := &http.Server{Addr: ":80", Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Println("inetserver ready")
	log.Fatal(srv.ListenAndServe())
}

func selfSigned(name string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		DNSNames: []string{strings.ToLower(name)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// benchResult is what the benchmark client prints.
type benchResult struct {
	ConnNS      []int64 `json:"conn_ns"`      // GET / on a new connection each
	KeepAliveNS []int64 `json:"keepalive_ns"` // GET / on one kept-alive connection
	Bytes       int64   `json:"bytes"`
	DownloadNS  int64   `json:"download_ns"`
}

func runBench(base string, n int, size int64) error {
	get := func(c *http.Client, url string) (int64, error) {
		resp, err := c.Get(url)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return io.Copy(io.Discard, resp.Body)
	}
	var res benchResult
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	kept := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 30 * time.Second}
	if _, err := get(kept, base+"/"); err != nil { // warm-up and connection
		return err
	}
	for range n {
		t0 := time.Now()
		if _, err := get(fresh, base+"/"); err != nil {
			return err
		}
		res.ConnNS = append(res.ConnNS, int64(time.Since(t0)))
		t0 = time.Now()
		if _, err := get(kept, base+"/"); err != nil {
			return err
		}
		res.KeepAliveNS = append(res.KeepAliveNS, int64(time.Since(t0)))
	}
	t0 := time.Now()
	got, err := get(&http.Client{Timeout: 5 * time.Minute}, fmt.Sprintf("%s/bytes?n=%d", base, size))
	if err != nil {
		return err
	}
	if got != size {
		return fmt.Errorf("downloaded %d bytes, want %d", got, size)
	}
	res.DownloadNS, res.Bytes = int64(time.Since(t0)), got
	return json.NewEncoder(os.Stdout).Encode(res)
}

// DownloadBody is what /download serves: 64 KiB of a fixed pattern, so a
// test knows its digest.
func DownloadBody() []byte {
	b := make([]byte, 64<<10)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}
