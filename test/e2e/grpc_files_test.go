package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"genesis.dev/sandbox/client"
	sandboxv1 "genesis.dev/sandbox/gen/genesis/sandbox/v1"
	"genesis.dev/sandbox/gen/genesis/sandbox/v1/sandboxv1connect"
)

// gfClient calls the service's gRPC edge with the official grpc-go client
// (not connect-go), by procedure name with the generated messages: the
// same bytes any language's generated stub sends.
type gfClient struct {
	t    *testing.T
	conn *grpc.ClientConn
	key  string
}

func newGFClient(t *testing.T, svc *service, key string) *gfClient {
	t.Helper()
	return &gfClient{t: t, conn: grpcConn(t, svc), key: key}
}

// ctx is a call context with the client's key and the harness's deadline.
func (c *gfClient) ctx(t *testing.T) context.Context {
	return metadata.AppendToOutgoingContext(callCtx(t), "authorization", "Bearer "+c.key)
}

func (c *gfClient) call(t *testing.T, procedure string, in, out proto.Message) error {
	return c.conn.Invoke(c.ctx(t), procedure, in, out)
}

// upload streams data to path in messages of chunk bytes.
func (c *gfClient) upload(ctx context.Context, first *sandboxv1.UploadRequest, data []byte, chunk int) (*sandboxv1.FileWritten, error) {
	cs, err := c.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, sandboxv1connect.FileServiceUploadProcedure)
	if err != nil {
		return nil, err
	}
	msg := first
	for {
		n := min(chunk, len(data))
		msg.Data, data = data[:n], data[n:]
		if err := cs.SendMsg(msg); err != nil {
			break // io.EOF: the server ended the call; RecvMsg has its status
		}
		if len(data) == 0 {
			break
		}
		msg = &sandboxv1.UploadRequest{}
	}
	if err := cs.CloseSend(); err != nil {
		return nil, err
	}
	out := new(sandboxv1.FileWritten)
	if err := cs.RecvMsg(out); err != nil {
		return nil, err
	}
	return out, nil
}

// download reads a Download stream whole, checking that the chunks are
// contiguous from offset; it returns the bytes and the first message.
func (c *gfClient) download(t *testing.T, req *sandboxv1.DownloadRequest) ([]byte, *sandboxv1.DownloadResponse, error) {
	cs, err := c.conn.NewStream(c.ctx(t), &grpc.StreamDesc{ServerStreams: true}, sandboxv1connect.FileServiceDownloadProcedure)
	if err != nil {
		return nil, nil, err
	}
	if err := cs.SendMsg(req); err != nil {
		return nil, nil, err
	}
	if err := cs.CloseSend(); err != nil {
		return nil, nil, err
	}
	var buf bytes.Buffer
	var first *sandboxv1.DownloadResponse
	for {
		m := new(sandboxv1.DownloadResponse)
		err := cs.RecvMsg(m)
		if errors.Is(err, io.EOF) {
			return buf.Bytes(), first, nil
		}
		if err != nil {
			return nil, nil, err
		}
		if first == nil {
			first = m
		}
		if want := req.Offset + int64(buf.Len()); m.Offset != want {
			t.Fatalf("a chunk at offset %d, want %d", m.Offset, want)
		}
		if len(m.Data) > 256<<10 {
			t.Fatalf("a chunk of %d bytes, over 256 KiB", len(m.Data))
		}
		buf.Write(m.Data)
	}
}

