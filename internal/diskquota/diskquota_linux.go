package diskquota

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"genesis.dev/sandbox/internal/errdefs"
)

// check returns why quotas cannot be enforced here, or "".
func (m *Manager) check() string {
	if os.Geteuid() != 0 {
		return "not running as root (loop mounts need it)"
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return "/dev/loop-control is missing (no loop device support)"
	}
	if m.mkfs == "" {
		p, err := exec.LookPath("mkfs.ext4")
		if err != nil {
			return "mkfs.ext4 is not on PATH (install e2fsprogs)"
		}
		m.mkfs = p
	}
	return ""
}

// format makes an ext4 filesystem in the image: no reserved blocks (the
// sandbox user gets the whole size), its root owned by the sandbox user,
// no discard pass (the file is sparse already).
func (m *Manager) format(ctx context.Context, spec Spec) error {
	cmd := exec.CommandContext(ctx, m.mkfs, "-q", "-F", "-m", "0",
		"-E", fmt.Sprintf("root_owner=%d:%d,nodiscard,lazy_itable_init=1,lazy_journal_init=1", spec.UID, spec.GID),
		spec.Image)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("diskquota: mkfs.ext4: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// mountImage attaches image to a free loop device with auto-clear and
// mounts it on dir (nosuid, nodev). The loop device detaches itself when
// the filesystem is unmounted, or at once if the mount fails.
func mountImage(image, dir string) error {
	lf, err := attachLoop(image)
	if err != nil {
		return err
	}
	defer lf.Close() // the mount holds the device from here on
	if err := unix.Mount(lf.Name(), dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOATIME, ""); err != nil {
		return fmt.Errorf("mount %s on %s: %w", lf.Name(), dir, err)
	}
	return nil
}

// attachLoop binds image to a free loop device and returns the device open.
func attachLoop(image string) (*os.File, error) {
	img, err := os.OpenFile(image, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer img.Close()
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	for range 64 { // another process may take the free device first
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("finding a free loop device: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		lf, err := os.OpenFile(dev, os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) { // no devtmpfs/udev node yet
			if err := unix.Mknod(dev, unix.S_IFBLK|0o660, int(unix.Mkdev(7, uint32(n)))); err != nil && !errors.Is(err, os.ErrExist) {
				return nil, fmt.Errorf("making %s: %w", dev, err)
			}
			lf, err = os.OpenFile(dev, os.O_RDWR, 0)
		}
		if err != nil {
			return nil, err
		}
		cfg := unix.LoopConfig{Fd: uint32(img.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], image)
		err = unix.IoctlLoopConfigure(int(lf.Fd()), &cfg)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTTY) { // kernels before 5.8
			if err = unix.IoctlSetInt(int(lf.Fd()), unix.LOOP_SET_FD, int(img.Fd())); err == nil {
				if err = unix.IoctlLoopSetStatus64(int(lf.Fd()), &cfg.Info); err != nil {
					_ = unix.IoctlSetInt(int(lf.Fd()), unix.LOOP_CLR_FD, 0)
				}
			}
		}
		if errors.Is(err, unix.EBUSY) {
			lf.Close()
			continue
		}
		if err != nil {
			lf.Close()
			return nil, fmt.Errorf("attaching %s to %s: %w", image, dev, err)
		}
		return lf, nil
	}
	return nil, fmt.Errorf("no free loop device after 64 tries: %w", errdefs.ErrUnavailable)
}

// unmount unmounts every mount stacked on dir, detaching lazily when the
// filesystem is still busy. A directory that is not a mount point (or is
// gone) is fine.
func unmount(dir string) error {
	for range 8 {
		err := unix.Unmount(dir, unix.UMOUNT_NOFOLLOW)
		if errors.Is(err, unix.EBUSY) {
			err = unix.Unmount(dir, unix.UMOUNT_NOFOLLOW|unix.MNT_DETACH)
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT):
			return nil
		default:
			return err
		}
	}
	return fmt.Errorf("%s is still mounted after 8 unmounts", dir)
}
