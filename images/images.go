package images

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// BuildFormat is the version of the way the builder turns a recipe into an
// image. It is part of every recipe hash: bump it whenever the builder changes
// what it produces from the same recipe, so every image gets a new tag.
const BuildFormat = 2

// RefRepositoryPrefix is the repository prefix of every profile image reference.
const RefRepositoryPrefix = "genesis/"

// recipeFile is the file name of a recipe inside its profile directory.
const recipeFile = "recipe.json"

// ServiceRecipe is the recipe of the service's own container image, the
// base that `sandbox-service images build-service` adds the binaries to.
// It is not a profile image: Recipes leaves it out, Lookup finds it.
const ServiceRecipe = "service"

//go:embed */recipe.json common/*.sh service/*.sh tool-node/*.sh browser-playwright/*.sh desktop-vnc/*.sh desktop-cloud/*.sh desktop-browser/*.sh */files/*
var files embed.FS

// Script is a shell script run inside the image root filesystem during the
// build, as root, with /bin/sh -eu.
type Script struct {
	// Path is the script's path relative to the images directory,
	// e.g. "common/setup.sh".
	Path string
	// Content is the script text.
	Content string
}

// File is a file of the images directory placed in an image.
type File struct {
	// Dest is the absolute path in the image.
	Dest string
	// Path is the file's path relative to the images directory.
	Path string
	// Content is the file's bytes.
	Content string
}

// Recipe describes how to build one profile image.
type Recipe struct {
	// Name is the profile name, which is also the recipe's directory name.
	Name string
	// Description says in one line what the image is for.
	Description string
	// Suite is the Debian suite to bootstrap, e.g. "bookworm".
	Suite string
	// Variant is the debootstrap variant, e.g. "minbase".
	Variant string
	// Packages are installed in addition to the variant's base set.
	Packages []string
	// Setup are the scripts run inside the root filesystem, in order.
	Setup []Script
	// Files are placed in the root filesystem before the setup scripts
	// run (a lockfile the setup installs from, say), in order of Dest.
	Files []File
	// Env are the image's environment variables, KEY=VALUE.
	Env []string
	// WorkDir is the image's working directory.
	WorkDir string
	// Hash is the first 12 hex characters of a SHA-256 over everything that
	// determines the image: name, suite, variant, packages, setup scripts,
	// environment, working directory and BuildFormat.
	Hash string
}

// Ref returns the local image reference of the recipe, genesis/<name>:<hash>.
func (r Recipe) Ref() string { return r.RefIn(RefRepositoryPrefix) }

// RefIn returns the reference of the recipe's image under another
// repository prefix (see ValidRepository): <prefix><name>:<hash>.
func (r Recipe) RefIn(prefix string) string { return prefix + r.Name + ":" + r.Hash }

// ValidRepository reports whether prefix can stand before a profile name
// in an image reference, as RefRepositoryPrefix does: lower-case letters,
// digits, '-', '_', '.' and '/', not starting with '/', without "//",
// ending in '/', at most 128 bytes.
func ValidRepository(prefix string) bool {
	return strings.HasSuffix(prefix, "/") && len(prefix) <= 128 && !strings.HasPrefix(prefix, "/") &&
		!strings.Contains(prefix, "//") && onlyRunes(prefix, "abcdefghijklmnopqrstuvwxyz0123456789-_./")
}

// Changes returns the image configuration as Dockerfile instructions for
// an image import (docker import --change): one ENV per variable, then WORKDIR.
func (r Recipe) Changes() []string {
	out := make([]string, 0, len(r.Env)+1)
	for _, kv := range r.Env {
		out = append(out, "ENV "+kv)
	}
	if r.WorkDir != "" {
		out = append(out, "WORKDIR "+r.WorkDir)
	}
	return out
}

