package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	sandboxv1 "genesis.dev/sandbox/gen/genesis/sandbox/v1"
	"genesis.dev/sandbox/internal/testenv"
)

// The gRPC edge driven by the official grpc-go client (not connect-go's):
// its generic Invoke and NewStream over the generated messages, so the
// test needs no stubs of its own.

const (
	sandboxSvc = "/genesis.sandbox.v1.SandboxService/"
	execSvc    = "/genesis.sandbox.v1.ExecService/"
)

// grpcConn dials the service's native gRPC listener (--grpc-addr) with
// HTTP/2 in cleartext.
func grpcConn(t *testing.T, svc *service) *grpc.ClientConn {
	t.Helper()
	return dialGRPC(t, svc.grpcAddr)
}

// grpcMainConn dials the service's API listener, which serves gRPC beside
// HTTP, with HTTP/2 in cleartext.
func grpcMainConn(t *testing.T, svc *service) *grpc.ClientConn {
	t.Helper()
	return dialGRPC(t, svc.addr)
}

func dialGRPC(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// withKey is ctx carrying key as the call's API key.
func withKey(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
}

// errorInfo is the google.rpc.ErrorInfo detail of err, if any.
func errorInfo(err error) *errdetails.ErrorInfo {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// wantCode fails t unless err is a status with code and an ErrorInfo
// whose reason is reason and which carries a request id.
func wantCode(t *testing.T, what string, err error, code codes.Code, reason string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: got %v, want code %v", what, err, code)
	}
	info := errorInfo(err)
	if info == nil {
		t.Fatalf("%s: %v carries no ErrorInfo", what, err)
	}
	if info.Reason != reason || info.Domain == "" || info.Metadata["request_id"] == "" {
		t.Fatalf("%s: ErrorInfo %v, want reason %q, a domain and a request_id", what, info, reason)
	}
}

// TestGRPC drives the gRPC edge under runc and runsc: create → exec → a
// background job whose log stream is interrupted and resumed by cursor
// (no gap, no duplicate) → stdin streamed to sort → a deadline that
// cancels the job it started → delete; the codes of a wrong key, a stale
// resource_version and another tenant's sandbox; health, a Connect-JSON
// call over plain net/http, and buf curl listing the services through
// reflection.
func TestGRPC(t *testing.T) {
	t.Parallel()
	const otherKey = "e2e-grpc-other-tenant-key-0123456789"
	// A 50 ms slow request threshold: a cold create over gRPC is slower,
	// and the log says so (the slow-log subtest).
	e := newEnv(t, "tenants:\n  other: {api_keys: [\""+otherKey+"\"]}\n"+
		fmt.Sprintf("limits: {max_output_bytes: %d}\n", slowReaderBytes)+"log: {slow_request: 50ms}\n")
	e.requireImage(t, "code-python-basic")
	svc := e.start(t)
	// Most calls go to the native gRPC listener; the API listener serves
	// the same handlers over net/http's HTTP/2 (health, keys, an exec and
	// a resumed log stream below).
	cc, ccMain := grpcConn(t, svc), grpcMainConn(t, svc)

	for _, l := range []struct {
		name string
		cc   *grpc.ClientConn
	}{{"native", cc}, {"main-listener", ccMain}} {
		t.Run(l.name+"/health", func(t *testing.T) {
			t.Parallel()
			res, err := healthpb.NewHealthClient(l.cc).Check(callCtx(t), &healthpb.HealthCheckRequest{})
			if err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("health: %v %v", res, err)
			}
			_, err = healthpb.NewHealthClient(l.cc).Check(callCtx(t), &healthpb.HealthCheckRequest{Service: "no.such.Service"})
			if status.Code(err) != codes.NotFound {
				t.Fatalf("health of an unknown service: %v, want NotFound", err)
			}
		})
		t.Run(l.name+"/wrong-key", func(t *testing.T) {
			t.Parallel()
			var out sandboxv1.ListProfilesResponse
			err := l.cc.Invoke(withKey(callCtx(t), "not-a-key"), sandboxSvc+"ListProfiles", &sandboxv1.ListProfilesRequest{}, &out)
			wantCode(t, "wrong key", err, codes.Unauthenticated, "unauthenticated")
			err = l.cc.Invoke(callCtx(t), sandboxSvc+"ListProfiles", &sandboxv1.ListProfilesRequest{}, &out)
			wantCode(t, "no key", err, codes.Unauthenticated, "unauthenticated")
		})
	}
	t.Run("native/not-the-http-api", func(t *testing.T) {
		t.Parallel()
		// The native listener serves the gRPC services only.
		resp, err := http.Get("http://" + svc.grpcAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Fatalf("GET /healthz on the gRPC listener: %s", resp.Status)
			}
		}
		err = cc.Invoke(withKey(callCtx(t), e.apiKey), "/genesis.sandbox.v1.NoSuchService/Get", &sandboxv1.GetSandboxRequest{}, &sandboxv1.Sandbox{})
		if status.Code(err) != codes.Unimplemented {
			t.Fatalf("an unknown service: %v, want Unimplemented", err)
		}
	})
	t.Run("connect-json", func(t *testing.T) { testConnectJSON(t, svc) })
	t.Run("grpc-web", func(t *testing.T) { testGRPCWeb(t, svc) })
	t.Run("metrics", func(t *testing.T) {
		t.Parallel()
		// Calls of the edge are counted in /metrics by service, method and
		// code: two refused calls and one that succeeds.
		for range 2 {
			_ = cc.Invoke(withKey(callCtx(t), "not-a-key"), sandboxSvc+"GetCapabilities", &sandboxv1.GetCapabilitiesRequest{}, &sandboxv1.Capabilities{})
		}
		if err := cc.Invoke(withKey(callCtx(t), e.apiKey), sandboxSvc+"GetCapabilities", &sandboxv1.GetCapabilitiesRequest{}, &sandboxv1.Capabilities{}); err != nil {
			t.Fatalf("GetCapabilities: %v", err)
		}
		text := metricsText(t, svc, "") // a tenant key may not scrape; no key may
		for _, want := range []string{
			`genesis_grpc_requests_total{code="unauthenticated",method="GetCapabilities",service="genesis.sandbox.v1.SandboxService"} 2`,
			`genesis_grpc_requests_total{code="ok",method="GetCapabilities",service="genesis.sandbox.v1.SandboxService"} 1`,
			`genesis_grpc_request_duration_seconds_count{code="ok",method="GetCapabilities",service="genesis.sandbox.v1.SandboxService"} 1`,
		} {
			if !strings.Contains(text, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
	t.Run("reflection", func(t *testing.T) { testBufCurl(t, svc, svc.url()) })
	t.Run("native/reflection", func(t *testing.T) { testBufCurl(t, svc, "http://"+svc.grpcAddr) })
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			ctx := withKey(context.Background(), e.apiKey)
			var sb sandboxv1.Sandbox
			err := cc.Invoke(withKey(callCtx(t), e.apiKey), sandboxSvc+"CreateSandbox", &sandboxv1.CreateSandboxRequest{
				Profile: "code-python-basic", Runtime: rt, RiskLevel: "low", Metadata: map[string]string{"suite": "grpc"},
			}, &sb)
			if err != nil {
				t.Fatalf("CreateSandbox: %v", err)
			}
			e.deleteOnCleanup(t, sb.Id)
			if sb.Runtime != rt || sb.State != "ready" || sb.ResourceVersion == "" {
				t.Fatalf("created %v", &sb)
			}
			t.Run("slow-log", func(t *testing.T) { testGRPCSlowLog(t, svc, sb.Id) })
			t.Run("exec", func(t *testing.T) { testGRPCExec(t, ctx, cc, sb.Id) })
			t.Run("log-resume", func(t *testing.T) { testGRPCLogResume(t, ctx, cc, sb.Id) })
			t.Run("main-listener/exec", func(t *testing.T) { testGRPCExec(t, ctx, ccMain, sb.Id) })
			t.Run("main-listener/log-resume", func(t *testing.T) { testGRPCLogResume(t, ctx, ccMain, sb.Id) })
			t.Run("stdin-sort", func(t *testing.T) { testGRPCStdinSort(t, ctx, cc, sb.Id) })
			t.Run("attach", func(t *testing.T) { testGRPCAttach(t, ctx, cc, sb.Id) })
			t.Run("slow-reader", func(t *testing.T) { testGRPCSlowReader(t, ctx, cc, svc, sb.Id) })
			t.Run("deadline-cancels-job", func(t *testing.T) { testGRPCDeadline(t, ctx, cc, svc, sb.Id) })
			t.Run("stale-resource-version", func(t *testing.T) { testGRPCStaleVersion(t, ctx, cc, &sb) })
			t.Run("other-tenant", func(t *testing.T) { testGRPCOtherTenant(t, cc, otherKey, sb.Id) })
			t.Run("list-pages", func(t *testing.T) { testGRPCListPages(t, ctx, cc, sb.Id) })
			t.Run("renew", func(t *testing.T) {
				var got sandboxv1.Sandbox
				if err := cc.Invoke(ctx, sandboxSvc+"RenewSandbox", &sandboxv1.RenewSandboxRequest{Id: sb.Id, TtlSeconds: 7200}, &got); err != nil {
					t.Fatalf("RenewSandbox: %v", err)
				}
				if got.ExpireTime == nil || time.Until(got.ExpireTime.AsTime()) < 7100*time.Second || time.Until(got.ExpireTime.AsTime()) > 7200*time.Second {
					t.Fatalf("renewed for 7200 s: expire_time %v", got.ExpireTime)
				}
			})
			t.Run("lease", func(t *testing.T) { testGRPCLease(t, e, ctx, cc, rt) })
			t.Run("delete", func(t *testing.T) {
				if err := cc.Invoke(ctx, sandboxSvc+"DeleteSandbox", &sandboxv1.DeleteSandboxRequest{Id: sb.Id}, &sandboxv1.DeleteSandboxResponse{}); err != nil {
					t.Fatalf("DeleteSandbox: %v", err)
				}
				// Idempotent.
				if err := cc.Invoke(ctx, sandboxSvc+"DeleteSandbox", &sandboxv1.DeleteSandboxRequest{Id: sb.Id}, &sandboxv1.DeleteSandboxResponse{}); err != nil {
					t.Fatalf("DeleteSandbox again: %v", err)
				}
				var got sandboxv1.Sandbox
				err := cc.Invoke(ctx, sandboxSvc+"GetSandbox", &sandboxv1.GetSandboxRequest{Id: sb.Id}, &got)
				if err == nil && got.State != "destroyed" {
					t.Fatalf("after delete: %v", &got)
				}
				if err != nil && status.Code(err) != codes.NotFound {
					t.Fatalf("GetSandbox after delete: %v", err)
				}
				if left := sandboxContainers(t, sb.Id); len(left) > 0 {
					t.Fatalf("containers left after delete: %v", left)
				}
			})
		})
	}
}

