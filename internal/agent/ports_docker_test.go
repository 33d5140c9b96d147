package agent_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// TestDialPortInContainers reaches a listener inside a --network none
// container through the agent, under runc and runsc.
func TestDialPortInContainers(t *testing.T) {
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			if !slices.Contains(runtimesUnderTest(t), rt) {
				t.Skipf("docker runtime %s not configured", rt)
			}
			c := startContainer(t, rt)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			// A persistent echo service on the sandbox's loopback.
			if _, err := c.client.StartJob(ctx, agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{
				JobID: "echo", Command: []string{"nc", "-ll", "-p", "8000", "-e", "cat"},
			}}); err != nil {
				t.Fatal(err)
			}
			var conn interface{ Close() error }
			for {
				nc, err := c.client.DialPort(ctx, 8000)
				if err == nil {
					conn = nc
					roundTrip(t, nc, randomBytes(t, 2<<20))
					break
				}
				if errdefs.Code(err) != agentproto.CodePortUnreachable || ctx.Err() != nil {
					t.Fatalf("dial the echo service: %v", err)
				}
				time.Sleep(10 * time.Millisecond)
			}
			conn.Close()
			// A second connection to the same service.
			roundTrip(t, dialPort(t, c.client, 8000), []byte("again\n"))

			start := time.Now()
			_, err := c.client.DialPort(ctx, 8001)
			if !errors.Is(err, errdefs.ErrBadGateway) || errdefs.Code(err) != agentproto.CodePortUnreachable {
				t.Fatalf("dial a closed port: %v", err)
			}
			if el := time.Since(start); el > 3*time.Second {
				t.Errorf("dial of a closed port took %v", el)
			}
		})
	}
}