// Recipes returns every embedded profile recipe (not ServiceRecipe),
// sorted by name. An error means an embedded recipe is malformed.
func Recipes() ([]Recipe, error) {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return nil, fmt.Errorf("images: list recipes: %w", err)
	}
	var out []Recipe
	for _, e := range entries {
		if !e.IsDir() || e.Name() == ServiceRecipe {
			continue
		}
		if _, err := fs.Stat(files, path.Join(e.Name(), recipeFile)); err != nil {
			continue // a directory of shared scripts, not a profile
		}
		r, err := load(files, e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Recipe) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Lookup returns the recipe of the named profile. It reports false when no
// such recipe exists or it is malformed (Recipes reports the error).
func Lookup(name string) (Recipe, bool) {
	if !validName(name) {
		return Recipe{}, false
	}
	r, err := load(files, name)
	if err != nil {
		return Recipe{}, false
	}
	return r, true
}

// supportedVariants are the debootstrap variants the builder supports.
func supportedVariants() []string { return []string{"minbase"} }

// validName reports whether s is a profile name: lower-case letters, digits
// and dashes, starting with a letter or digit, at most 63 characters (it is
// used as a Docker repository name).
func validName(s string) bool {
	return len(s) > 0 && len(s) <= 63 && s[0] != '-' && onlyRunes(s, "abcdefghijklmnopqrstuvwxyz0123456789-")
}

// validSuite reports whether s looks like a Debian suite or codename.
func validSuite(s string) bool {
	return len(s) > 0 && s[0] >= 'a' && s[0] <= 'z' && onlyRunes(s, "abcdefghijklmnopqrstuvwxyz0123456789-")
}

// validPackage reports whether s is a Debian package name (Debian Policy 5.6.1).
func validPackage(s string) bool {
	return len(s) >= 2 && s[0] != '+' && s[0] != '-' && s[0] != '.' &&
		onlyRunes(s, "abcdefghijklmnopqrstuvwxyz0123456789+-.")
}

// validEnvKey reports whether s is a portable environment variable name.
func validEnvKey(s string) bool {
	return len(s) > 0 && (s[0] < '0' || s[0] > '9') &&
		onlyRunes(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
}

func onlyRunes(s, allowed string) bool {
	for _, c := range s {
		if !strings.ContainsRune(allowed, c) {
			return false
		}
	}
	return true
}

// recipeJSON is the on-disk form of a recipe.
type recipeJSON struct {
	Description string   `json:"description"`
	Suite       string   `json:"suite"`
	Variant     string   `json:"variant"`
	Packages    []string `json:"packages"`
	Setup       []string `json:"setup"`
	// Files maps an absolute path in the image to a file of the images
	// directory.
	Files   map[string]string `json:"files"`
	Env     []string          `json:"env"`
	WorkDir string            `json:"workdir"`
}

// load reads, validates and hashes the recipe in directory name of fsys.
func load(fsys fs.FS, name string) (Recipe, error) {
	raw, err := fs.ReadFile(fsys, path.Join(name, recipeFile))
	if err != nil {
		return Recipe{}, fmt.Errorf("images: recipe %q: %w", name, err)
	}
	return parse(fsys, name, raw)
}

// parse decodes and validates one recipe; scripts are read from fsys.
func parse(fsys fs.FS, name string, raw []byte) (Recipe, error) {
	fail := func(format string, args ...any) (Recipe, error) {
		return Recipe{}, fmt.Errorf("images: recipe %q: "+format, append([]any{name}, args...)...)
	}
	if !validName(name) {
		return fail("invalid profile name")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var rj recipeJSON
	if err := dec.Decode(&rj); err != nil {
		return fail("decode: %v", err)
	}
	if dec.More() {
		return fail("trailing data after the recipe object")
	}
	if !validSuite(rj.Suite) {
		return fail("invalid suite %q", rj.Suite)
	}
	if !slices.Contains(supportedVariants(), rj.Variant) {
		return fail("unsupported variant %q (supported: %v)", rj.Variant, supportedVariants())
	}
	for _, p := range rj.Packages {
		if !validPackage(p) {
			return fail("invalid package name %q", p)
		}
	}
	if len(rj.Setup) == 0 {
		return fail("no setup scripts (every image needs common/setup.sh)")
	}
	r := Recipe{
		Name:        name,
		Description: rj.Description,
		Suite:       rj.Suite,
		Variant:     rj.Variant,
		Packages:    slices.Clone(rj.Packages),
		Env:         slices.Clone(rj.Env),
		WorkDir:     rj.WorkDir,
	}
	for _, p := range rj.Setup {
		if !fs.ValidPath(p) || strings.HasSuffix(p, "/") {
			return fail("invalid setup script path %q", p)
		}
		body, err := fs.ReadFile(fsys, p)
		if err != nil {
			return fail("setup script: %v", err)
		}
		r.Setup = append(r.Setup, Script{Path: p, Content: string(body)})
	}
	for dest, p := range rj.Files {
		if !path.IsAbs(dest) || path.Clean(dest) != dest || dest == "/" || strings.HasPrefix(dest, "/proc/") || strings.HasPrefix(dest, "/dev/") {
			return fail("file destination %q must be a clean absolute path outside /proc and /dev", dest)
		}
		if !fs.ValidPath(p) {
			return fail("invalid file path %q", p)
		}
		body, err := fs.ReadFile(fsys, p)
		if err != nil {
			return fail("file: %v", err)
		}
		r.Files = append(r.Files, File{Dest: dest, Path: p, Content: string(body)})
	}
	slices.SortFunc(r.Files, func(a, b File) int { return strings.Compare(a.Dest, b.Dest) })
	seen := map[string]bool{}
	for _, kv := range rj.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !validEnvKey(k) || strings.ContainsAny(v, "\n\r") {
			return fail("invalid env entry %q (want KEY=VALUE)", kv)
		}
		if seen[k] {
			return fail("env %s set twice", k)
		}
		seen[k] = true
	}
	if rj.WorkDir != "" && (!path.IsAbs(rj.WorkDir) || path.Clean(rj.WorkDir) != rj.WorkDir || strings.ContainsAny(rj.WorkDir, " \t\n")) {
		return fail("workdir %q must be a clean absolute path without spaces", rj.WorkDir)
	}
	r.Hash = hash(r)
	return r, nil
}

// hash computes the recipe hash over an unambiguous, length-prefixed encoding
// of every field that determines the image (not Description) plus BuildFormat.
// Package order does not matter to the build, so packages are hashed sorted.
func hash(r Recipe) string {
	h := sha256.New()
	field := func(key, value string) { fmt.Fprintf(h, "%s %d:%s\n", key, len(value), value) }
	field("format", strconv.Itoa(BuildFormat))
	field("name", r.Name)
	field("suite", r.Suite)
	field("variant", r.Variant)
	pkgs := slices.Clone(r.Packages)
	slices.Sort(pkgs)
	for _, p := range pkgs {
		field("package", p)
	}
	for _, s := range r.Setup {
		field("setup-path", s.Path)
		field("setup-content", s.Content)
	}
	for _, f := range r.Files { // none in most recipes: their hashes stay as they were
		field("file-dest", f.Dest)
		field("file-path", f.Path)
		field("file-content", f.Content)
	}
	for _, kv := range r.Env {
		field("env", kv)
	}
	field("workdir", r.WorkDir)
	return hex.EncodeToString(h.Sum(nil))[:12]
}
