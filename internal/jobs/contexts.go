package jobs

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// pykernel is the code-interpreter kernel, installed next to the agent (it
// is bind-mounted read-only into every sandbox at /.genesis).
//
//go:embed pykernel.py
var pykernel []byte

const (
	pykernelName    = "genesis-pykernel.py"
	contextStateDir = "/tmp/.genesis-contexts"
	// kernelLifetime bounds how long a context's kernel process lives.
	kernelStartTimeout = 20 * time.Second
)

// InstallKernel writes the code-interpreter kernel into the agent
// directory agentDir, which every sandbox mounts read-only at /.genesis;
// call it before the service starts.
func InstallKernel(agentDir string) error {
	dst := filepath.Join(agentDir, pykernelName)
	if old, err := os.ReadFile(dst); err == nil && string(old) == string(pykernel) {
		return nil
	}
	tmp := fmt.Sprintf("%s.%d.tmp", dst, os.Getpid())
	if err := os.WriteFile(tmp, pykernel, 0o644); err != nil {
		return fmt.Errorf("installing the code kernel: %w", err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

func kernelPath() string { return "/.genesis/" + pykernelName }

func contextSocket(id string) string { return contextStateDir + "/" + id + "/k.sock" }

// CreateContext starts a Python code-interpreter context in a sandbox: a
// kernel process (a background job) that keeps variables between runs.
func (s *Manager) CreateContext(ctx context.Context, tenant, sandboxID, language string) (*sandbox.Session, error) {
	if language != "python" && language != "" {
		return nil, errdefs.WithCode("language_unsupported", invalid("language %q is not supported (supported: python)", language))
	}
	att, err := s.sbx.Attach(ctx, tenant, sandboxID, control.AttachOptions{})
	if err != nil {
		return nil, err
	}
	sb := att.Sandbox
	now := s.now()
	se := &sandbox.Session{
		ID: sandbox.NewID("ctx"), Tenant: tenant, SandboxID: sb.ID, Kind: sandbox.SessionPython,
		State: sandbox.SessionActive, CreatedAt: now, UpdatedAt: now,
	}
	job, err := s.StartJob(ctx, ExecInput{
		Tenant: tenant, SandboxID: sb.ID,
		Command: []string{"python3", "-u", kernelPath(), "serve", contextSocket(se.ID)},
		Env:     map[string]string{"MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1"},
	})
	if err != nil {
		return nil, err
	}
	se.KernelJobID = job.ID
	pctx, cancel := context.WithTimeout(ctx, kernelStartTimeout)
	defer cancel()
	ping, err := s.Exec(pctx, ExecInput{
		Tenant: tenant, SandboxID: sb.ID, TimeoutMS: kernelStartTimeout.Milliseconds(),
		Command: []string{"python3", kernelPath(), "ping", contextSocket(se.ID)},
	})
	if err != nil || ping.Job.ExitCode == nil || *ping.Job.ExitCode != 0 {
		_, _ = s.CancelJob(context.WithoutCancel(ctx), tenant, job.ID)
		why := "the kernel did not start"
		if err != nil {
			why += ": " + err.Error()
		} else if ping.Job.ExitCode != nil && *ping.Job.ExitCode == 127 {
			why = fmt.Sprintf("profile %s has no python3; use a code-python-* profile", sb.Profile)
		} else {
			why += ": " + strings.TrimSpace(string(ping.Stderr))
		}
		return nil, errdefs.WithCode("context_start_failed", fmt.Errorf("%s: %w", why, errdefs.ErrFailedPrecondition))
	}
	if err := s.store.CreateSession(ctx, se); err != nil {
		_, _ = s.CancelJob(context.WithoutCancel(ctx), tenant, job.ID)
		return nil, err
	}
	return se, nil
}

// CodeError is a Python exception raised by a run.
type CodeError struct {
	Name      string   `json:"ename"`
	Value     string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// RichOutput is a rich result of a run, such as a matplotlib figure.
type RichOutput struct {
	MIME string `json:"mime"`
	Data string `json:"data"` // base64
}

// RunResult is the outcome of running code in a context.
type RunResult struct {
	Exec     *ExecOutput
	Status   string       `json:"status"` // ok | error
	Value    *string      `json:"value,omitempty"`
	Error    *CodeError   `json:"error,omitempty"`
	Outputs  []RichOutput `json:"outputs"`
	Warnings []string     `json:"warnings,omitempty"`
}

// RunCode runs code in a context; variables persist between runs.
func (s *Manager) RunCode(ctx context.Context, tenant, contextID, code string, timeoutMS int64) (*RunResult, error) {
	se, err := s.activeSession(ctx, tenant, contextID, sandbox.SessionPython)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(code) == "" {
		return nil, invalid("code is required")
	}
	req, _ := json.Marshal(map[string]string{"code": code})
	mu := s.sessionLock(se.ID)
	mu.Lock()
	defer mu.Unlock()
	resultPath := fmt.Sprintf("%s/%s/result-%d.json", contextStateDir, se.ID, se.Runs+1)
	out, err := s.Exec(ctx, ExecInput{
		Tenant: tenant, SandboxID: se.SandboxID, Stdin: req, TimeoutMS: timeoutMS,
		Command: []string{"python3", kernelPath(), "run", contextSocket(se.ID), resultPath},
	})
	if err != nil {
		return nil, err
	}
	res := &RunResult{Exec: out}
	if out.Job.ExitReason != sandbox.ExitExited {
		res.Status = "error"
		res.Error = &CodeError{Name: "RunAborted", Value: fmt.Sprintf("the run ended by %s", out.Job.ExitReason)}
		return res, nil
	}
	cat, err := s.Exec(ctx, ExecInput{
		Tenant: tenant, SandboxID: se.SandboxID, TimeoutMS: 10000, MaxOutputBytes: s.lim.MaxOutputBytes,
		Script: "cat " + shellQuote(resultPath) + " && rm -f " + shellQuote(resultPath),
	})
	if err != nil {
		return nil, err
	}
	if cat.Job.ExitCode == nil || *cat.Job.ExitCode != 0 {
		res.Status = "error"
		// The client's stderr shows the kernel client's own error; the
		// value says what it means.
		res.Error = &CodeError{Name: "KernelUnavailable", Value: "the context's kernel did not answer: it ended, or its sandbox started afresh on its files " +
			"(woken, rolled back or made from a snapshot without its processes, as under runc); create a new context"}
		return res, nil
	}
	if err := json.Unmarshal(cat.Stdout, res); err != nil {
		return nil, fmt.Errorf("decoding the kernel's result: %v: %w", err, errdefs.ErrInternal)
	}
	if res.Outputs == nil {
		res.Outputs = []RichOutput{}
	}
	if _, uerr := s.store.UpdateSession(ctx, se.ID, func(x *sandbox.Session) error {
		x.LastJobID, x.Runs, x.UpdatedAt = out.Job.ID, x.Runs+1, s.now()
		return nil
	}); uerr != nil {
		s.log.Warn("recording context run", "context", se.ID, "err", uerr)
	}
	return res, nil
}