// downloadArtifact reads a DownloadArtifact stream whole.
func (c *gfClient) downloadArtifact(t *testing.T, req *sandboxv1.DownloadArtifactRequest) ([]byte, error) {
	cs, err := c.conn.NewStream(c.ctx(t), &grpc.StreamDesc{ServerStreams: true}, sandboxv1connect.ArtifactServiceDownloadArtifactProcedure)
	if err != nil {
		return nil, err
	}
	if err := cs.SendMsg(req); err != nil {
		return nil, err
	}
	if err := cs.CloseSend(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for {
		m := new(sandboxv1.DownloadArtifactResponse)
		err := cs.RecvMsg(m)
		if errors.Is(err, io.EOF) {
			return buf.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
		buf.Write(m.Data)
	}
}

// wantGRPCCode fails t unless err is a gRPC status of code whose
// ErrorInfo detail carries a stable reason and the request id.
func wantGRPCCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != code {
		t.Errorf("%s: %v; want %s", what, err, code)
		return
	}
	if code == codes.ResourceExhausted && len(st.Details()) == 0 {
		return // the receive limit is enforced by the protocol layer, before any handler
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			if info.Reason == "" || info.Metadata["request_id"] == "" {
				t.Errorf("%s: ErrorInfo %+v lacks its reason or request id", what, info)
			}
			return
		}
	}
	t.Errorf("%s: %v carries no ErrorInfo detail (details %v)", what, err, st.Details())
}

