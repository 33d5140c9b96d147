package mcpserve

import (
	"context"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// heartbeat sends the caller a progress notification every
// ProgressInterval while a long call runs, when it asked for progress (a
// progress token): how long the call has run. stop ends it.
func (s *Server) heartbeat(ctx context.Context, req *sdk.CallToolRequest, what string) (stop func()) {
	if req == nil || req.Session == nil || req.Params == nil {
		return func() {}
	}
	tok := req.Params.GetProgressToken()
	if tok == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(s.cfg.ProgressInterval)
		defer tick.Stop()
		start := time.Now() // wall time the caller reads, not the service clock
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: float64(n),
					Message: fmt.Sprintf("%s: running for %s", what, time.Since(start).Round(time.Second))})
			}
		}
	}()
	return func() { cancel(); <-done }
}
