// Command probe plays a sandbox's code (and a stray server) inside test
// containers for the gateway's Docker tests. It is built static and
// bind-mounted; it uses only the system resolver (/etc/resolv.conf), so it
// sees exactly what code in a sandbox sees.
//
//	probe serve ADDR                       answer "target" over TCP on ADDR
//	probe check ALLOWED DENIED CA PROXY DIRECT   print one JSON object of results
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"
)

func main() {
	switch {
	case len(os.Args) == 3 && os.Args[1] == "serve":
		l, err := net.Listen("tcp", os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for {
			c, err := l.Accept()
			if err != nil {
				os.Exit(1)
			}
			io.WriteString(c, "target\n")
			c.Close()
		}
	case len(os.Args) == 7 && os.Args[1] == "check":
		check(os.Args[2], os.Args[3], os.Args[4], os.Args[5], os.Args[6])
	default:
		fmt.Fprintln(os.Stderr, "usage: probe serve ADDR | probe check ALLOWED DENIED CA PROXY DIRECT")
		os.Exit(2)
	}
}

func check(allowed, denied, caFile, proxy, direct string) {
	out := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := &net.Resolver{PreferGo: true}
	if a, err := r.LookupHost(ctx, allowed); err != nil {
		out["lookup_allowed"] = "error: " + err.Error()
	} else {
		out["lookup_allowed"] = a[0]
	}
	if _, err := r.LookupHost(ctx, denied); err != nil {
		if de, ok := err.(*net.DNSError); ok && de.IsNotFound {
			out["lookup_denied"] = "nxdomain"
		} else {
			out["lookup_denied"] = "error: " + err.Error()
		}
	} else {
		out["lookup_denied"] = "resolved"
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		out["ca"] = err.Error()
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	direct2 := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, Proxy: nil}}
	pu, _ := url.Parse(proxy)
	proxied := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, Proxy: http.ProxyURL(pu)}}
	out["http"] = get(direct2, "http://"+allowed+"/plain")
	out["https"] = get(direct2, "https://"+allowed+"/tls")
	out["https_proxy"] = get(proxied, "https://"+allowed+"/connect")
	out["http_denied"] = get(direct2, "http://"+denied+"/")
	if c, err := net.DialTimeout("tcp", direct, 3*time.Second); err != nil {
		out["direct"] = "blocked: " + err.Error()
	} else {
		b, _ := io.ReadAll(c)
		c.Close()
		out["direct"] = "connected: " + string(b)
	}
	json.NewEncoder(os.Stdout).Encode(out)
}

func get(c *http.Client, u string) string {
	resp, err := c.Get(u)
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}
