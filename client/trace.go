package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"genesis.dev/sandbox/api"
)

// TracePage reads up to limit events after the cursor after.
func (c *Client) TracePage(ctx context.Context, sandboxID string, after int64, limit int) (*TracePage, error) {
	q := url.Values{"format": {"json"}, "after": {strconv.FormatInt(after, 10)}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out TracePage
	if err := c.do(ctx, request{method: http.MethodGet, path: TracePath(sandboxID), query: q, auth: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PostTraceEvent adds an annotation or task status to the trace.
func (c *Client) PostTraceEvent(ctx context.Context, sandboxID string, req TraceEventRequest) (*TraceEvent, error) {
	var out TraceEvent
	if err := c.do(ctx, request{method: http.MethodPost, path: TracePath(sandboxID) + "/events", body: req, auth: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// FollowTrace calls fn with each event after cursor, in order, until ctx
// ends, fn fails or (follow false) the trace's end. A dropped connection is
// resumed after the last event seen, so fn sees every event once.
func (c *Client) FollowTrace(ctx context.Context, sandboxID string, cursor int64, follow bool, fn func(TraceEvent) error) error {
	for {
		done, err := c.traceOnce(ctx, sandboxID, &cursor, follow, fn)
		if done || ctx.Err() != nil {
			if ctx.Err() != nil && err == nil {
				err = ctx.Err()
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// traceOnce reads one connection's worth of the trace; done reports
// whether nothing is left to retry.
func (c *Client) traceOnce(ctx context.Context, sandboxID string, cursor *int64, follow bool, fn func(TraceEvent) error) (bool, error) {
	q := url.Values{"cursor": {strconv.FormatInt(*cursor, 10)}, "follow": {strconv.FormatBool(follow)}}
	resp, err := c.send(ctx, request{method: http.MethodGet, path: TracePath(sandboxID), query: q, auth: true,
		header: http.Header{"Accept": {"text/event-stream"}, "Cache-Control": {"no-cache"}}})
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		e := newAPIError(resp.StatusCode, resp.Header, body)
		switch resp.StatusCode {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return false, e
		}
		return true, e
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return true, fmt.Errorf("GET %s: answer is %q, not text/event-stream", TracePath(sandboxID), resp.Header.Get("Content-Type"))
	}
	rd := newSSEReader(resp.Body)
	for {
		ev, err := rd.next()
		if errors.Is(err, io.EOF) {
			return !follow, nil
		}
		if err != nil {
			return false, err
		}
		switch ev.Event {
		case "trace":
			var te TraceEvent
			if err := json.Unmarshal(ev.Data, &te); err != nil {
				return true, fmt.Errorf("trace event: %w", err)
			}
			if te.Seq != *cursor+1 {
				return true, fmt.Errorf("trace event %d after cursor %d", te.Seq, *cursor)
			}
			if err := fn(te); err != nil {
				return true, err
			}
			*cursor = te.Seq
		case "error":
			return true, fmt.Errorf("trace stream: %s", ev.Data)
		}
	}
}

// InterruptTrace pauses, resumes, steps or aborts the agent of a sandbox
// (op is one of those words); actor is "" (api) or human:<who>.
func (c *Client) InterruptTrace(ctx context.Context, sandboxID, op, actor string) (*TraceInterruption, error) {
	var out TraceInterruption
	body := api.TraceInterruptRequest{Actor: actor}
	if err := c.do(ctx, request{method: http.MethodPost, path: TracePath(sandboxID) + "/" + url.PathEscape(op), body: body, auth: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ExportTrace downloads the trace as a tar.gz (events.jsonl, the
// screenshots the events name, manifest.json with sha256s); the caller
// closes it.
func (c *Client) ExportTrace(ctx context.Context, sandboxID string) (io.ReadCloser, error) {
	resp, err := c.send(ctx, request{method: http.MethodGet, path: TracePath(sandboxID) + "/export", auth: true})
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
		return nil, newAPIError(resp.StatusCode, resp.Header, body)
	}
	return resp.Body, nil
}

// ReplayTrace calls POST /v1/traces/{id}/replay: the agent actions
// recorded in sandbox's trace are run again, in order, on target.
func (c *Client) ReplayTrace(ctx context.Context, sandboxID string, req ReplayRequest) (*ReplayReport, error) {
	p, err := idPath("/v1/traces/", sandboxID)
	if err != nil {
		return nil, err
	}
	var v ReplayReport
	if err := c.do(ctx, request{method: http.MethodPost, path: p + "/replay", auth: true, body: req}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
