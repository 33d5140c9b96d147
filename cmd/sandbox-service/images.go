package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"genesis.dev/sandbox/images"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/imagebuild"
	"genesis.dev/sandbox/internal/imagecli"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// imagesCmd runs `sandbox-service images build|ls|build-service`. Ctrl-C
// stops the build in progress, which then cleans up after itself.
func imagesCmd(ctx context.Context, args []string) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) == 0 {
		return fmt.Errorf("usage: sandbox-service images build [--profile NAME]... [--force] [--config FILE] [--repository PREFIX/] | images ls [--config FILE] | images build-service [--tag REF]... [--force]")
	}
	if args[0] == "build-service" {
		return buildServiceImageCmd(ctx, args[1:])
	}
	return imagecli.Run(ctx, "sandbox-service images", args, os.Stdout, os.Stderr)
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
