package opensandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/compat/shared"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// The code interpreter part of execd (what OpenSandbox's code-interpreter
// SDK calls): contexts are jobs' code contexts, so variables persist
// between runs; Python only.

// contexts keeps each sandbox's default code context (made on first use
// by a run that names none).
type contexts struct {
	mu  sync.Mutex
	def map[string]*defaultContext // sandbox id → its default context
}

type defaultContext struct {
	mu sync.Mutex
	id string
}

// Name is the adapter's hook name.
func (a *Adapter) Name() string { return "opensandbox" }

// SandboxEnding forgets the sandbox's default code context.
func (a *Adapter) SandboxEnding(_ context.Context, sandboxID, _ string) {
	a.ctx.mu.Lock()
	delete(a.ctx.def, sandboxID)
	a.ctx.mu.Unlock()
}

// codeContext is a context as the SDK knows it.
type codeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
}

func checkLanguage(lang string) error {
	if lang != "" && lang != "python" {
		return errdefs.WithCode("language_unsupported", errdefs.Invalid("language %q is not supported (python is)", lang))
	}
	return nil
}

// createCodeContext serves POST /code/context {language}.
func (a *Adapter) createCodeContext(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Language string `json:"language"`
	}
	if err := shared.DecodeBody(r, &body); err != nil {
		a.writeError(w, r, err)
		return
	}
	if err := checkLanguage(body.Language); err != nil {
		a.writeError(w, r, err)
		return
	}
	se, err := a.jobs.CreateContext(r.Context(), tenantOf(r.Context()), sandboxOf(r.Context()), "python")
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, codeContext{ID: se.ID, Language: "python"})
}

// ownContext checks that id is a live code context of the token's sandbox.
func (a *Adapter) ownContext(r *http.Request, id string) error {
	se, err := a.jobs.GetSession(r.Context(), tenantOf(r.Context()), id)
	if err != nil || se.SandboxID != sandboxOf(r.Context()) || se.Kind != sandbox.SessionPython || se.State != sandbox.SessionActive {
		return errdefs.WithCode("context_not_found", fmt.Errorf("no code context %q in this sandbox: %w", id, errdefs.ErrNotFound))
	}
	return nil
}

// getCodeContext serves GET /code/contexts/{context_id}.
func (a *Adapter) getCodeContext(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("context_id")
	if err := a.ownContext(r, id); err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, codeContext{ID: id, Language: "python"})
}

// deleteCodeContext serves DELETE /code/contexts/{context_id}.
func (a *Adapter) deleteCodeContext(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("context_id")
	err := a.ownContext(r, id)
	if err == nil {
		err = a.jobs.CloseSession(r.Context(), tenantOf(r.Context()), id)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// defaultContextOf returns the sandbox's default context, made on first
// use (one maker per sandbox; other sandboxes do not wait).
func (a *Adapter) defaultContextOf(r *http.Request) (string, error) {
	sbID := sandboxOf(r.Context())
	a.ctx.mu.Lock()
	d := a.ctx.def[sbID]
	if d == nil {
		d = &defaultContext{}
		a.ctx.def[sbID] = d
	}
	a.ctx.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.id != "" && a.ownContext(r, d.id) == nil {
		return d.id, nil
	}
	se, err := a.jobs.CreateContext(r.Context(), tenantOf(r.Context()), sbID, "python")
	if err != nil {
		return "", err
	}
	d.id = se.ID
	return se.ID, nil
}

// runCode serves POST /code {context: {id, language}, code}: the code runs
// in the context (the sandbox's default one when no id is given),
// answered as the SDK's events — init (the context id), stdout, stderr,
// result {results: {mime: data}}, execution_count, then execution_complete
// or error {ename, evalue, traceback}.
func (a *Adapter) runCode(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Context *codeContext `json:"context"`
		Code    string       `json:"code"`
	}
	if err := shared.DecodeBody(r, &body); err != nil {
		a.writeError(w, r, err)
		return
	}
	var id string
	var err error
	if body.Context != nil {
		err = checkLanguage(body.Context.Language)
		id = body.Context.ID
	}
	switch {
	case err != nil:
	case id == "":
		id, err = a.defaultContextOf(r)
	default:
		err = a.ownContext(r, id)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	start := time.Now()
	res, err := a.jobs.RunCode(r.Context(), tenantOf(r.Context()), id, body.Code, 0)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	now := time.Now().UnixMilli()
	send := func(v map[string]any) {
		v["timestamp"] = now
		b, _ := json.Marshal(v)
		_, _ = w.Write(append(b, '\n', '\n'))
	}
	send(map[string]any{"type": "init", "text": id})
	if s := string(res.Exec.Stdout); s != "" {
		send(map[string]any{"type": "stdout", "text": s})
	}
	if s := string(res.Exec.Stderr); s != "" {
		send(map[string]any{"type": "stderr", "text": s})
	}
	for _, o := range res.Outputs {
		send(map[string]any{"type": "result", "results": map[string]any{o.MIME: o.Data}})
	}
	if res.Value != nil {
		send(map[string]any{"type": "result", "results": map[string]any{"text/plain": *res.Value}})
	}
	send(map[string]any{"type": "execution_count", "execution_count": 1})
	ms := time.Since(start).Milliseconds()
	if res.Error != nil {
		send(map[string]any{"type": "error", "error": map[string]any{"ename": res.Error.Name, "evalue": res.Error.Value,
			"traceback": nonNil(res.Error.Traceback)}})
		return
	}
	send(map[string]any{"type": "execution_complete", "execution_time": ms})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
