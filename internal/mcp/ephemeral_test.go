package mcp_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/internal/mcp"
)

// TestEphemeralCallsGetAServerEach: with CallBackend every tools/call goes
// to a server started for it (its progress forwarded, its record naming
// it) and ended after it, whatever the outcome; the lists stay with the
// instance's own server; a server that cannot be started fails that call
// alone.
func TestEphemeralCallsGetAServerEach(t *testing.T) {
	var (
		mu      sync.Mutex
		started []*backend
		ended   int
		fail    bool
	)
	cfg := mcp.Config{CallTimeout: 2 * time.Second, CallCeiling: 10 * time.Second}
	cfg.CallBackend = func(context.Context) (sdk.Transport, string, func(), error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return nil, "", nil, errors.New("no capacity")
		}
		b := startBackend(t, "serve", 0)
		started = append(started, b)
		return b.stdio, fmt.Sprintf("proc-%d", len(started)), func() {
			mu.Lock()
			ended++
			mu.Unlock()
			_ = b.cmd.Process.Kill()
		}, nil
	}
	s := newSetup(t, "serve", cfg)
	var progress atomic.Int32
	cs := connect(t, s.url, "2025-11-25", &sdk.ClientOptions{ProgressNotificationHandler: func(context.Context, *sdk.ProgressNotificationClientRequest) {
		progress.Add(1)
	}}, nil)
	if tools, err := cs.ListTools(ctx10(t), nil); err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list: %v", err)
	}
	for i := range 2 {
		res, err := cs.CallTool(ctx10(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": fmt.Sprint(i)}})
		if err != nil || textOf(t, res) != fmt.Sprintf("echo: %d", i) {
			t.Fatalf("echo %d: %v", i, err)
		}
	}
	params := &sdk.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 3, "step_ms": 50}}
	params.SetProgressToken("p")
	if res, err := cs.CallTool(ctx10(t), params); err != nil || textOf(t, res) != "done after 3 steps" {
		t.Fatalf("slow: %v", err)
	}
	waitFor(t, "three progress notifications from the call's own server", func() bool { return progress.Load() == 3 })
	mu.Lock()
	fail = true
	mu.Unlock()
	if _, err := cs.CallTool(ctx10(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err == nil {
		t.Fatal("a call whose server could not start succeeded")
	}
	if res, err := cs.ListTools(ctx10(t), nil); err != nil || len(res.Tools) == 0 {
		t.Fatalf("the instance's own server after a failed call: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(started) != 3 || ended != 3 {
		t.Fatalf("%d call servers started, %d ended; want 3 and 3", len(started), ended)
	}
	var where []string
	for _, r := range s.records() {
		if r.Method == "tools/call" {
			where = append(where, r.SandboxID+"/"+r.Outcome)
		}
	}
	if fmt.Sprint(where) != "[proc-1/ok proc-2/ok proc-3/ok /error]" {
		t.Fatalf("call records %v", where)
	}
}
