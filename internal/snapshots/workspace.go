package snapshots

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// OpenWorkspace opens the workspace of tenant's ready snapshot id as the
// tar WriteTree made (names relative to the workspace). The reader checks
// the manifest's SHA-256 as it reaches the end: a damaged file ends in a
// snapshot_corrupt error instead of io.EOF. A snapshot without a workspace
// reads as an empty stream. The caller closes it.
func (m *Manager) OpenWorkspace(ctx context.Context, tenant, id string) (io.ReadCloser, error) {
	sn, err := m.Get(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if sn.State != sandbox.SnapshotReady {
		return nil, errdefs.WithCode("snapshot_not_ready", errdefs.Mark(fmt.Errorf("snapshot %s is %s", sn.ID, sn.State), errdefs.ErrFailedPrecondition))
	}
	man, err := m.disk.Open(sn.ID)
	if err != nil {
		return nil, err
	}
	if man.Workspace == "" {
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	mf, ok := man.File(man.Workspace)
	if !ok {
		return nil, errCorrupt(man.Workspace, "not in the manifest")
	}
	f, err := os.Open(filepath.Join(m.disk.Path(man.ID), man.Workspace))
	if errors.Is(err, os.ErrNotExist) {
		return nil, errCorrupt(man.Workspace, "missing")
	}
	if err != nil {
		return nil, fmt.Errorf("snapshots: %v: %w", err, errdefs.ErrUnavailable)
	}
	return &checkedReader{f: f, h: sha256.New(), want: mf.SHA256, name: man.Workspace}, nil
}

// checkedReader reads a snapshot file and compares its SHA-256 with the
// manifest's at the end.
type checkedReader struct {
	f    *os.File
	h    hash.Hash
	want string
	name string
}

func (c *checkedReader) Read(p []byte) (int, error) {
	n, err := c.f.Read(p)
	c.h.Write(p[:n])
	if errors.Is(err, io.EOF) && hex.EncodeToString(c.h.Sum(nil)) != c.want {
		return n, errCorrupt(c.name, "checksum mismatch")
	}
	return n, err
}

func (c *checkedReader) Close() error { return c.f.Close() }
