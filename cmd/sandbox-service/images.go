package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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

func imagesCmd(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: sandbox-service images build [--profile NAME]... [--force] [--config FILE] [--repository PREFIX/] | images ls [--config FILE]")
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("sandbox-service images "+sub, flag.ContinueOnError)
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
	log, err := newLogger(*logLevel)
	if err != nil {
		return err
	}
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
		for _, r := range recipes {
			ref := r.RefIn(*repository)
			present, err := drv.ImagePresent(ctx, ref)
			if err != nil {
				return err
			}
			status := "not built"
			switch p, ok := b.Progress(r.Name); {
			case present:
				status = "present"
			case ok:
				// A build of another process (the service's background
				// builds, say), or the last one, which failed.
				status = p.Summary()
				if p.Detail != "" && p.State == imagebuild.StateBuilding {
					status += ": " + p.Detail
				}
			}
			fmt.Printf("%-22s %-40s %s\n", r.Name, ref, status)
		}
		return nil
	case "build":
	default:
		return fmt.Errorf("unknown images subcommand %q (build, ls)", sub)
	}
	if len(profiles) == 0 {
		for _, r := range recipes {
			profiles = append(profiles, r.Name)
		}
	}
	for _, name := range profiles {
		res, err := b.Build(ctx, name, *force)
		if err != nil {
			return fmt.Errorf("building %s: %w", name, err)
		}
		state := "built"
		if res.Skipped {
			state = "present (recipe unchanged), skipped"
		}
		fmt.Printf("%-22s %-40s %s in %s\n", res.Name, res.Ref, state, res.Duration.Round(time.Millisecond))
	}
	return nil
}

// imageQueue returns the background builds of the profiles' images that
// --build-images asks for (nil without it): every recipe a profile runs,
// in the order of the profiles, so the first profiles' images (the
// quickstart's) come first. onBuilt is told of each image that is present.
func imageQueue(f serveFlags, cfg *config.Config, importer imagebuild.Importer, log *slog.Logger, onBuilt func(string)) (*imagebuild.Queue, error) {
	if !f.buildImages {
		return nil, nil
	}
	if cfg.Driver == "kubernetes" {
		return nil, fmt.Errorf("--build-images builds into this host's Docker, which the kubernetes driver does not run sandboxes from; build the images and load them onto the nodes (docs/kubernetes.md)")
	}
	b, err := imagebuild.New(imagebuild.Config{Importer: importer, Repository: cfg.ImageRepository, Logger: log})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range cfg.Profiles {
		if _, ok := images.Lookup(p.Recipe); ok && p.Image == "" && !slices.Contains(names, p.Recipe) {
			names = append(names, p.Recipe)
		}
	}
	return imagebuild.NewQueue(imagebuild.QueueConfig{Builder: b, Names: names, OnBuilt: onBuilt, Logger: log})
}

// runImageQueue runs q's builds in the background and returns the
// function that stops them: it cancels the build in progress and waits
// (a while) for it to clean up.
func runImageQueue(ctx context.Context, q *imagebuild.Queue, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	log.Info("building the profiles' missing images in the background", "order", strings.Join(q.Names(), ", "))
	go func() {
		defer close(done)
		q.Run(ctx)
	}()
	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(time.Minute):
			log.Warn("the background image build did not stop within a minute")
		}
	}
}
