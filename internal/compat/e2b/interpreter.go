package e2b

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"genesis.dev/sandbox/internal/compat/shared"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// executeBody is the code interpreter's run request.
type executeBody struct {
	Code      string            `json:"code"`
	ContextID string            `json:"context_id"`
	Language  string            `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

// mimeField names the result fields of the SDK's Result by MIME type.
var mimeField = map[string]string{
	"image/png": "png", "image/jpeg": "jpeg", "image/svg+xml": "svg", "text/html": "html",
	"text/markdown": "markdown", "application/pdf": "pdf", "text/latex": "latex",
	"application/json": "json", "application/javascript": "javascript",
}

// execute serves the code interpreter's POST /execute (port 49999): the
// code runs in the sandbox's default code context (made on first use, so
// variables persist between calls), answered as JSON lines: stdout,
// stderr, result, error and number_of_executions.
func (a *Adapter) execute(w http.ResponseWriter, r *http.Request) {
	if err := onPort(r, InterpreterPort, "code interpreter"); err != nil {
		a.writeError(w, r, err)
		return
	}
	var body executeBody
	if err := shared.DecodeBody(r, &body); err != nil {
		a.writeError(w, r, err)
		return
	}
	if body.Language != "" && body.Language != "python" {
		a.writeError(w, r, errdefs.WithCode("language_unsupported", errdefs.Invalid("language %q is not supported (python is)", body.Language)))
		return
	}
	if len(body.EnvVars) > 0 {
		a.writeError(w, r, errdefs.WithCode("env_vars_unsupported", fmt.Errorf("env_vars on a run are not supported; set envs when creating the sandbox: %w", errdefs.ErrNotImplemented)))
		return
	}
	ctx := r.Context()
	tenant, sbID := tenantOf(ctx), sandboxOf(ctx)
	cid := body.ContextID
	var err error
	if cid == "" {
		cid, err = a.defaultContext(r, tenant, sbID)
	} else {
		err = a.ownContext(r, cid)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	res, err := a.jobs.RunCode(ctx, tenant, cid, body.Code, 0)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	if s := string(res.Exec.Stdout); s != "" {
		_ = enc.Encode(map[string]any{"type": "stdout", "text": s})
	}
	if s := string(res.Exec.Stderr); s != "" {
		_ = enc.Encode(map[string]any{"type": "stderr", "text": s})
	}
	for _, o := range res.Outputs {
		if f, ok := mimeField[o.MIME]; ok {
			_ = enc.Encode(map[string]any{"type": "result", f: o.Data, "is_main_result": false})
		}
	}
	if res.Value != nil {
		_ = enc.Encode(map[string]any{"type": "result", "text": *res.Value, "is_main_result": true})
	}
	if res.Error != nil {
		_ = enc.Encode(map[string]any{"type": "error", "name": res.Error.Name, "value": res.Error.Value,
			"traceback": strings.Join(res.Error.Traceback, "\n")})
	}
	_ = enc.Encode(map[string]any{"type": "number_of_executions", "execution_count": 1})
}

// contextSlot is a sandbox's default code context, made once.
type contextSlot struct {
	mu sync.Mutex
	id string
}

// defaultContext returns the sandbox's default code context, making it on
// first use (one maker per sandbox; other sandboxes do not wait).
func (a *Adapter) defaultContext(r *http.Request, tenant, sandboxID string) (string, error) {
	a.ctxMu.Lock()
	slot := a.contexts[sandboxID]
	if slot == nil {
		slot = &contextSlot{}
		a.contexts[sandboxID] = slot
	}
	a.ctxMu.Unlock()
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.id != "" {
		return slot.id, nil
	}
	se, err := a.jobs.CreateContext(r.Context(), tenant, sandboxID, "python")
	if err != nil {
		return "", err
	}
	slot.id = se.ID
	return se.ID, nil
}

// ownContext checks that context id is a code context of the request's
// sandbox: the access token opens one sandbox, not its tenant's others.
func (a *Adapter) ownContext(r *http.Request, id string) error {
	se, err := a.jobs.GetSession(r.Context(), tenantOf(r.Context()), id)
	if err != nil || se.SandboxID != sandboxOf(r.Context()) || se.Kind != sandbox.SessionPython {
		return fmt.Errorf("context %q not found: %w", id, errdefs.ErrNotFound)
	}
	return nil
}

// codeContext is a context as the code interpreter SDK reads it.
type codeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

// createContext serves POST /contexts {language, cwd} (port 49999): a new
// code context of the sandbox, started in cwd (/home/user by default).
func (a *Adapter) createContext(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Language string `json:"language"`
		Cwd      string `json:"cwd"`
	}
	if err := shared.DecodeBody(r, &body); err != nil {
		a.writeError(w, r, err)
		return
	}
	if err := onPort(r, InterpreterPort, "code interpreter"); err != nil {
		a.writeError(w, r, err)
		return
	}
	cwd, err := sandboxPath(body.Cwd)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	se, err := a.jobs.CreateContext(ctx, tenantOf(ctx), sandboxOf(ctx), body.Language)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if cwd == "" {
		cwd = workspace
	}
	res, err := a.jobs.RunCode(ctx, tenantOf(ctx), se.ID, "import os\nos.chdir("+strconv.Quote(cwd)+")", 0)
	if err == nil && res.Error != nil {
		err = fmt.Errorf("cwd %s: %s: %w", body.Cwd, res.Error.Value, errdefs.ErrInvalidArgument)
	}
	if err != nil {
		_ = a.jobs.CloseSession(ctx, tenantOf(ctx), se.ID)
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, codeContext{ID: se.ID, Language: "python", Cwd: sdkPath(cwd)})
}

// deleteContext serves DELETE /contexts/{id}: the context and its kernel
// end.
func (a *Adapter) deleteContext(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := a.ownContext(r, id); err != nil {
		a.writeError(w, r, err)
		return
	}
	if err := a.jobs.CloseSession(r.Context(), tenantOf(r.Context()), id); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
