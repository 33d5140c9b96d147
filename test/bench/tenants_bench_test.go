package bench

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// BenchmarkAuthenticatedRequest measures what authentication costs a
// request: GET /v1/sandboxes (an empty list, no Docker involved) with a key
// from the command line (compared in memory) and with a key created through
// the admin API (looked up in the store on every request, so that a
// revocation takes effect at once), sequentially over one keep-alive
// connection. It also checks that the request right after a revocation is
// refused.
func BenchmarkAuthenticatedRequest(b *testing.B) {
	s := startService(b)
	iters := envInt(b, "GENESIS_BENCH_AUTH_ITERS", 2000)
	const warmup = 50
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	admin := client.New(s.url, benchAdminKey, client.WithHTTPClient(s.http))
	if _, err := admin.CreateTenant(ctx, client.CreateTenantRequest{Name: "bench"}); err != nil && client.ErrorCode(err) != "tenant_exists" {
		b.Fatal(err)
	}
	key, err := admin.CreateAPIKey(ctx, "bench", client.CreateAPIKeyRequest{Description: "benchmark"})
	if err != nil {
		b.Fatal(err)
	}
	tbl := NewTable("key", "n", "p50 ms", "p99 ms", "mean ms", "min ms", "max ms")
	for _, k := range []struct{ name, key string }{{"config", s.key}, {"stored", key.Key}} {
		b.Run(k.name, func(b *testing.B) {
			c := client.New(s.url, k.key, client.WithHTTPClient(s.http))
			call := func() error {
				_, err := c.ListSandboxes(ctx, client.ListSandboxesOptions{Profile: "none"})
				return err
			}
			for range warmup {
				if err := call(); err != nil {
					b.Fatal(err)
				}
			}
			samples := make([]time.Duration, 0, iters)
			for range iters {
				t0 := time.Now()
				if err := call(); err != nil {
					b.Fatal(err)
				}
				samples = append(samples, time.Since(t0))
			}
			sum := Summarize(samples)
			reportSummary(b, "", sum)
			tbl.Row(k.name, strconv.Itoa(sum.N), FormatMs(sum.P50), FormatMs(sum.P99), FormatMs(sum.Mean), FormatMs(sum.Min), FormatMs(sum.Max))
		})
	}
	if err := admin.RevokeAPIKey(ctx, "bench", key.ID); err != nil {
		b.Fatal(err)
	}
	if _, err := client.New(s.url, key.Key, client.WithHTTPClient(s.http)).ListSandboxes(ctx, client.ListSandboxesOptions{}); client.ErrorCode(err) != "unauthenticated" {
		b.Fatalf("the request after the revocation: %v, want 401", err)
	}
	printTable(fmt.Sprintf("GET /v1/sandboxes with a config key and a stored key, sequential after %d warm-ups, ms", warmup), tbl)
}
