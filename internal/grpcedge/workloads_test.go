package grpcedge

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	sandboxv1 "genesis.dev/sandbox/gen/genesis/sandbox/v1"
	"genesis.dev/sandbox/gen/genesis/sandbox/v1/sandboxv1connect"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
)

// TestSendChunks: a download is cut in messages of at most chunkBytes,
// contiguous from its offset; an empty one is one empty message (it
// carries the size); a source that ends short of (or goes past) what it
// announced is an error, never a short success.
func TestSendChunks(t *testing.T) {
	t.Parallel()
	data := bytes.Repeat([]byte("0123456789abcdef"), (2*chunkBytes+100)/16+1)
	data = data[:2*chunkBytes+100]
	for _, tc := range []struct {
		name    string
		src     []byte
		want    int64
		msgs    int
		wantErr bool
	}{
		{"whole", data, int64(len(data)), 3, false},
		{"unknown length", data, -1, 3, false},
		{"empty", nil, 0, 1, false},
		{"exact chunk", data[:chunkBytes], chunkBytes, 1, false},
		{"short source", data[:1000], 2000, 1, true},
		{"long source", data[:3000], 2000, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got bytes.Buffer
			msgs, firsts := 0, 0
			err := sendChunks(bytes.NewReader(tc.src), 7, tc.want, func(first bool, off int64, b []byte) error {
				if first {
					firsts++
				}
				if off != 7+int64(got.Len()) {
					t.Errorf("message %d at offset %d, want %d", msgs, off, 7+got.Len())
				}
				if len(b) > chunkBytes {
					t.Errorf("message of %d bytes", len(b))
				}
				msgs++
				got.Write(b)
				return nil
			})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "2000") {
					t.Errorf("err = %v; want unavailable naming the announced length", err)
				}
				return
			}
			if msgs != tc.msgs || firsts != 1 || !bytes.Equal(got.Bytes(), tc.src) {
				t.Errorf("%d messages (%d first), %d bytes; want %d messages, the source's %d bytes", msgs, firsts, got.Len(), tc.msgs, len(tc.src))
			}
		})
	}
}

// TestByteRange: negative offsets and lengths are INVALID_ARGUMENT.
func TestByteRange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		off, n int64
		ok     bool
	}{{0, 0, true}, {5, 0, true}, {0, 5, true}, {-1, 0, false}, {0, -1, false}} {
		err := byteRange(tc.off, tc.n)
		if (err == nil) != tc.ok || (err != nil && (!errors.Is(err, errdefs.ErrInvalidArgument) || errdefs.Code(err) != "invalid_range")) {
			t.Errorf("byteRange(%d, %d) = %v", tc.off, tc.n, err)
		}
	}
}

// TestWorkloadsMissing: an edge built without a file gateway, artifact
// store or snapshot manager answers their RPCs UNIMPLEMENTED with reason
// not_supported (HTTP serves no route for them), audits the mutating ones
// and not the reads, and a Download's negative offset is INVALID_ARGUMENT
// before anything is asked of the sandbox.
func TestWorkloadsMissing(t *testing.T) {
	t.Parallel()
	e, ft := testEdge(t)
	srv := httptest.NewUnstartedServer(e.Handler())
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	fc := sandboxv1connect.NewFileServiceClient(srv.Client(), srv.URL, connect.WithGRPC())
	sc := sandboxv1connect.NewSnapshotServiceClient(srv.Client(), srv.URL, connect.WithGRPC())
	ac := sandboxv1connect.NewArtifactServiceClient(srv.Client(), srv.URL, connect.WithGRPC())
	ctx := context.Background()

	wantUnsupported := func(what string, err error) {
		t.Helper()
		ce, info := connectError(t, err)
		if ce.Code() != connect.CodeUnimplemented || info == nil || info.Reason != "not_supported" {
			t.Errorf("%s: %v %v; want UNIMPLEMENTED not_supported", what, err, info)
		}
	}
	_, err := sc.PauseSandbox(ctx, withKeyHeader("good", &sandboxv1.PauseSandboxRequest{SandboxId: "sbx_1"}))
	wantUnsupported("PauseSandbox", err)
	_, err = fc.Stat(ctx, withKeyHeader("good", &sandboxv1.StatRequest{SandboxId: "sbx_1", Path: "a"}))
	wantUnsupported("Stat", err)
	_, err = ac.GetArtifact(ctx, withKeyHeader("good", &sandboxv1.GetArtifactRequest{ArtifactId: "art_1"}))
	wantUnsupported("GetArtifact", err)
	up := fc.Upload(ctx)
	up.RequestHeader().Set("Authorization", "Bearer good")
	_ = up.Send(&sandboxv1.UploadRequest{SandboxId: "sbx_1", Path: "a", Data: []byte("x")})
	_, err = up.CloseAndReceive()
	wantUnsupported("Upload", err)

	recs := ft.audit()
	if len(recs) != 2 || recs[0].Action != "RPC "+sandboxv1connect.SnapshotServicePauseSandboxProcedure || recs[0].Target != "sbx_1" ||
		recs[0].Status != http.StatusNotImplemented || recs[1].Action != "RPC "+sandboxv1connect.FileServiceUploadProcedure {
		t.Errorf("audit records %+v; want PauseSandbox and Upload only", recs)
	}
}

// TestWorkloadConversionsCarryEveryField: every field of the messages of
// files, sessions, artifacts and snapshots is carried from a fully
// populated domain value.
func TestWorkloadConversionsCarryEveryField(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	later := now.Add(time.Hour)
	allSet(t, "FileInfo", fileInfoPB(files.FileInfo{Path: "/workspace/a", Name: "a", Type: "symlink", Size: 3, Mode: "0644", ModTime: now,
		UID: 1, GID: 2, LinkTarget: "b", NameInvalidUTF8: true}), nil)
	allSet(t, "Session", sessionPB(&sandbox.Session{ID: "ses_1", SandboxID: "sbx_1", Kind: "shell", State: "active", LastJobID: "job_1",
		Runs: 2, CreatedAt: now, UpdatedAt: now}), nil)
	code := 0
	value := "42"
	allSet(t, "RunCodeResult", runCodePB(&jobs.RunResult{
		Exec:   &jobs.ExecOutput{Job: &sandbox.Job{ID: "job_1", ExitCode: &code}, Stdout: []byte("o"), Stderr: []byte("e"), DurationMS: 5},
		Status: "error", Value: &value, Error: &jobs.CodeError{Name: "E", Value: "v", Traceback: []string{"t"}},
		Outputs: []jobs.RichOutput{{MIME: "image/png", Data: "iVBO"}}, Warnings: []string{"w"},
	}), nil)
	allSet(t, "Artifact", artifactPB(&sandbox.Artifact{ID: "art_1", JobID: "job_1", SandboxID: "sbx_1", Path: "out/a", Name: "a", Size: 1,
		SHA256: "ab", MIME: "text/plain", CreatedAt: now, ExpiresAt: later}), nil)
	allSet(t, "Snapshot", snapshotPB(&sandbox.Snapshot{ID: "snp_1", Name: "n", SandboxID: "sbx_1", Parent: "snp_0", State: "ready",
		Profile: "p", Runtime: "runsc", RiskLevel: "high", Resources: sandbox.Resources{CPU: 1, MemoryMB: 1, Pids: 1, DiskMB: 1},
		Memory: true, SizeBytes: 9, Error: "e", CreatedAt: now, ExpiresAt: &later}), nil)
}