// testGRPCSlowLog: the cold create of sandbox id over the native
// listener took longer than the 50 ms threshold, so the service logged it
// as a slow request, named by its procedure, with the sandbox it made.
func testGRPCSlowLog(t *testing.T, svc *service, id string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, line := range strings.Split(svc.log.String(), "\n") {
			if strings.Contains(line, `msg="slow request"`) && strings.Contains(line, "method=grpc route="+sandboxSvc+"CreateSandbox code=ok") &&
				strings.Contains(line, "sandbox="+id) && strings.Contains(line, "tenant=default") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slow request line for the create of %s over gRPC in the service's log", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testGRPCExec(t *testing.T, ctx context.Context, cc *grpc.ClientConn, id string) {
	var res sandboxv1.ExecResult
	err := cc.Invoke(ctx, execSvc+"Exec", &sandboxv1.ExecRequest{SandboxId: id, Script: "printf 'hello\\n\\377'; echo oops >&2; exit 3"}, &res)
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if string(res.Stdout) != "hello\n\xff" || string(res.Stderr) != "oops\n" || res.ExitCode != 3 || res.ExitReason != "exited" ||
		res.JobId == "" || res.StdoutBytes != 7 || res.StderrBytes != 5 {
		t.Fatalf("Exec result %v", &res)
	}
	var j sandboxv1.Job
	if err := cc.Invoke(ctx, execSvc+"GetJob", &sandboxv1.GetJobRequest{JobId: res.JobId}, &j); err != nil {
		t.Fatalf("GetJob: %v", err)
	}
	if j.State != "failed" || j.ExitCode == nil || *j.ExitCode != 3 || j.Mode != "sync" || j.SandboxId != id {
		t.Fatalf("job of the exec: %v", &j)
	}
	var list sandboxv1.ListJobsResponse
	if err := cc.Invoke(ctx, execSvc+"ListJobs", &sandboxv1.ListJobsRequest{SandboxId: id, States: []string{"failed"}}, &list); err != nil {
		t.Fatalf("ListJobs: %v", err)
	}
	if !slices.ContainsFunc(list.Jobs, func(j *sandboxv1.Job) bool { return j.Id == res.JobId && j.State == "failed" }) {
		t.Fatalf("ListJobs of failed jobs lacks %s: %v", res.JobId, list.Jobs)
	}
	err = cc.Invoke(ctx, execSvc+"ListJobs", &sandboxv1.ListJobsRequest{SandboxId: id, States: []string{"bogus"}}, &list)
	wantCode(t, "ListJobs of an unknown state", err, codes.InvalidArgument, "invalid_argument")
	err = cc.Invoke(ctx, execSvc+"Exec", &sandboxv1.ExecRequest{SandboxId: id}, &res)
	wantCode(t, "exec without command", err, codes.InvalidArgument, "invalid_argument")
}

// readLog reads a StreamJobLogs stream from cursor: each event's cursor
// and the stdout bytes, checking that stdout offsets are contiguous from
// offset. It stops after stop events (0: until the stream ends) and
// reports the exit event, if one came.
func readLog(t *testing.T, ctx context.Context, cc *grpc.ClientConn, jobID string, cursor, offset int64, stop int) (out []byte, last int64, exit *sandboxv1.Exit) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // interrupts the stream when stop is reached
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, execSvc+"StreamJobLogs")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SendMsg(&sandboxv1.StreamJobLogsRequest{JobId: jobID, Cursor: cursor}); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	last = cursor
	for n := 0; stop == 0 || n < stop; n++ {
		var ev sandboxv1.JobLogEvent
		err := st.RecvMsg(&ev)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("StreamJobLogs from %d: %v", cursor, err)
		}
		if ev.Cursor <= last {
			t.Fatalf("event cursor %d after %d: not increasing", ev.Cursor, last)
		}
		last = ev.Cursor
		switch x := ev.Event.(type) {
		case *sandboxv1.JobLogEvent_Stdout:
			if x.Stdout.Offset != offset+int64(len(out)) {
				t.Fatalf("stdout event at offset %d, want %d: a gap or a duplicate", x.Stdout.Offset, offset+int64(len(out)))
			}
			out = append(out, x.Stdout.Data...)
		case *sandboxv1.JobLogEvent_Exit:
			exit = x.Exit
		}
	}
	return out, last, exit
}

