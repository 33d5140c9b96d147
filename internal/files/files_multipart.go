package files

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"path"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// CodeTooManyFiles is the problem code of an upload with more files than
// limits.files.max_files_per_call.
const CodeTooManyFiles = "too_many_files"

// UploadFilesInput is an upload of several files below one directory.
type UploadFilesInput struct {
	Tenant    string
	SandboxID string
	Dir       string // the directory the names are relative to
	Mode      string // octal for every file; "" for 0644
	Overwrite bool
	// Next returns the next file: its name relative to Dir (slash
	// separated, parents are created) and its content, which is read to
	// its end before Next is called again. It returns io.EOF after the
	// last file.
	Next func() (name string, body io.Reader, err error)
}

// UploadFiles streams several files into the sandbox, all or nothing: each
// is written (temp + rename by the agent, checksummed) to a staging name
// beside its target, and only when every file has arrived whole and within
// the limits are they renamed into place. A bad name, too many files, a
// file over MaxUploadBytes, an existing target without Overwrite or a body
// cut short leaves the targets untouched and the staged files removed
// (parent directories made on the way stay).
func (g *Gateway) UploadFiles(ctx context.Context, in UploadFilesInput) ([]agentproto.FileWriteResult, error) {
	lim := g.Limits()
	if _, err := agentproto.ParseMode(in.Mode, 0o644); err != nil {
		return nil, err
	}
	att, err := g.fileSandbox(ctx, in.Tenant, in.SandboxID, &in.Dir)
	if err != nil {
		return nil, err
	}
	roots, err := fileRoots(ctx, att)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, lim.TransferTimeout)
	defer cancel()
	var tok [8]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, err
	}
	type staged struct{ tmp, target string }
	var done []staged
	var results []agentproto.FileWriteResult
	rollback := func(cause error) error {
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), lim.CallTimeout)
		defer ccancel()
		for _, f := range done {
			if err := att.Agent.DeleteFile(cctx, agentproto.DeleteRequest{Path: f.tmp}); err != nil && !errdefs.Is(err, errdefs.ErrNotFound) {
				g.log.Warn("removing a staged upload", "sandbox", att.Sandbox.ID, "path", f.tmp, "err", err)
			}
		}
		return cause
	}
	targets := map[string]bool{}
	for i := 0; ; i++ {
		name, body, err := in.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, rollback(err)
		}
		if i >= lim.MaxFilesPerCall {
			return nil, rollback(errdefs.WithCode(CodeTooManyFiles, fmt.Errorf(
				"the upload holds more than %d files; nothing was written: %w", lim.MaxFilesPerCall, errdefs.ErrInvalidArgument)))
		}
		target, err := uploadTarget(roots, lim.MaxPathBytes, in.Dir, name)
		if err != nil {
			return nil, rollback(err)
		}
		if targets[target] {
			return nil, rollback(invalid("the upload names %q twice; nothing was written", name))
		}
		targets[target] = true
		tmp := path.Join(path.Dir(target), fmt.Sprintf(".genesis-part-%x-%d", tok, i))
		res, err := g.writeFile(ctx, att.Agent, agentclient.WriteFileRequest{
			Path: tmp, Mode: in.Mode, Overwrite: false, MaxBytes: lim.MaxUploadBytes, Size: -1,
		}, body)
		if err != nil {
			return nil, rollback(fmt.Errorf("file %q: %w", name, err))
		}
		done = append(done, staged{tmp: tmp, target: target})
		res.Path = target
		results = append(results, res)
	}
	if len(done) == 0 {
		return nil, invalid("the upload holds no file")
	}
	if !in.Overwrite {
		for _, f := range done {
			_, err := att.Agent.StatFile(ctx, f.target)
			if err == nil {
				return nil, rollback(errdefs.WithCode(agentproto.CodeFileExists, fmt.Errorf(
					"%s exists and overwrite is false; nothing was written: %w", f.target, errdefs.ErrConflict)))
			}
			if !errdefs.Is(err, errdefs.ErrNotFound) {
				return nil, rollback(err)
			}
		}
	}
	for i, f := range done {
		if _, err := att.Agent.Move(ctx, agentproto.MoveRequest{From: f.tmp, To: f.target, Overwrite: in.Overwrite}); err != nil {
			done = done[i:] // the files before are in place
			return nil, rollback(fmt.Errorf("moving %s into place after %d of %d files: %w", f.target, i, len(results), err))
		}
	}
	return results, nil
}

// uploadTarget is the absolute path of name below dir (a path already
// resolved) under the path policy of roots (agentproto.ResolveBelow) with
// paths of at most maxPath bytes.
func uploadTarget(roots []string, maxPath int, dir, name string) (string, error) {
	if err := checkPathLen(maxPath, dir+"/"+name); err != nil {
		return "", err
	}
	return agentproto.ResolveBelow(roots, dir, name)
}
