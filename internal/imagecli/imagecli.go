package imagecli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"genesis.dev/sandbox/images"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/driver/docker"
	"genesis.dev/sandbox/internal/imagebuild"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// Run runs one subcommand: args[0] is build or ls, the rest its flags.
// name is the command as the user typed it ("sandbox-service images"),
// for usage and errors. Results go to stdout, the build's log to stderr.
func Run(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: %[1]s build [--profile NAME]... [--force] [--config FILE] [--repository PREFIX/] | %[1]s ls [--config FILE]", name)
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet(name+" "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var profiles stringList
	fs.Var(&profiles, "profile", "image recipe to build (repeatable; default: all)")
	force := fs.Bool("force", false, "rebuild even when the image is present")
	workDir := fs.String("work-dir", filepath.Join(os.TempDir(), "genesis-imagebuild"), "scratch directory for builds")
	dockerHost := fs.String("docker-host", "", "Docker daemon socket")
	configPath := fs.String("config", os.Getenv("GENESIS_CONFIG"), "the service's YAML config file, for its image_repository (env GENESIS_CONFIG)")
	logLevel := fs.String("log-level", "info", "debug (every line debootstrap and apt print), info, warn or error")
	repository := fs.String("repository", "", "tag the images PREFIX/NAME:HASH instead of the config's image_repository (genesis/), e.g. genesis-try/ to time a build without touching the service's images")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	drv, err := docker.New(docker.Config{Host: *dockerHost, Logger: log})
	if err != nil {
		return err
	}
	recipes, err := images.Recipes()
	if err != nil {
		return err
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		return err
	}
	if *repository == "" {
		*repository = cfg.ImageRepository
	}
	b, err := imagebuild.New(imagebuild.Config{Importer: drv, WorkDir: *workDir, Repository: *repository, Logger: log})
	if err != nil {
		return err
	}
	switch sub {
	case "ls":
		return list(ctx, stdout, drv, b, recipes, *repository)
	case "build":
	default:
		return fmt.Errorf("unknown %s subcommand %q (build, ls)", name, sub)
	}
	if len(profiles) == 0 {
		for _, r := range recipes {
			profiles = append(profiles, r.Name)
		}
	}
	for _, p := range profiles {
		res, err := b.Build(ctx, p, *force)
		if err != nil {
			return fmt.Errorf("building %s: %w", p, err)
		}
		state := "built"
		if res.Skipped {
			state = "present (recipe unchanged), skipped"
		}
		fmt.Fprintf(stdout, "%-22s %-46s %s in %s\n", res.Name, res.Ref, state, res.Duration.Round(time.Millisecond))
	}
	return nil
}

// list prints every recipe's image: present, not built, or where its
// build stands (a build of another process, the service's background
// builds say, or the last one, which failed).
func list(ctx context.Context, stdout io.Writer, drv *docker.Driver, b *imagebuild.Builder, recipes []images.Recipe, repository string) error {
	for _, r := range recipes {
		ref := r.RefIn(repository)
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		present, err := drv.ImagePresent(cctx, ref)
		cancel()
		if err != nil {
			return err
		}
		status := "not built"
		switch p, ok := b.Progress(r.Name); {
		case present:
			status = "present"
		case ok:
			status = p.Summary()
			if p.Detail != "" && p.State == imagebuild.StateBuilding {
				status += ": " + p.Detail
			}
		}
		fmt.Fprintf(stdout, "%-22s %-46s %s\n", r.Name, ref, status)
	}
	return nil
}