func testGRPCLogResume(t *testing.T, ctx context.Context, cc *grpc.ClientConn, id string) {
	const lines = 300
	var j sandboxv1.Job
	err := cc.Invoke(ctx, execSvc+"StartJob", &sandboxv1.StartJobRequest{SandboxId: id,
		Script: fmt.Sprintf("i=1; while [ $i -le %d ]; do echo line $i; i=$((i+1)); if [ $((i %% 10)) = 0 ]; then sleep 0.02; fi; done", lines)}, &j)
	if err != nil {
		t.Fatalf("StartJob: %v", err)
	}
	if j.State != "running" || j.Mode != "background" {
		t.Fatalf("started %v", &j)
	}
	// Read a few events, drop the stream (the job goes on), resume from
	// the last cursor received, and again, until the exit.
	var got []byte
	cursor, interruptions := int64(0), 0
	var exit *sandboxv1.Exit
	for exit == nil {
		stop := 5
		if interruptions >= 3 {
			stop = 0
		}
		out, last, x := readLog(t, ctx, cc, j.Id, cursor, int64(len(got)), stop)
		got, cursor, exit = append(got, out...), last, x
		interruptions++
		if interruptions > 1000 {
			t.Fatal("the log never reached its exit")
		}
	}
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if string(got) != want.String() {
		t.Fatalf("resumed stdout differs (%d bytes, want %d):\n%.300s", len(got), want.Len(), got)
	}
	if exit.State != "succeeded" || exit.ExitCode == nil || *exit.ExitCode != 0 || exit.StdoutBytes != int64(want.Len()) || exit.JobId != j.Id {
		t.Fatalf("exit %v", exit)
	}
	// Resumed after the exit: nothing more, and the stream ends.
	if out, _, x := readLog(t, ctx, cc, j.Id, cursor, int64(len(got)), 0); len(out) != 0 || x != nil {
		t.Fatalf("after the exit: %q %v", out, x)
	}
	// A cursor that is no event boundary is refused.
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, execSvc+"StreamJobLogs")
	if err == nil {
		_ = st.SendMsg(&sandboxv1.StreamJobLogsRequest{JobId: j.Id, Cursor: 1})
		_ = st.CloseSend()
		err = st.RecvMsg(&sandboxv1.JobLogEvent{})
	}
	wantCode(t, "cursor 1", err, codes.InvalidArgument, "invalid_cursor")
}

