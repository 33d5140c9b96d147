package agentclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

// failingReader yields n bytes, then fails with err (calling before first).
type failingReader struct {
	n      int
	before func()
	err    error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		if f.before != nil {
			f.before()
		}
		return 0, f.err
	}
	m := min(len(p), f.n)
	clear(p[:m])
	f.n -= m
	return m, nil
}

// TestWriteFileAbortWaitsForTheAgent: an upload whose source fails or
// whose ctx ends is ended with the abort trailer, and WriteFile returns
// only with the agent's answer to it (which the agent gives after removing
// its temporary file).
func TestWriteFileAbortWaitsForTheAgent(t *testing.T) {
	t.Parallel()
	sock, _ := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		why := r.Trailer.Get(agentproto.TrailerUploadAbort)
		switch {
		case err != nil:
			writeJSON(w, 400, agentproto.Error{Code: "invalid_argument", Message: "body failed at the agent: " + err.Error()})
		case why != "":
			writeJSON(w, 400, agentproto.Error{Code: "invalid_argument", Message: "aborted after " + r.Header.Get(agentproto.HeaderUploadSize) + " announced: temporary file removed"})
		default:
			writeJSON(w, 201, agentproto.FileWriteResult{Size: n})
		}
	})
	c := Dial(sock)
	defer c.Close()
	req := WriteFileRequest{Path: "/workspace/f", MaxBytes: -1, Size: 1000}

	if res, err := c.WriteFile(context.Background(), req, strings.NewReader(strings.Repeat("x", 1000))); err != nil || res.Size != 1000 {
		t.Fatalf("whole upload: %+v %v", res, err)
	}

	gone := errors.New("sender went away")
	_, err := c.WriteFile(context.Background(), req, &failingReader{n: 300, err: gone})
	if !errors.Is(err, gone) || !strings.Contains(err.Error(), "aborted after 1000 announced: temporary file removed") {
		t.Errorf("failed source: err = %v; want it to wrap the source's error and carry the agent's answer", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = c.WriteFile(ctx, req, &failingReader{n: 300, before: cancel, err: context.Canceled})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("ended ctx: err = %v, want context.Canceled", err)
	}
}
