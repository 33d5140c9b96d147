//go:build !linux

package diskquota

import (
	"context"
	"errors"
)

func (m *Manager) check() string { return "loop-mounted ext4 needs Linux" }

func (m *Manager) format(context.Context, Spec) error { return errors.ErrUnsupported }

func mountImage(string, string) error { return errors.ErrUnsupported }

func unmount(string) error { return nil }