func testGRPCStdinSort(t *testing.T, ctx context.Context, cc *grpc.ClientConn, id string) {
	var j sandboxv1.Job
	if err := cc.Invoke(ctx, execSvc+"StartJob", &sandboxv1.StartJobRequest{SandboxId: id, Command: []string{"sort"}, StdinStream: true}, &j); err != nil {
		t.Fatalf("StartJob sort: %v", err)
	}
	words := make([]string, 20000)
	for i := range words {
		words[i] = fmt.Sprintf("w%08d", rand.IntN(1e8))
	}
	input := []byte(strings.Join(words, "\n") + "\n")
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, execSvc+"WriteStdin")
	if err != nil {
		t.Fatal(err)
	}
	for off, first := 0, true; off < len(input); first = false {
		n := min(len(input)-off, 1000+rand.IntN(30000))
		msg := &sandboxv1.WriteStdinRequest{Data: input[off : off+n]}
		if first {
			msg.JobId = j.Id
		}
		off += n
		msg.CloseStdin = off == len(input)
		if err := st.SendMsg(msg); err != nil {
			t.Fatalf("WriteStdin send: %v", err)
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var res sandboxv1.WriteStdinResponse
	if err := st.RecvMsg(&res); err != nil {
		t.Fatalf("WriteStdin: %v", err)
	}
	if res.Bytes != int64(len(input)) {
		t.Fatalf("WriteStdin wrote %d bytes, want %d", res.Bytes, len(input))
	}
	out, _, exit := readLog(t, ctx, cc, j.Id, 0, 0, 0)
	slices.Sort(words)
	if want := strings.Join(words, "\n") + "\n"; string(out) != want {
		t.Fatalf("sort printed %d bytes, want %d sorted", len(out), len(want))
	}
	if exit == nil || exit.State != "succeeded" {
		t.Fatalf("sort's exit %v", exit)
	}
	// Stdin to the ended job: FAILED_PRECONDITION, nothing written.
	st, err = cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, execSvc+"WriteStdin")
	if err != nil {
		t.Fatal(err)
	}
	_ = st.SendMsg(&sandboxv1.WriteStdinRequest{JobId: j.Id, Data: []byte("late\n")})
	_ = st.CloseSend()
	err = st.RecvMsg(&res)
	wantCode(t, "stdin to an ended job", err, codes.FailedPrecondition, "job_not_running")
}

