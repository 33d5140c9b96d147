package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"genesis.dev/sandbox/images"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/driver/docker"
	"genesis.dev/sandbox/internal/imagebuild"
)

// The service's own container image (docs/docker-desktop.md).
const (
	serviceImageRepo = "genesis/sandbox-service"
	// serviceDataDir is where the image's default command keeps its data
	// dir: a volume of the image, or whatever the user mounts there.
	serviceDataDir = "/var/lib/genesis"
	// serviceBinDir holds the binaries in the image; the service finds the
	// agent and the egress gateway next to itself.
	serviceBinDir = "usr/local/bin"
)

// serviceBinaries go into the image, from the directory of this executable.
var serviceBinaries = []string{"sandbox-service", "genesis-agent", "genesis-egress", "genesis"}

// serviceImageConfig is how the image runs: tini as PID 1 (it reaps the
// orphans of image builds and passes signals on), the service on every
// address of the container, its data dir a volume.
func serviceImageConfig() docker.ImageConfig {
	return docker.ImageConfig{
		Entrypoint: []string{"/usr/bin/tini", "--", "/" + serviceBinDir + "/sandbox-service"},
		Cmd:        []string{"serve", "--addr", "0.0.0.0:8080", "--data-dir", serviceDataDir},
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"},
		WorkingDir: "/",
		Labels: map[string]string{
			// Not a container the service made: no reconciler may take it
			// for one of its sandboxes.
			driver.LabelManaged: "false",
			driver.LabelPurpose: "service",
		},
		ExposedPorts: []string{"8080/tcp"},
		Volumes:      []string{serviceDataDir},
	}
}

// buildServiceImageCmd builds the service's own container image: the
// Debian base of images/service (debootstrap, cached by its recipe hash
// like every profile image) plus the static binaries next to this
// executable, tagged genesis/sandbox-service:<hash of both> and the --tag
// references. Nothing is pulled, and no build engine is needed.
func buildServiceImageCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sandbox-service images build-service", flag.ContinueOnError)
	var tags stringList
	fs.Var(&tags, "tag", "further reference for the image (repeatable; default "+serviceImageRepo+":latest; --tag '' for none)")
	force := fs.Bool("force", false, "rebuild the base and the image even when present")
	workDir := fs.String("work-dir", filepath.Join(os.TempDir(), "genesis-imagebuild"), "scratch directory for the base's build")
	dockerHost := fs.String("docker-host", "", "Docker daemon socket")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if len(tags) == 0 {
		tags = stringList{serviceImageRepo + ":latest"}
	}
	log, err := newLogger("info")
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	files, sum, err := serviceFiles(filepath.Dir(exe))
	if err != nil {
		return err
	}
	drv, err := docker.New(docker.Config{Host: *dockerHost, Logger: log})
	if err != nil {
		return err
	}
	defer drv.Close()
	b, err := imagebuild.New(imagebuild.Config{Importer: drv, WorkDir: *workDir, Logger: log})
	if err != nil {
		return err
	}
	start := time.Now()
	base, err := b.Build(ctx, images.ServiceRecipe, *force)
	if err != nil {
		return fmt.Errorf("building the base %s: %w", images.ServiceRecipe, err)
	}
	ref := serviceImageRef(base.Ref, sum)
	present, err := drv.ImagePresent(ctx, ref)
	if err != nil {
		return err
	}
	state := "present (binaries and base unchanged), skipped"
	if !present || *force {
		if _, err := drv.AddLayer(ctx, docker.LayerSpec{Base: base.Ref, Ref: ref, Files: bytes.NewReader(files), Config: serviceImageConfig()}); err != nil {
			return fmt.Errorf("making %s: %w", ref, err)
		}
		state = "built"
	}
	for _, t := range tags {
		if t == "" {
			continue
		}
		if err := drv.TagImage(ctx, ref, t); err != nil {
			return err
		}
	}
	fmt.Printf("%-22s %-40s %s in %s\n", "service", ref, state, time.Since(start).Round(time.Millisecond))
	return nil
}

// serviceImageRef names the image of base plus the binaries summed in sum.
func serviceImageRef(base string, sum []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "base %s\n", base)
	h.Write(sum)
	cfg := serviceImageConfig()
	fmt.Fprintf(h, "config %q %q %q\n", cfg.Entrypoint, cfg.Cmd, cfg.Env)
	return serviceImageRepo + ":" + hex.EncodeToString(h.Sum(nil))[:12]
}

// serviceFiles returns a tar of the service's binaries from dir, placed in
// serviceBinDir, and a digest of their names and contents. Each must be a
// static Linux executable: the image's C library is not the build host's.
func serviceFiles(dir string) (tarball, sum []byte, err error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	h := sha256.New()
	for _, name := range serviceBinaries {
		p := filepath.Join(dir, name)
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w (build the binaries with: make service-image)", name, err)
		}
		if err := checkStatic(p, data); err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(data))
		h.Write(data)
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: serviceBinDir + "/" + name, Mode: 0o755, Size: int64(len(data)), ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), h.Sum(nil), nil
}

// checkStatic accepts a Linux ELF executable without a program interpreter
// (a static binary, as CGO_ENABLED=0 builds it).
func checkStatic(path string, data []byte) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s is not a Linux executable (%v); build the image's binaries with: make service-image", path, err)
	}
	defer f.Close()
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return fmt.Errorf("%s is not a Linux executable; build the image's binaries with: make service-image", path)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; the image needs static binaries (CGO_ENABLED=0): build them with: make service-image", path)
		}
	}
	return nil
}
