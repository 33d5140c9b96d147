package servers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
)

// fakeLeases hands out leases and records what was asked.
type fakeLeases struct {
	mu       sync.Mutex
	acquired []control.AcquireLeaseInput
	released []string
	leases   map[string]*sandbox.Lease // GetLease's answers
}

func (f *fakeLeases) AcquireLease(_ context.Context, in control.AcquireLeaseInput) (*control.LeaseOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acquired = append(f.acquired, in)
	l := &sandbox.Lease{ID: sandbox.NewID("lse"), Tenant: in.Tenant, SandboxID: sandbox.NewID("sbx"), Profile: in.Profile,
		Runtime: sandbox.RuntimeRunsc, State: sandbox.LeaseActive, Reserved: in.Reserved}
	sb := &sandbox.Sandbox{ID: l.SandboxID, Tenant: in.Tenant, Profile: in.Profile, Runtime: l.Runtime, State: sandbox.StateLeased, Reserved: in.Reserved}
	return &control.LeaseOutput{Lease: l, Sandbox: sb}, nil
}

func (f *fakeLeases) GetLease(_ context.Context, _, id string) (*sandbox.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.leases[id]; ok {
		return l, nil
	}
	return nil, fmt.Errorf("lease %s: %w", id, errdefs.ErrNotFound)
}

func (f *fakeLeases) RenewLease(context.Context, string, string, *int64) (*sandbox.Lease, error) {
	return &sandbox.Lease{}, nil
}

func (f *fakeLeases) ReleaseLease(_ context.Context, _, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, id)
	return nil
}

func (f *fakeLeases) GetNetwork(context.Context, string, string) (*sandbox.Network, error) {
	return &sandbox.Network{Policy: egress.Policy{Mode: egress.ModeNone}}, nil
}

// fakeJobs runs each "server job" as an in-process MCP server (tool echo)
// over pipes, and records the reservation every call names.
type fakeJobs struct {
	mu      sync.Mutex
	started []jobs.ExecInput
	calls   []string // "stdin <reservation>", "cancel <reservation>"
	procs   map[string]*fakeProc
}

type fakeProc struct {
	stdinW  *io.PipeWriter
	stdoutR *io.PipeReader
	done    chan struct{}
	once    sync.Once
}

func (p *fakeProc) end() {
	p.once.Do(func() {
		p.stdinW.Close()
		p.stdoutR.Close()
		close(p.done)
	})
}

func (f *fakeJobs) StartServer(_ context.Context, in jobs.ExecInput) (*sandbox.Job, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	srv := sdk.NewServer(&sdk.Implementation{Name: "fake", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "echoes"}, func(_ context.Context, _ *sdk.CallToolRequest, a struct {
		Text string `json:"text"`
	}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo: " + a.Text}}}, nil, nil
	})
	p := &fakeProc{stdinW: inW, stdoutR: outR, done: make(chan struct{})}
	go func() {
		_ = srv.Run(context.Background(), &sdk.IOTransport{Reader: inR, Writer: outW})
		outW.Close()
	}()
	j := &sandbox.Job{ID: sandbox.NewID("job"), Tenant: in.Tenant, SandboxID: in.SandboxID, State: sandbox.JobRunning}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, in)
	if f.procs == nil {
		f.procs = map[string]*fakeProc{}
	}
	f.procs[j.ID] = p
	return j, nil
}

func (f *fakeJobs) proc(id string) *fakeProc {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.procs[id]
}

func (f *fakeJobs) note(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeJobs) ServerOutputLimit() int64 { return 1 << 30 }

func (f *fakeJobs) OpenStdinAs(_ context.Context, _, reservation, jobID string) (io.WriteCloser, error) {
	f.note("stdin " + reservation)
	return f.proc(jobID).stdinW, nil
}

func (f *fakeJobs) CopyOutput(ctx context.Context, _, jobID string, w io.Writer) error {
	p := f.proc(jobID)
	go func() {
		select {
		case <-ctx.Done():
			p.end()
		case <-p.done:
		}
	}()
	_, err := io.Copy(w, p.stdoutR)
	return err
}