func testGRPCDeadline(t *testing.T, ctx context.Context, cc *grpc.ClientConn, svc *service, id string) {
	marker := "deadline-" + randomHex(t, 4)
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var res sandboxv1.ExecResult
	err := cc.Invoke(dctx, execSvc+"Exec", &sandboxv1.ExecRequest{SandboxId: id, Command: []string{"sleep", "300"}, Env: map[string]string{"MARK": marker}}, &res)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Exec past its deadline: %v, want DeadlineExceeded", err)
	}
	// The job the call started ends as canceled, as for a dropped HTTP call.
	c := svc.client()
	eventually(t, 60*time.Second, "the exec's job is canceled", func() (bool, string) {
		list, err := c.ListSandboxJobs(context.Background(), id, 20)
		if err != nil {
			return false, err.Error()
		}
		for _, j := range list.Items {
			if slices.Equal(j.Command, []string{"sleep", "300"}) {
				return j.State == "canceled", j.State
			}
		}
		return false, "no sleep job yet"
	})
	if names := processNames(t, c, id); slices.Contains(names, "sleep") {
		t.Fatalf("sleep still runs after the deadline: %v", names)
	}
}

func testGRPCStaleVersion(t *testing.T, ctx context.Context, cc *grpc.ClientConn, sb *sandboxv1.Sandbox) {
	var now sandboxv1.Sandbox
	if err := cc.Invoke(ctx, sandboxSvc+"GetSandbox", &sandboxv1.GetSandboxRequest{Id: sb.Id}, &now); err != nil {
		t.Fatal(err)
	}
	var upd sandboxv1.Sandbox
	err := cc.Invoke(ctx, sandboxSvc+"UpdateSandboxMetadata", &sandboxv1.UpdateSandboxMetadataRequest{
		Id: sb.Id, ResourceVersion: now.ResourceVersion, Metadata: map[string]string{"step": "one"}, RemoveKeys: []string{"suite"}}, &upd)
	if err != nil {
		t.Fatalf("UpdateSandboxMetadata at the current version: %v", err)
	}
	if upd.Metadata["step"] != "one" || upd.Metadata["suite"] != "" || upd.ResourceVersion == now.ResourceVersion {
		t.Fatalf("updated %v", &upd)
	}
	err = cc.Invoke(ctx, sandboxSvc+"UpdateSandboxMetadata", &sandboxv1.UpdateSandboxMetadataRequest{
		Id: sb.Id, ResourceVersion: now.ResourceVersion, Metadata: map[string]string{"step": "stale"}}, &upd)
	if status.Code(err) != codes.FailedPrecondition || errorInfo(err) == nil {
		t.Fatalf("update at a stale resource_version: %v, want FailedPrecondition with ErrorInfo", err)
	}
	var after sandboxv1.Sandbox
	if err := cc.Invoke(ctx, sandboxSvc+"GetSandbox", &sandboxv1.GetSandboxRequest{Id: sb.Id}, &after); err != nil {
		t.Fatal(err)
	}
	if after.Metadata["step"] != "one" {
		t.Fatalf("the stale update changed the sandbox: %v", after.Metadata)
	}
}

func testGRPCOtherTenant(t *testing.T, cc *grpc.ClientConn, otherKey, id string) {
	ctx := withKey(callCtx(t), otherKey)
	for _, call := range []struct {
		method  string
		in, out any
	}{
		{sandboxSvc + "GetSandbox", &sandboxv1.GetSandboxRequest{Id: id}, &sandboxv1.Sandbox{}},
		{sandboxSvc + "DeleteSandbox", &sandboxv1.DeleteSandboxRequest{Id: id}, &sandboxv1.DeleteSandboxResponse{}},
		{sandboxSvc + "UpdateSandboxMetadata", &sandboxv1.UpdateSandboxMetadataRequest{Id: id, Metadata: map[string]string{"x": "y"}}, &sandboxv1.Sandbox{}},
		{execSvc + "Exec", &sandboxv1.ExecRequest{SandboxId: id, Command: []string{"true"}}, &sandboxv1.ExecResult{}},
		{execSvc + "StartJob", &sandboxv1.StartJobRequest{SandboxId: id, Command: []string{"true"}}, &sandboxv1.Job{}},
	} {
		err := cc.Invoke(ctx, call.method, call.in, call.out)
		wantCode(t, "another tenant's "+call.method, err, codes.NotFound, "not_found")
	}
	var list sandboxv1.ListSandboxesResponse
	if err := cc.Invoke(ctx, sandboxSvc+"ListSandboxes", &sandboxv1.ListSandboxesRequest{}, &list); err != nil {
		t.Fatal(err)
	}
	for _, sb := range list.Sandboxes {
		if sb.Id == id {
			t.Fatal("another tenant lists the sandbox")
		}
	}
}

