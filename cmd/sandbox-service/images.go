package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"genesis.dev/sandbox/images"
	"genesis.dev/sandbox/internal/driver/docker"
	"genesis.dev/sandbox/internal/imagebuild"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func imagesCmd(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: sandbox-service images build [--profile NAME]... [--force] | images ls | images build-service [--tag REF]... [--force]")
	}
	sub, args := args[0], args[1:]
	if sub == "build-service" {
		return buildServiceImageCmd(ctx, args)
	}
	fs := flag.NewFlagSet("sandbox-service images "+sub, flag.ContinueOnError)
	var profiles stringList
	fs.Var(&profiles, "profile", "image recipe to build (repeatable; default: all)")
	force := fs.Bool("force", false, "rebuild even when the image is present")
	workDir := fs.String("work-dir", filepath.Join(os.TempDir(), "genesis-imagebuild"), "scratch directory for builds")
	dockerHost := fs.String("docker-host", "", "Docker daemon socket")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := newLogger("info")
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
	switch sub {
	case "ls":
		for _, r := range recipes {
			present, err := drv.ImagePresent(ctx, r.Ref())
			if err != nil {
				return err
			}
			status := "not built"
			if present {
				status = "present"
			}
			fmt.Printf("%-22s %-40s %s\n", r.Name, r.Ref(), status)
		}
		return nil
	case "build":
	default:
		return fmt.Errorf("unknown images subcommand %q (build, ls, build-service)", sub)
	}
	if len(profiles) == 0 {
		for _, r := range recipes {
			profiles = append(profiles, r.Name)
		}
	}
	b, err := imagebuild.New(imagebuild.Config{Importer: drv, WorkDir: *workDir, Logger: log})
	if err != nil {
		return err
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