func (f *fakeJobs) CancelJobAs(_ context.Context, _, reservation, jobID string) (*sandbox.Job, error) {
	f.note("cancel " + reservation)
	f.proc(jobID).end()
	return &sandbox.Job{ID: jobID, State: sandbox.JobCanceled}, nil
}

func (f *fakeJobs) GetJob(_ context.Context, _, jobID string) (*sandbox.Job, error) {
	select {
	case <-f.proc(jobID).done:
		return &sandbox.Job{ID: jobID, State: sandbox.JobCanceled}, nil
	default:
		return &sandbox.Job{ID: jobID, State: sandbox.JobRunning}, nil
	}
}

func (f *fakeJobs) Wait(ctx context.Context, _, jobID string) (*sandbox.Job, error) {
	select {
	case <-f.proc(jobID).done:
		return &sandbox.Job{ID: jobID, State: sandbox.JobCanceled}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

const secretValue = "op-secret-0123456789abcdef"

func newReservedManager(t *testing.T) (*Manager, *fakeLeases, *fakeJobs, *int) {
	t.Helper()
	fl, fj := &fakeLeases{leases: map[string]*sandbox.Lease{}}, &fakeJobs{}
	reads := new(int)
	m, err := New(Config{Leases: fl, Jobs: fj, Catalog: []Entry{
		{Name: "env-server", Source: SourceVerified, Profile: "p", Command: []string{"srv"},
			Permissions: Permissions{EnvSecrets: []string{"TOKEN=tok"}}},
		{Name: "plain", Source: SourceVerified, Profile: "p", Command: []string{"srv"}},
	}, Secret: func(name string) (string, error) {
		*reads++
		if name != "tok" {
			return "", fmt.Errorf("no secret %q", name)
		}
		return secretValue, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m, fl, fj, reads
}

func wantCode(t *testing.T, what string, err error, status int, code string) {
	t.Helper()
	if err == nil || errdefs.HTTPStatus(err) != status || errdefs.Code(err) != code {
		t.Errorf("%s: %v (status %d, code %q), want %d %s", what, err, errdefs.HTTPStatus(err), errdefs.Code(err), status, code)
	}
}

// callEcho calls the instance's echo tool through its endpoint.
func callEcho(t *testing.T, m *Manager, inst *Instance) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.ServeMCP(w, r, inst.ID, func(w http.ResponseWriter, _ *http.Request, err error) {
			http.Error(w, err.Error(), errdefs.HTTPStatus(err))
		})
	}))
	t.Cleanup(srv.Close)
	hc := &http.Client{Transport: bearer{inst.Token}}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(),
		&sdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Content[0].(*sdk.TextContent).Text
}

type bearer struct{ tok string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// TestEnvSecretsRunReserved: a server that holds an operator secret gets
// sandboxes of its own reserved to it (its lease and, with scope
// ephemeral, each call's), and names that reservation on every call into
// them; the secret's value goes to the process's env and to the masking
// of its output, and into no view. A server without secrets reserves
// nothing.
func TestEnvSecretsRunReserved(t *testing.T) {
	t.Parallel()
	for _, scope := range []string{"dedicated", "ephemeral"} {
		t.Run(scope, func(t *testing.T) {
			t.Parallel()
			m, fl, fj, _ := newReservedManager(t)
			inst, err := m.Create(t.Context(), "a", CreateRequest{Catalog: "env-server", Scope: scope})
			if err != nil {
				t.Fatal(err)
			}
			want := "mcp:" + inst.ID
			if got := callEcho(t, m, inst); got != "echo: hi" {
				t.Errorf("echo: %q", got)
			}
			fl.mu.Lock()
			acquired := slices.Clone(fl.acquired)
			fl.mu.Unlock()
			if n := map[string]int{"dedicated": 1, "ephemeral": 2}[scope]; len(acquired) != n {
				t.Fatalf("%d leases taken, want %d", len(acquired), n)
			}
			for _, in := range acquired {
				if in.Reserved != want {
					t.Errorf("lease %s taken reserved to %q, want %q", in.Holder, in.Reserved, want)
				}
			}
			fj.mu.Lock()
			for _, in := range fj.started {
				if in.Reservation != want || in.Env["TOKEN"] != secretValue || !slices.Equal(in.Secrets, []string{secretValue}) {
					t.Errorf("server job %+v: want reservation %s, the secret in TOKEN and in Secrets", in, want)
				}
			}
			fj.mu.Unlock()
			b, _ := json.Marshal(inst)
			if strings.Contains(string(b), secretValue) {
				t.Errorf("the instance view shows the secret: %s", b)
			}
			if err := m.Delete("a", inst.ID); err != nil {
				t.Fatal(err)
			}
			fj.mu.Lock()
			defer fj.mu.Unlock()
			for _, c := range fj.calls {
				if !strings.HasSuffix(c, " "+want) {
					t.Errorf("a call into the reserved sandbox without its reservation: %q", c)
				}
			}
			if !slices.Contains(fj.calls, "cancel "+want) {
				t.Errorf("calls %v: the server was not stopped", fj.calls)
			}
		})
	}
	m, fl, _, _ := newReservedManager(t)
	inst, err := m.Create(t.Context(), "a", CreateRequest{Catalog: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Delete("a", inst.ID)
	if fl.acquired[0].Reserved != "" {
		t.Errorf("a server without secrets reserved its sandbox: %q", fl.acquired[0].Reserved)
	}
}

// TestEnvSecretsNeedOwnSandbox: an entry with env_secrets is refused a
// sandbox it would share with its tenant (lease_id, a lease's mcp) before
// anything is read, leased or started; and no server starts in another
// server's reserved lease.
func TestEnvSecretsNeedOwnSandbox(t *testing.T) {
	t.Parallel()
	m, fl, fj, reads := newReservedManager(t)
	ctx := t.Context()
	own := &sandbox.Lease{ID: sandbox.NewID("lse"), Tenant: "a", SandboxID: sandbox.NewID("sbx"), Runtime: sandbox.RuntimeRunsc, State: sandbox.LeaseActive}
	reserved := &sandbox.Lease{ID: sandbox.NewID("lse"), Tenant: "a", SandboxID: sandbox.NewID("sbx"), Runtime: sandbox.RuntimeRunsc,
		State: sandbox.LeaseActive, Reserved: "mcp:mcp_other"}
	fl.leases[own.ID], fl.leases[reserved.ID] = own, reserved

	_, err := m.Create(ctx, "a", CreateRequest{Catalog: "env-server", LeaseID: own.ID})
	wantCode(t, "env_secrets with lease_id", err, http.StatusBadRequest, CodeNeedOwnSandbox)
	err = m.CheckLeaseServer(ctx, "a", CreateRequest{Catalog: "env-server"})
	wantCode(t, "env_secrets in a lease's mcp", err, http.StatusBadRequest, CodeNeedOwnSandbox)
	if err := m.CheckLeaseServer(ctx, "a", CreateRequest{Catalog: "plain"}); err != nil {
		t.Errorf("a plain entry in a lease's mcp: %v", err)
	}
	err = m.CheckLeaseServer(ctx, "a", CreateRequest{Catalog: "nope"})
	wantCode(t, "an unknown entry in a lease's mcp", err, http.StatusNotFound, "catalog_entry_not_found")
	for _, req := range []CreateRequest{
		{Catalog: "plain", LeaseID: reserved.ID},
		{Spec: &Spec{Command: []string{"sh"}}, LeaseID: reserved.ID},
	} {
		_, err = m.Create(ctx, "a", req)
		wantCode(t, "a server in another server's reserved lease", err, http.StatusForbidden, control.CodeReserved)
	}
	if len(fl.acquired) != 0 || len(fj.started) != 0 || *reads != 0 {
		t.Errorf("refused creates leased %d, started %d, read %d secrets", len(fl.acquired), len(fj.started), *reads)
	}
}
