package volumes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"

	"genesis.dev/sandbox/internal/errdefs"
)

// maxID bounds a uid or gid given to a volume's file.
const maxID = 1<<31 - 1

// writable refuses a change to a volume a sandbox holds writable: its one
// writer is that sandbox.
func writable(name, w string) error {
	if w == "" {
		return nil
	}
	return errdefs.WithCode(CodeBusy, fmt.Errorf("volume %q is mounted writable by sandbox %s: change it through that sandbox: %w", name, w, errdefs.ErrConflict))
}

// MakeDir makes directory p of tenant's volume name with permission mode
// (octal, "" for 0755), owned by the owner of the volume's root. With
// parents, missing parents are made and a directory that exists already
// is no error; without, the parent must exist and p must not (409
// file_exists). A volume a sandbox holds writable is 409 volume_busy.
func (m *Manager) MakeDir(ctx context.Context, tenant, name, p, mode string, parents bool) (*FileInfo, error) {
	r, err := rel(p)
	if err != nil {
		return nil, err
	}
	perm, err := parseMode(mode, 0o755)
	if err != nil {
		return nil, err
	}
	v, root, err := m.open(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if err := writable(name, v.Writer()); err != nil {
		return nil, err
	}
	owner, err := root.Stat(".")
	if err != nil {
		return nil, fileError("/", err)
	}
	st, _ := owner.Sys().(*syscall.Stat_t)
	uid, gid := int(st.Uid), int(st.Gid)
	if r != "." {
		if parents {
			if err := m.mkdirAll(root, filepath.Dir(r), uid, gid); err != nil {
				return nil, err
			}
		}
		switch err := root.Mkdir(r, perm); {
		case err == nil:
			if err := root.Chmod(r, perm|fs.ModeDir); err != nil { // past the umask
				return nil, fileError(shown(r), err)
			}
			if err := root.Lchown(r, uid, gid); err != nil {
				return nil, fileError(shown(r), err)
			}
		case errors.Is(err, fs.ErrExist) && parents:
		default:
			return nil, fileError(shown(r), err)
		}
	}
	fi, err := root.Lstat(r)
	if err != nil {
		return nil, fileError(shown(r), err)
	}
	if !fi.IsDir() {
		return nil, errdefs.WithCode(CodeFileExists, fmt.Errorf("%s exists and is not a directory: %w", shown(r), errdefs.ErrAlreadyExists))
	}
	i := info(shown(r), fi, "")
	return &i, nil
}

// Attrs are the metadata SetAttrs changes: those not nil.
type Attrs struct {
	// Mode is octal permission bits ("0640"): no set-id or sticky bits.
	Mode     *string
	UID, GID *int
}

// CheckAttrs refuses attributes SetAttrs would refuse for volume name, so
// that a caller writing a file and then setting them can check first and
// change nothing on bad input.
func (m *Manager) CheckAttrs(name string, a Attrs) error {
	if a.Mode != nil {
		if _, err := parseMode(*a.Mode, 0); err != nil {
			return err
		}
	}
	for _, id := range []*int{a.UID, a.GID} {
		if id != nil && (*id < 0 || *id > maxID) {
			return errdefs.WithCode("invalid_owner", errdefs.Invalid("uid and gid must be between 0 and %d, got %d", maxID, *id))
		}
	}
	if m.cfg.Provisioner != nil && (a.Mode != nil || a.UID != nil || a.GID != nil) {
		return filesUnsupported(name)
	}
	return nil
}

// SetAttrs changes the permission bits and owner of file p of tenant's
// volume name (a symlink itself is not followed: only its owner changes).
// A volume a sandbox holds writable is 409 volume_busy.
func (m *Manager) SetAttrs(ctx context.Context, tenant, name, p string, a Attrs) (*FileInfo, error) {
	r, err := rel(p)
	if err != nil {
		return nil, err
	}
	if err := m.CheckAttrs(name, a); err != nil {
		return nil, err
	}
	var perm fs.FileMode
	if a.Mode != nil {
		perm, _ = parseMode(*a.Mode, 0) // checked
	}
	v, root, err := m.open(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if err := writable(name, v.Writer()); err != nil {
		return nil, err
	}
	fi, err := root.Lstat(r)
	if err != nil {
		return nil, fileError(shown(r), err)
	}
	if a.UID != nil || a.GID != nil {
		uid, gid := -1, -1
		if a.UID != nil {
			uid = *a.UID
		}
		if a.GID != nil {
			gid = *a.GID
		}
		if err := root.Lchown(r, uid, gid); err != nil {
			return nil, fileError(shown(r), err)
		}
	}
	if a.Mode != nil && fi.Mode()&fs.ModeSymlink == 0 {
		if err := root.Chmod(r, perm); err != nil {
			return nil, fileError(shown(r), err)
		}
	}
	if fi, err = root.Lstat(r); err != nil {
		return nil, fileError(shown(r), err)
	}
	link := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		link, _ = root.Readlink(r)
	}
	i := info(shown(r), fi, link)
	return &i, nil
}