func testGRPCListPages(t *testing.T, ctx context.Context, cc *grpc.ClientConn, id string) {
	// Pages of one: the sandbox comes exactly once over all pages.
	seen, token := 0, ""
	for page := 0; ; page++ {
		var res sandboxv1.ListSandboxesResponse
		if err := cc.Invoke(ctx, sandboxSvc+"ListSandboxes", &sandboxv1.ListSandboxesRequest{PageSize: 1, PageToken: token, States: []string{"ready", "busy", "leased", "idle"}}, &res); err != nil {
			t.Fatalf("ListSandboxes page %d: %v", page, err)
		}
		if len(res.Sandboxes) > 1 {
			t.Fatalf("page of size 1 holds %d", len(res.Sandboxes))
		}
		for _, sb := range res.Sandboxes {
			if sb.Id == id {
				seen++
			}
		}
		if token = res.NextPageToken; token == "" {
			break
		}
		if page > 100 {
			t.Fatal("pages never end")
		}
	}
	if seen != 1 {
		t.Fatalf("the sandbox came %d times over the pages", seen)
	}
	err := cc.Invoke(ctx, sandboxSvc+"ListSandboxes", &sandboxv1.ListSandboxesRequest{PageToken: "bm90LWEtdG9rZW4"}, &sandboxv1.ListSandboxesResponse{})
	wantCode(t, "a forged page token", err, codes.InvalidArgument, "invalid_page_token")
}

// testConnectJSON calls the edge as a browser would with the Connect
// protocol: a JSON POST over HTTP/1.1 with plain net/http.
func testConnectJSON(t *testing.T, svc *service) {
	t.Parallel()
	call := func(key string) (int, map[string]any) {
		req, err := http.NewRequestWithContext(callCtx(t), http.MethodPost, svc.url()+sandboxSvc+"ListProfiles", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.ProtoMajor != 1 {
			t.Fatalf("plain net/http spoke %s", resp.Proto)
		}
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("Connect-JSON answer: %v", err)
		}
		return resp.StatusCode, body
	}
	code, body := call(svc.e.apiKey)
	profiles, _ := body["profiles"].([]any)
	if code != http.StatusOK || len(profiles) == 0 {
		t.Fatalf("Connect-JSON ListProfiles: %d %v", code, body)
	}
	found := false
	for _, p := range profiles {
		if m, _ := p.(map[string]any); m["name"] == "code-python-basic" {
			found = true
		}
	}
	if !found {
		t.Fatalf("profiles %v lack code-python-basic", profiles)
	}
	code, body = call("")
	if code != http.StatusUnauthorized || body["code"] != "unauthenticated" {
		t.Fatalf("Connect-JSON without a key: %d %v", code, body)
	}
	// The HTTP API on the same listener is untouched.
	if _, err := svc.client().Profiles(callCtx(t)); err != nil {
		t.Fatalf("the HTTP API beside the edge: %v", err)
	}
}