// TestGRPCFiles covers FileService, SessionService, ArtifactService and
// SnapshotService over the official grpc-go client under runc and runsc:
// a 50 MiB upload streamed and ranged downloads checked byte for byte, an
// upload canceled midway leaving nothing visible, stat/list/search/batch
// replace, a shell session and a code context keeping state across runs,
// an artifact's ranged download, snapshot → change → rollback (then a
// fork, pause/resume and hibernate/wake keeping the files), another
// tenant's ids answering NOT_FOUND, and an oversized message answering
// RESOURCE_EXHAUSTED with nothing written.
func TestGRPCFiles(t *testing.T) {
	t.Parallel()
	const otherKey = "e2e-grpc-files-other-tenant-0123456789"
	e := newEnv(t, "tenants:\n  other: {api_keys: [\""+otherKey+"\"]}\n")
	e.requireImage(t, "code-python-basic")
	svc := e.start(t)
	c := svc.client()
	g, other := newGFClient(t, svc, e.apiKey), newGFClient(t, svc, otherKey)

	// 50 MiB of seeded pseudo-random bytes (the seed is logged).
	seed := testSeed(t)
	big := make([]byte, 50<<20)
	rng := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)})
	_, _ = rng.Read(big)
	bigSum := sha256.Sum256(big)

	eachRuntime(t, e, func(t *testing.T, rt string) {
		sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: "low"})
		id := sb.ID

		t.Run("upload-and-ranged-download", func(t *testing.T) {
			start := time.Now()
			size := int64(len(big))
			res, err := g.upload(g.ctx(t), &sandboxv1.UploadRequest{SandboxId: id, Path: "big.bin", Mode: "0640", Size: &size}, big, 256<<10)
			if err != nil {
				t.Fatalf("upload: %v", err)
			}
			t.Logf("50 MiB uploaded in %v", time.Since(start).Round(time.Millisecond))
			if res.Size != size || res.Sha256 != hex.EncodeToString(bigSum[:]) || res.Mode != "0640" || !strings.HasSuffix(res.Path, "/big.bin") {
				t.Fatalf("upload answered %+v", res)
			}
			for _, r := range []struct{ offset, length int64 }{
				{3<<20 + 12345, 10<<20 + 777}, // inside
				{size - 1000, 0},              // the tail, to the end
				{size - 10, 1 << 20},          // a length past the end is cut at the end
				{0, 0},                        // the whole file
			} {
				got, first, err := g.download(t, &sandboxv1.DownloadRequest{SandboxId: id, Path: "big.bin", Offset: r.offset, Length: r.length})
				if err != nil {
					t.Fatalf("download %+v: %v", r, err)
				}
				end := size
				if r.length > 0 {
					end = min(size, r.offset+r.length)
				}
				if !bytes.Equal(got, big[r.offset:end]) {
					t.Fatalf("download %+v: %d bytes that differ from the upload's [%d:%d]", r, len(got), r.offset, end)
				}
				if first.FileSize != size || first.Mode != "0640" {
					t.Errorf("download %+v: first message says size %d mode %q", r, first.FileSize, first.Mode)
				}
			}
			_, _, err = g.download(t, &sandboxv1.DownloadRequest{SandboxId: id, Path: "big.bin", Offset: size})
			wantGRPCCode(t, "download from the end", err, codes.OutOfRange)
		})

		t.Run("canceled-upload-leaves-nothing", func(t *testing.T) {
			execOK(t, c, id, "mkdir -p /workspace/cancel")
			ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+e.apiKey))
			defer cancel()
			cs, err := g.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, sandboxv1connect.FileServiceUploadProcedure)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // sends until the call is canceled (flow control paces it)
				defer wg.Done()
				msg := &sandboxv1.UploadRequest{SandboxId: id, Path: "cancel/big.bin"}
				for i := 0; i < 4096 && ctx.Err() == nil; i++ {
					msg.Data = big[:256<<10]
					if cs.SendMsg(msg) != nil {
						return
					}
					msg = &sandboxv1.UploadRequest{}
				}
			}()
			list := func() []string {
				var l sandboxv1.ListResponse
				if err := g.call(t, sandboxv1connect.FileServiceListProcedure, &sandboxv1.ListRequest{SandboxId: id, Path: "cancel"}, &l); err != nil {
					t.Fatalf("list: %v", err)
				}
				var names []string
				for _, e := range l.Entries {
					names = append(names, e.Name)
				}
				return names
			}
			statGone := func(when string) {
				err := g.call(t, sandboxv1connect.FileServiceStatProcedure, &sandboxv1.StatRequest{SandboxId: id, Path: "cancel/big.bin"}, new(sandboxv1.FileInfo))
				wantGRPCCode(t, "stat of the canceled upload "+when, err, codes.NotFound)
			}
			// The upload is under way: the agent's temporary file exists,
			// the target does not.
			eventually(t, 60*time.Second, "the upload's temporary file", func() (bool, string) {
				names := list()
				return len(names) == 1 && strings.HasPrefix(names[0], ".genesis-upload-"), strings.Join(names, ",")
			})
			statGone("while it runs")
			cancel()
			wg.Wait()
			eventually(t, 60*time.Second, "the canceled upload's temporary file is removed", func() (bool, string) {
				names := list()
				return len(names) == 0, strings.Join(names, ",")
			})
			statGone("after the cancel")

			// A stream that goes wrong without a cancel writes nothing
			// either: a later message naming another file, a stream that
			// ends short of the size it announced.
			cs, err = g.conn.NewStream(g.ctx(t), &grpc.StreamDesc{ClientStreams: true}, sandboxv1connect.FileServiceUploadProcedure)
			if err != nil {
				t.Fatal(err)
			}
			_ = cs.SendMsg(&sandboxv1.UploadRequest{SandboxId: id, Path: "cancel/big.bin", Data: big[:256<<10]})
			_ = cs.SendMsg(&sandboxv1.UploadRequest{SandboxId: id, Path: "cancel/other.bin", Data: big[:256<<10]})
			_ = cs.CloseSend()
			wantGRPCCode(t, "an upload whose second message names another file", cs.RecvMsg(new(sandboxv1.FileWritten)), codes.InvalidArgument)
			statGone("after a message named another file")
			size := int64(1 << 20)
			_, err = g.upload(g.ctx(t), &sandboxv1.UploadRequest{SandboxId: id, Path: "cancel/big.bin", Size: &size}, big[:512<<10], 256<<10)
			if status.Code(err) == codes.OK {
				t.Errorf("an upload that ended short of its size succeeded")
			}
			statGone("after an upload ended short")
			eventually(t, 60*time.Second, "the failed uploads' temporary files are removed", func() (bool, string) {
				names := list()
				return len(names) == 0, strings.Join(names, ",")
			})
		})

		t.Run("stat-list-search-replace", func(t *testing.T) {
			execOK(t, c, id, "mkdir -p /workspace/notes")
			for name, body := range map[string]string{"notes/a.txt": "one\nneedle here\nthree\n", "notes/b.txt": "nothing\n"} {
				if _, err := g.upload(g.ctx(t), &sandboxv1.UploadRequest{SandboxId: id, Path: name}, []byte(body), 1<<10); err != nil {
					t.Fatalf("upload %s: %v", name, err)
				}
			}
			var info sandboxv1.FileInfo
			if err := g.call(t, sandboxv1connect.FileServiceStatProcedure, &sandboxv1.StatRequest{SandboxId: id, Path: "notes/a.txt"}, &info); err != nil {
				t.Fatal(err)
			}
			if info.Type != "file" || info.Size != 22 || info.Name != "a.txt" || info.Mode != "0644" || info.ModifyTime == nil {
				t.Errorf("stat: %+v", &info)
			}
			var l sandboxv1.ListResponse
			if err := g.call(t, sandboxv1connect.FileServiceListProcedure, &sandboxv1.ListRequest{SandboxId: id, Path: "notes"}, &l); err != nil {
				t.Fatal(err)
			}
			if len(l.Entries) != 2 || l.Entries[0].Name != "a.txt" || l.Entries[1].Name != "b.txt" || l.Truncated {
				t.Errorf("list: %+v", &l)
			}
			var sr sandboxv1.SearchResponse
			if err := g.call(t, sandboxv1connect.FileServiceSearchProcedure, &sandboxv1.SearchRequest{SandboxId: id, Path: "notes", Content: "needle"}, &sr); err != nil {
				t.Fatal(err)
			}
			if len(sr.Matches) != 1 || !strings.HasSuffix(sr.Matches[0].Path, "notes/a.txt") || sr.Matches[0].Line != 2 || sr.Matches[0].Text != "needle here" {
				t.Errorf("search: %+v", &sr)
			}
			var rr sandboxv1.BatchReplaceResponse
			if err := g.call(t, sandboxv1connect.FileServiceBatchReplaceProcedure, &sandboxv1.BatchReplaceRequest{SandboxId: id, Path: "notes", Glob: "*.txt", Find: "needle", Replace: "thread"}, &rr); err != nil {
				t.Fatal(err)
			}
			if rr.Replacements != 1 || rr.FilesChanged != 1 || rr.Failed != 0 {
				t.Errorf("replace: %+v", &rr)
			}
			got, _, err := g.download(t, &sandboxv1.DownloadRequest{SandboxId: id, Path: "notes/a.txt"})
			if err != nil || string(got) != "one\nthread here\nthree\n" {
				t.Errorf("after the replace: %q %v", got, err)
			}
		})

		t.Run("session-and-context", func(t *testing.T) {
			var se sandboxv1.Session
			if err := g.call(t, sandboxv1connect.SessionServiceCreateSessionProcedure, &sandboxv1.CreateSessionRequest{SandboxId: id}, &se); err != nil {
				t.Fatal(err)
			}
			var r1, r2 sandboxv1.ExecResult
			if err := g.call(t, sandboxv1connect.SessionServiceExecInSessionProcedure, &sandboxv1.ExecInSessionRequest{SessionId: se.Id, Script: "cd /tmp && export GREETING=hi"}, &r1); err != nil || r1.ExitCode != 0 {
				t.Fatalf("session exec 1: %+v %v", &r1, err)
			}
			if err := g.call(t, sandboxv1connect.SessionServiceExecInSessionProcedure, &sandboxv1.ExecInSessionRequest{SessionId: se.Id, Script: "pwd; echo $GREETING"}, &r2); err != nil || string(r2.Stdout) != "/tmp\nhi\n" {
				t.Fatalf("session exec 2: %+v %v; want /tmp and hi", &r2, err)
			}
			var cx sandboxv1.Session
			if err := g.call(t, sandboxv1connect.SessionServiceCreateContextProcedure, &sandboxv1.CreateContextRequest{SandboxId: id}, &cx); err != nil {
				t.Fatal(err)
			}
			// A context id is not a session id.
			wantGRPCCode(t, "GetSession of a context", g.call(t, sandboxv1connect.SessionServiceGetSessionProcedure, &sandboxv1.GetSessionRequest{SessionId: cx.Id}, new(sandboxv1.Session)), codes.NotFound)
			var a, b sandboxv1.RunCodeResult
			if err := g.call(t, sandboxv1connect.SessionServiceRunCodeProcedure, &sandboxv1.RunCodeRequest{ContextId: cx.Id, Code: "x = 41"}, &a); err != nil || a.Status != "ok" {
				t.Fatalf("run x = 41: %+v %v", &a, err)
			}
			if err := g.call(t, sandboxv1connect.SessionServiceRunCodeProcedure, &sandboxv1.RunCodeRequest{ContextId: cx.Id, Code: "x + 1"}, &b); err != nil || b.Status != "ok" || b.Value == nil || *b.Value != "42" {
				t.Fatalf("run x + 1: %+v %v; want 42", &b, err)
			}
			var got sandboxv1.Session
			if err := g.call(t, sandboxv1connect.SessionServiceGetContextProcedure, &sandboxv1.GetContextRequest{ContextId: cx.Id}, &got); err != nil || got.Runs < 2 || got.Kind != "python" {
				t.Errorf("get context: %+v %v", &got, err)
			}
			if err := g.call(t, sandboxv1connect.SessionServiceDeleteContextProcedure, &sandboxv1.DeleteContextRequest{ContextId: cx.Id}, new(sandboxv1.DeleteContextResponse)); err != nil {
				t.Fatal(err)
			}
			err := g.call(t, sandboxv1connect.SessionServiceRunCodeProcedure, &sandboxv1.RunCodeRequest{ContextId: cx.Id, Code: "x"}, new(sandboxv1.RunCodeResult))
			if status.Code(err) == codes.OK {
				t.Errorf("a run in a deleted context succeeded")
			}

			// Another tenant sees none of it.
			wantGRPCCode(t, "another tenant's session", other.call(t, sandboxv1connect.SessionServiceExecInSessionProcedure, &sandboxv1.ExecInSessionRequest{SessionId: se.Id, Script: "true"}, new(sandboxv1.ExecResult)), codes.NotFound)
			wantGRPCCode(t, "a context in another tenant's sandbox", other.call(t, sandboxv1connect.SessionServiceCreateContextProcedure, &sandboxv1.CreateContextRequest{SandboxId: id}, new(sandboxv1.Session)), codes.NotFound)
		})

		t.Run("artifacts", func(t *testing.T) {
			res, err := c.Exec(callCtx(t), id, client.ExecRequest{Script: "head -c 300000 /workspace/big.bin > /workspace/out.bin", TimeoutMS: 30_000,
				Artifacts: &client.ArtifactRequest{Paths: []string{"out.bin"}}})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("exec with an artifact: %+v %v", res, err)
			}
			var l sandboxv1.ListArtifactsResponse
			if err := g.call(t, sandboxv1connect.ArtifactServiceListArtifactsProcedure, &sandboxv1.ListArtifactsRequest{JobId: res.JobID}, &l); err != nil {
				t.Fatal(err)
			}
			if len(l.Artifacts) != 1 || l.Artifacts[0].Size != 300000 {
				t.Fatalf("artifacts: %+v", &l)
			}
			got, err := g.downloadArtifact(t, &sandboxv1.DownloadArtifactRequest{ArtifactId: l.Artifacts[0].Id, Offset: 1000, Length: 270000})
			if err != nil || !bytes.Equal(got, big[1000:271000]) {
				t.Fatalf("ranged artifact download: %d bytes, %v", len(got), err)
			}
			wantGRPCCode(t, "another tenant's artifacts", other.call(t, sandboxv1connect.ArtifactServiceListArtifactsProcedure, &sandboxv1.ListArtifactsRequest{JobId: res.JobID}, new(sandboxv1.ListArtifactsResponse)), codes.NotFound)
			_, err = other.downloadArtifact(t, &sandboxv1.DownloadArtifactRequest{ArtifactId: l.Artifacts[0].Id})
			wantGRPCCode(t, "another tenant's artifact download", err, codes.NotFound)
		})

		t.Run("snapshot-change-rollback", func(t *testing.T) {
			put := func(path, body string) {
				t.Helper()
				if _, err := g.upload(g.ctx(t), &sandboxv1.UploadRequest{SandboxId: id, Path: path}, []byte(body), 1<<10); err != nil {
					t.Fatalf("upload %s: %v", path, err)
				}
			}
			put("state.txt", "before\n")
			var sn sandboxv1.Snapshot
			if err := g.call(t, sandboxv1connect.SnapshotServiceCreateSnapshotProcedure, &sandboxv1.CreateSnapshotRequest{SandboxId: id, Name: "base"}, &sn); err != nil {
				t.Fatal(err)
			}
			if sn.State != "ready" || sn.SandboxId != id || sn.Name != "base" {
				t.Fatalf("snapshot: %+v", &sn)
			}
			put("state.txt", "after\n")
			put("added.txt", "new\n")
			var back sandboxv1.RollbackSandboxResponse
			if err := g.call(t, sandboxv1connect.SnapshotServiceRollbackSandboxProcedure, &sandboxv1.RollbackSandboxRequest{SandboxId: id, SnapshotId: sn.Id}, &back); err != nil {
				t.Fatal(err)
			}
			if back.Sandbox.GetId() != id {
				t.Errorf("rollback answered %+v", &back)
			}
			if got, _, err := g.download(t, &sandboxv1.DownloadRequest{SandboxId: id, Path: "state.txt"}); err != nil || string(got) != "before\n" {
				t.Errorf("state.txt after the rollback: %q %v", got, err)
			}
			wantGRPCCode(t, "the file made after the snapshot", g.call(t, sandboxv1connect.FileServiceStatProcedure, &sandboxv1.StatRequest{SandboxId: id, Path: "added.txt"}, new(sandboxv1.FileInfo)), codes.NotFound)

			// A fork of it holds the rolled-back files; pause and resume.
			var fork sandboxv1.ForkSandboxResponse
			if err := g.call(t, sandboxv1connect.SnapshotServiceForkSandboxProcedure, &sandboxv1.ForkSandboxRequest{SandboxId: id, Count: 1}, &fork); err != nil {
				t.Fatal(err)
			}
			for _, f := range fork.Sandboxes {
				e.deleteOnCleanup(t, f.Sandbox.GetId())
			}
			if len(fork.Sandboxes) != 1 || len(fork.Errors) != 0 || fork.Sandboxes[0].Sandbox.GetId() == id {
				t.Fatalf("fork: %+v", &fork)
			}
			if got, _, err := g.download(t, &sandboxv1.DownloadRequest{SandboxId: fork.Sandboxes[0].Sandbox.Id, Path: "state.txt"}); err != nil || string(got) != "before\n" {
				t.Errorf("state.txt in the fork: %q %v", got, err)
			}
			// A new sandbox from the snapshot (CreateSandbox.snapshot_id)
			// holds its files too.
			var made sandboxv1.Sandbox
			if err := g.call(t, sandboxv1connect.SandboxServiceCreateSandboxProcedure, &sandboxv1.CreateSandboxRequest{SnapshotId: sn.Id, RiskLevel: "low"}, &made); err != nil {
				t.Fatalf("CreateSandbox from a snapshot: %v", err)
			}
			e.deleteOnCleanup(t, made.Id)
			if made.State != "ready" || made.Id == id || made.MemoryRestored == nil {
				t.Fatalf("created from a snapshot: %+v", &made)
			}
			if got, _, err := g.download(t, &sandboxv1.DownloadRequest{SandboxId: made.Id, Path: "state.txt"}); err != nil || string(got) != "before\n" {
				t.Errorf("state.txt in the sandbox made from the snapshot: %q %v", got, err)
			}
			var paused sandboxv1.Sandbox
			if err := g.call(t, sandboxv1connect.SnapshotServicePauseSandboxProcedure, &sandboxv1.PauseSandboxRequest{SandboxId: id}, &paused); err != nil || paused.State != "paused" {
				t.Fatalf("pause: %+v %v", &paused, err)
			}
			var resumed sandboxv1.ResumeSandboxResponse
			if err := g.call(t, sandboxv1connect.SnapshotServiceResumeSandboxProcedure, &sandboxv1.ResumeSandboxRequest{SandboxId: id}, &resumed); err != nil || resumed.Sandbox.GetState() != "ready" {
				t.Fatalf("resume: %+v %v", &resumed, err)
			}
			// Hibernate and wake: the files are there again, and the
			// hibernation's own snapshot is not listed below.
			var hib sandboxv1.Sandbox
			if err := g.call(t, sandboxv1connect.SnapshotServiceHibernateSandboxProcedure, &sandboxv1.HibernateSandboxRequest{SandboxId: id}, &hib); err != nil || hib.State != "hibernated" {
				t.Fatalf("hibernate: %+v %v", &hib, err)
			}
			var woke sandboxv1.ResumeSandboxResponse
			if err := g.call(t, sandboxv1connect.SnapshotServiceResumeSandboxProcedure, &sandboxv1.ResumeSandboxRequest{SandboxId: id}, &woke); err != nil || woke.Sandbox.GetState() != "ready" || woke.MemoryRestored == nil {
				t.Fatalf("wake: %+v %v; want ready with memory_restored set", &woke, err)
			}
			if got, _, err := g.download(t, &sandboxv1.DownloadRequest{SandboxId: id, Path: "state.txt"}); err != nil || string(got) != "before\n" {
				t.Errorf("state.txt after the wake: %q %v", got, err)
			}

			var list sandboxv1.ListSnapshotsResponse
			if err := g.call(t, sandboxv1connect.SnapshotServiceListSnapshotsProcedure, &sandboxv1.ListSnapshotsRequest{SandboxId: id}, &list); err != nil || len(list.Snapshots) != 1 || list.Snapshots[0].Id != sn.Id {
				t.Errorf("list snapshots: %+v %v", &list, err)
			}
			wantGRPCCode(t, "another tenant's snapshot", other.call(t, sandboxv1connect.SnapshotServiceGetSnapshotProcedure, &sandboxv1.GetSnapshotRequest{SnapshotId: sn.Id}, new(sandboxv1.Snapshot)), codes.NotFound)
			wantGRPCCode(t, "another tenant's sandbox's snapshots", other.call(t, sandboxv1connect.SnapshotServiceListSnapshotsProcedure, &sandboxv1.ListSnapshotsRequest{SandboxId: id}, new(sandboxv1.ListSnapshotsResponse)), codes.NotFound)
			wantGRPCCode(t, "a rollback of another tenant's sandbox", other.call(t, sandboxv1connect.SnapshotServiceRollbackSandboxProcedure, &sandboxv1.RollbackSandboxRequest{SandboxId: id, SnapshotId: sn.Id}, new(sandboxv1.RollbackSandboxResponse)), codes.NotFound)
			wantGRPCCode(t, "a pause of another tenant's sandbox", other.call(t, sandboxv1connect.SnapshotServicePauseSandboxProcedure, &sandboxv1.PauseSandboxRequest{SandboxId: id}, new(sandboxv1.Sandbox)), codes.NotFound)
			if err := g.call(t, sandboxv1connect.SnapshotServiceDeleteSnapshotProcedure, &sandboxv1.DeleteSnapshotRequest{SnapshotId: sn.Id}, new(sandboxv1.DeleteSnapshotResponse)); err != nil {
				t.Fatal(err)
			}
			wantGRPCCode(t, "the deleted snapshot", g.call(t, sandboxv1connect.SnapshotServiceGetSnapshotProcedure, &sandboxv1.GetSnapshotRequest{SnapshotId: sn.Id}, new(sandboxv1.Snapshot)), codes.NotFound)
		})

		t.Run("another-tenant", func(t *testing.T) {
			_, err := other.upload(other.ctx(t), &sandboxv1.UploadRequest{SandboxId: id, Path: "intruder.txt"}, []byte("x"), 1)
			wantGRPCCode(t, "an upload into another tenant's sandbox", err, codes.NotFound)
			_, _, err = other.download(t, &sandboxv1.DownloadRequest{SandboxId: id, Path: "big.bin"})
			wantGRPCCode(t, "a download from another tenant's sandbox", err, codes.NotFound)
			wantGRPCCode(t, "a stat in another tenant's sandbox", other.call(t, sandboxv1connect.FileServiceStatProcedure, &sandboxv1.StatRequest{SandboxId: id, Path: "big.bin"}, new(sandboxv1.FileInfo)), codes.NotFound)
			wantGRPCCode(t, "a list in another tenant's sandbox", other.call(t, sandboxv1connect.FileServiceListProcedure, &sandboxv1.ListRequest{SandboxId: id}, new(sandboxv1.ListResponse)), codes.NotFound)
			wantGRPCCode(t, "a search in another tenant's sandbox", other.call(t, sandboxv1connect.FileServiceSearchProcedure, &sandboxv1.SearchRequest{SandboxId: id, Content: "x"}, new(sandboxv1.SearchResponse)), codes.NotFound)
			wantGRPCCode(t, "a replace in another tenant's sandbox", other.call(t, sandboxv1connect.FileServiceBatchReplaceProcedure, &sandboxv1.BatchReplaceRequest{SandboxId: id, Path: "notes", Glob: "*", Find: "a", Replace: "b"}, new(sandboxv1.BatchReplaceResponse)), codes.NotFound)
			wantGRPCCode(t, "a snapshot of another tenant's sandbox", other.call(t, sandboxv1connect.SnapshotServiceCreateSnapshotProcedure, &sandboxv1.CreateSnapshotRequest{SandboxId: id}, new(sandboxv1.Snapshot)), codes.NotFound)
			// Nothing changed.
			wantGRPCCode(t, "the intruder's file", g.call(t, sandboxv1connect.FileServiceStatProcedure, &sandboxv1.StatRequest{SandboxId: id, Path: "intruder.txt"}, new(sandboxv1.FileInfo)), codes.NotFound)
			if got, _, err := g.download(t, &sandboxv1.DownloadRequest{SandboxId: id, Path: "notes/a.txt"}); err != nil || string(got) != "one\nthread here\nthree\n" {
				t.Errorf("notes/a.txt after the other tenant's replace: %q %v", got, err)
			}
		})

		t.Run("oversized-message", func(t *testing.T) {
			// The service's receive limit is limits.max_body_bytes (1 MiB by
			// default): a 2 MiB message is refused by the protocol layer.
			_, err := g.upload(g.ctx(t), &sandboxv1.UploadRequest{SandboxId: id, Path: "huge.bin"}, big[:2<<20], 2<<20)
			wantGRPCCode(t, "an upload message of 2 MiB", err, codes.ResourceExhausted)
			wantGRPCCode(t, "the oversized upload's file", g.call(t, sandboxv1connect.FileServiceStatProcedure, &sandboxv1.StatRequest{SandboxId: id, Path: "huge.bin"}, new(sandboxv1.FileInfo)), codes.NotFound)
			err = g.call(t, sandboxv1connect.FileServiceSearchProcedure, &sandboxv1.SearchRequest{SandboxId: id, Content: strings.Repeat("x", 2<<20)}, new(sandboxv1.SearchResponse))
			wantGRPCCode(t, "a search request of 2 MiB", err, codes.ResourceExhausted)
		})
	})
}