// testBufCurl lists the services through server reflection with buf curl
// (tools/proto's pinned buf, installed by make test-deps) and calls one, at
// base: the API listener's URL or the native gRPC listener's.
func testBufCurl(t *testing.T, svc *service, base string) {
	t.Parallel()
	buf := filepath.Join(testenv.ModuleRoot(t), "tools", "proto", "node_modules", ".bin", "buf")
	if _, err := os.Stat(buf); err != nil {
		t.Fatalf("buf is not installed (make test-deps): %v", err)
	}
	run := func(args ...string) []byte {
		cmd := exec.CommandContext(callCtx(t), buf, append([]string{"curl", "--protocol", "grpc", "--http2-prior-knowledge"}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("buf curl %v: %v\n%s", args, err, stderr.String())
		}
		return out
	}
	list := string(run("--list-services", base))
	for _, want := range []string{"genesis.sandbox.v1.SandboxService", "genesis.sandbox.v1.ExecService", "grpc.health.v1.Health"} {
		if !strings.Contains(list, want) {
			t.Fatalf("reflection lists %q, not %s", list, want)
		}
	}
	methods := string(run("--list-methods", base))
	if !strings.Contains(methods, "genesis.sandbox.v1.ExecService/StreamJobLogs") {
		t.Fatalf("reflection lists the methods %q", methods)
	}
	out := run("-H", "Authorization: Bearer "+svc.e.apiKey, "--data", "{}", base+sandboxSvc+"ListProfiles")
	var res struct {
		Profiles []struct{ Name string } `json:"profiles"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res.Profiles) == 0 {
		t.Fatalf("buf curl ListProfiles: %v %s", err, out)
	}
}

func testGRPCLease(t *testing.T, e *env, ctx context.Context, cc *grpc.ClientConn, rt string) {
	ttl := int64(60)
	var l sandboxv1.Lease
	err := cc.Invoke(ctx, sandboxSvc+"AcquireLease", &sandboxv1.AcquireLeaseRequest{
		Profile: "code-python-basic", Runtime: rt, RiskLevel: "low", TtlSeconds: &ttl, WaitSeconds: 60, Holder: "grpc-e2e"}, &l)
	if err != nil {
		t.Fatalf("AcquireLease: %v", err)
	}
	e.deleteOnCleanup(t, l.SandboxId)
	if l.State != "active" || l.Sandbox == nil || l.Sandbox.Id != l.SandboxId || l.Sandbox.Runtime != rt || l.Holder != "grpc-e2e" || l.TtlSeconds != 60 {
		t.Fatalf("acquired %v", &l)
	}
	var res sandboxv1.ExecResult
	if err := cc.Invoke(ctx, execSvc+"Exec", &sandboxv1.ExecRequest{SandboxId: l.SandboxId, Command: []string{"echo", "leased"}}, &res); err != nil || string(res.Stdout) != "leased\n" {
		t.Fatalf("exec in the leased sandbox: %v %q", err, res.Stdout)
	}
	longer := int64(600)
	var renewed sandboxv1.Lease
	if err := cc.Invoke(ctx, sandboxSvc+"RenewLease", &sandboxv1.RenewLeaseRequest{LeaseId: l.LeaseId, TtlSeconds: &longer}, &renewed); err != nil {
		t.Fatalf("RenewLease: %v", err)
	}
	if !renewed.ExpireTime.AsTime().After(l.ExpireTime.AsTime()) || renewed.TtlSeconds != 600 {
		t.Fatalf("renewed %v after %v", &renewed, &l)
	}
	if err := cc.Invoke(ctx, sandboxSvc+"ReleaseLease", &sandboxv1.ReleaseLeaseRequest{LeaseId: l.LeaseId}, &sandboxv1.ReleaseLeaseResponse{}); err != nil {
		t.Fatalf("ReleaseLease: %v", err)
	}
	var after sandboxv1.Lease
	if err := cc.Invoke(ctx, sandboxSvc+"GetLease", &sandboxv1.GetLeaseRequest{LeaseId: l.LeaseId}, &after); err != nil || after.State != "released" || after.EndTime == nil {
		t.Fatalf("after release: %v %v", &after, err)
	}
}

// testGRPCAttach talks to a cat over one bidirectional stream: stdin in,
// its echo out, close, exit; data to a job without streamed stdin ends the
// stream with FAILED_PRECONDITION.
func testGRPCAttach(t *testing.T, ctx context.Context, cc *grpc.ClientConn, id string) {
	var j sandboxv1.Job
	if err := cc.Invoke(ctx, execSvc+"StartJob", &sandboxv1.StartJobRequest{SandboxId: id, Command: []string{"cat"}, StdinStream: true}, &j); err != nil {
		t.Fatalf("StartJob cat: %v", err)
	}
	actx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	st, err := cc.NewStream(actx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, execSvc+"AttachJob")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SendMsg(&sandboxv1.AttachJobRequest{JobId: j.Id, Data: []byte("hello\n")}); err != nil {
		t.Fatal(err)
	}
	var out []byte
	var exit *sandboxv1.Exit
	recv := func() {
		var ev sandboxv1.JobLogEvent
		if err := st.RecvMsg(&ev); err != nil {
			t.Fatalf("AttachJob after %q: %v", out, err)
		}
		switch x := ev.Event.(type) {
		case *sandboxv1.JobLogEvent_Stdout:
			out = append(out, x.Stdout.Data...)
		case *sandboxv1.JobLogEvent_Exit:
			exit = x.Exit
		}
	}
	// The echo comes back while stdin is still open: a live conversation.
	for string(out) != "hello\n" {
		recv()
		if len(out) > 6 || exit != nil {
			t.Fatalf("cat echoed %q (exit %v)", out, exit)
		}
	}
	if err := st.SendMsg(&sandboxv1.AttachJobRequest{Data: []byte("world\n"), CloseStdin: true}); err != nil {
		t.Fatal(err)
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for exit == nil {
		recv()
	}
	if string(out) != "hello\nworld\n" || exit.State != "succeeded" {
		t.Fatalf("cat printed %q, exit %v", out, exit)
	}
	if err := st.RecvMsg(&sandboxv1.JobLogEvent{}); !errors.Is(err, io.EOF) {
		t.Fatalf("after the exit: %v, want the end of the stream", err)
	}

	// A job without streamed stdin: its output, and data is refused.
	if err := cc.Invoke(ctx, execSvc+"StartJob", &sandboxv1.StartJobRequest{SandboxId: id, Command: []string{"sleep", "30"}}, &j); err != nil {
		t.Fatal(err)
	}
	defer cc.Invoke(ctx, execSvc+"CancelJob", &sandboxv1.CancelJobRequest{JobId: j.Id}, &sandboxv1.Job{})
	st, err = cc.NewStream(actx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, execSvc+"AttachJob")
	if err != nil {
		t.Fatal(err)
	}
	_ = st.SendMsg(&sandboxv1.AttachJobRequest{JobId: j.Id, Data: []byte("x")})
	for {
		err = st.RecvMsg(&sandboxv1.JobLogEvent{})
		if err != nil {
			break
		}
	}
	wantCode(t, "stdin to a job without streamed stdin", err, codes.FailedPrecondition, "stdin_not_streamed")
}

// slowReaderBytes is the output of the slow reader's job: far more than
// the service's memory bound, so holding it would show.
const slowReaderBytes = 256 << 20

// testGRPCSlowReader opens a job's log stream and does not read it while
// the job writes slowReaderBytes: HTTP/2 flow control holds the service's
// reader (the log is on disk), so the service's memory stays bounded;
// then everything arrives, in order.
func testGRPCSlowReader(t *testing.T, ctx context.Context, cc *grpc.ClientConn, svc *service, id string) {
	var j sandboxv1.Job
	if err := cc.Invoke(ctx, execSvc+"StartJob", &sandboxv1.StartJobRequest{SandboxId: id, MaxOutputBytes: slowReaderBytes,
		Script: fmt.Sprintf("head -c %d /dev/zero", slowReaderBytes)}, &j); err != nil {
		t.Fatalf("StartJob: %v", err)
	}
	sctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	st, err := cc.NewStream(sctx, &grpc.StreamDesc{ServerStreams: true}, execSvc+"StreamJobLogs")
	if err == nil {
		err = st.SendMsg(&sandboxv1.StreamJobLogsRequest{JobId: j.Id})
	}
	if err == nil {
		err = st.CloseSend()
	}
	var first sandboxv1.JobLogEvent
	if err == nil {
		err = st.RecvMsg(&first) // the stream is open and sending
	}
	if err != nil {
		t.Fatal(err)
	}
	pid := svc.cmd.Process.Pid
	var peak int64
	eventually(t, 2*time.Minute, "the job ends while its stream is not read", func() (bool, string) {
		if kb, err := rssKB(pid, "VmRSS"); err == nil && kb > peak {
			peak = kb
		}
		var now sandboxv1.Job
		if err := cc.Invoke(ctx, execSvc+"GetJob", &sandboxv1.GetJobRequest{JobId: j.Id}, &now); err != nil {
			return false, err.Error()
		}
		return now.State != "running", now.State
	})
	if peak == 0 || peak > serviceRSSBound {
		t.Fatalf("service VmRSS peaked at %d KiB while a stream of %d MiB was not read; bound %d KiB", peak, slowReaderBytes>>20, serviceRSSBound)
	}
	n := int64(len(first.GetStdout().GetData()))
	var exit *sandboxv1.Exit
	for {
		var ev sandboxv1.JobLogEvent
		err := st.RecvMsg(&ev)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading on after %d bytes: %v", n, err)
		}
		if out := ev.GetStdout(); out != nil {
			if out.Offset != n {
				t.Fatalf("stdout at %d, want %d", out.Offset, n)
			}
			n += int64(len(out.Data))
		}
		if x := ev.GetExit(); x != nil {
			exit = x
		}
	}
	if n != slowReaderBytes || exit == nil || exit.State != "succeeded" {
		t.Fatalf("read %d bytes of %d, exit %v", n, slowReaderBytes, exit)
	}
	t.Logf("service VmRSS peak %d KiB while %d MiB waited unread", peak, slowReaderBytes>>20)
}

// testGRPCWeb calls ListProfiles as a browser's gRPC-Web client does:
// application/grpc-web+proto over plain HTTP/1.1 net/http, the message in
// one length-prefixed frame, the status in a trailer frame of the body;
// and a call without a key, whose status is UNAUTHENTICATED.
func testGRPCWeb(t *testing.T, svc *service) {
	t.Parallel()
	call := func(key string) (msgs [][]byte, trailer string) {
		body, err := proto.Marshal(&sandboxv1.ListProfilesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		frame := append([]byte{0, 0, 0, 0, 0}, body...)
		binary.BigEndian.PutUint32(frame[1:5], uint32(len(body)))
		req, err := http.NewRequestWithContext(callCtx(t), http.MethodPost, svc.url()+sandboxSvc+"ListProfiles", bytes.NewReader(frame))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/grpc-web+proto")
		req.Header.Set("X-Grpc-Web", "1")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.ProtoMajor != 1 || resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/grpc-web+proto") {
			t.Fatalf("gRPC-Web answer: %s %d %q", resp.Proto, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if st := resp.Header.Get("Grpc-Status"); st != "" { // a trailers-only answer
			return nil, "grpc-status:" + st
		}
		for len(raw) >= 5 {
			n := int(binary.BigEndian.Uint32(raw[1:5]))
			if len(raw) < 5+n {
				t.Fatalf("a truncated gRPC-Web frame: %d of %d bytes", len(raw)-5, n)
			}
			if raw[0]&0x80 != 0 {
				trailer = strings.ToLower(string(raw[5 : 5+n]))
			} else {
				msgs = append(msgs, raw[5:5+n])
			}
			raw = raw[5+n:]
		}
		return msgs, trailer
	}
	msgs, trailer := call(svc.e.apiKey)
	if len(msgs) != 1 || !strings.Contains(trailer, "grpc-status: 0") && !strings.Contains(trailer, "grpc-status:0") {
		t.Fatalf("gRPC-Web ListProfiles: %d messages, trailer %q", len(msgs), trailer)
	}
	var out sandboxv1.ListProfilesResponse
	if err := proto.Unmarshal(msgs[0], &out); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(out.Profiles, func(p *sandboxv1.Profile) bool { return p.Name == "code-python-basic" }) {
		t.Fatalf("gRPC-Web profiles %v lack code-python-basic", out.Profiles)
	}
	if _, trailer := call(""); !strings.Contains(strings.ReplaceAll(trailer, " ", ""), fmt.Sprintf("grpc-status:%d", codes.Unauthenticated)) {
		t.Fatalf("gRPC-Web without a key: trailer %q, want grpc-status %d", trailer, codes.Unauthenticated)
	}
}
