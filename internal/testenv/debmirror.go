package testenv

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// debBase are packages every Debian root filesystem has, whatever the
// release: a package cache without them holds no base system.
var debBase = []string{"apt", "base-files", "base-passwd", "bash", "coreutils", "dash", "dpkg", "libc6", "tar"}

// DebMirror is a Debian repository made of the .deb files of a package
// cache, served over HTTP on a loopback port. It is unsigned: a build
// trusts it (imagebuild's MirrorTrusted).
type DebMirror struct {
	// URL is the archive URI for debootstrap and apt, with a trailing '/'.
	URL string

	mu       sync.Mutex
	requests map[string]int // path (without the leading '/') → requests
}

// Requests returns how many requests for path (relative to URL, e.g.
// "dists/bookworm/Release") the mirror answered, found or not.
func (m *DebMirror) Requests(path string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests[path]
}

// ServeDebMirror makes a repository of suite from the image builder's
// package cache of that suite: every package in baseDir (debootstrap's
// cache, the base system), and the packages of need with everything they
// depend on from baseDir and otherDirs (apt's cache), the newest version
// of each. It serves it until t ends, so a build reaches no other machine.
// It fails t, naming what is missing and how to fill the cache, when the
// files cannot make a base system or install need.
func ServeDebMirror(t testing.TB, suite, baseDir string, otherDirs []string, need []string) *DebMirror {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	files := map[string]string{} // package name → path of its newest file
	var base []string
	for i, dir := range append([]string{baseDir}, otherDirs...) {
		paths, _ := filepath.Glob(filepath.Join(dir, "*.deb"))
		for _, p := range paths {
			name, version, ok := debFileName(filepath.Base(p))
			if !ok {
				continue
			}
			if i == 0 && !slices.Contains(base, name) {
				base = append(base, name)
			}
			if old, ok := files[name]; ok {
				_, oldVersion, _ := debFileName(filepath.Base(old))
				if !debNewer(ctx, t, version, oldVersion) {
					continue
				}
			}
			files[name] = p
		}
	}
	r := &debResolver{ctx: ctx, t: t, files: files, controls: map[string]debControl{}, provides: map[string][]string{}}
	for _, name := range base {
		r.load(name) // their Provides (awk, say) resolve dependencies
	}
	roots := slices.Concat(base, debBase, need)
	index, missing := r.closure(roots)
	if len(missing) > 0 {
		t.Fatalf("the package cache of %s (%s and %v) lacks %s; run `make test-images` to fill it "+
			"(when the images are already built, a forced build refills it: `sudo bin/sandbox-service images build --profile tool-basic --force`)",
			suite, baseDir, otherDirs, strings.Join(missing, ", "))
	}

	arch := strings.TrimSpace(run(ctx, t, "dpkg", "--print-architecture"))
	pool := map[string]string{} // pool/<name>_<hash>.deb → path
	var packages bytes.Buffer
	for _, name := range index {
		p := files[name]
		sum, size := fileSHA256(t, p)
		// Not the cache's file name, whose epoch is written %3a: apt and
		// debootstrap name what they fetch after the package, not this.
		file := "pool/" + name + "_" + sum[:16] + ".deb"
		pool[file] = p
		fmt.Fprintf(&packages, "%s\nFilename: %s\nSize: %d\nSHA256: %s\n\n", r.controls[name].text, file, size, sum)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(packages.Bytes())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	dists := "dists/" + suite + "/"
	indexDir := "main/binary-" + arch + "/"
	var release bytes.Buffer
	fmt.Fprintf(&release, "Origin: genesis-test\nLabel: genesis-test\nSuite: %s\nCodename: %s\nDate: %s\nArchitectures: %s\nComponents: main\n"+
		"Description: packages of the image builder's cache, for tests\nSHA256:\n",
		suite, suite, time.Now().UTC().Format(http.TimeFormat), arch)
	meta := map[string][]byte{
		dists + indexDir + "Packages":    packages.Bytes(),
		dists + indexDir + "Packages.gz": gz.Bytes(),
	}
	for _, f := range []string{"Packages", "Packages.gz"} {
		sum := sha256.Sum256(meta[dists+indexDir+f])
		fmt.Fprintf(&release, " %x %d %s%s\n", sum, len(meta[dists+indexDir+f]), indexDir, f)
	}
	meta[dists+"Release"] = release.Bytes()

	m := &DebMirror{requests: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		path := strings.TrimPrefix(req.URL.Path, "/")
		m.mu.Lock()
		m.requests[path]++
		m.mu.Unlock()
		if data, ok := meta[path]; ok {
			http.ServeContent(w, req, path, time.Time{}, bytes.NewReader(data))
			return
		}
		if p, ok := pool[path]; ok {
			http.ServeFile(w, req, p)
			return
		}
		http.NotFound(w, req)
	}))
	t.Cleanup(srv.Close)
	m.URL = srv.URL + "/"
	t.Logf("Debian mirror of %d packages from the %s package cache at %s", len(index), suite, m.URL)
	return m
}

// debFileName splits a package file name, name_version_arch.deb with ':'
// written %3a, as apt and debootstrap store them.
func debFileName(file string) (name, version string, ok bool) {
	parts := strings.Split(strings.TrimSuffix(file, ".deb"), "_")
	if len(parts) != 3 || !strings.HasSuffix(file, ".deb") {
		return "", "", false
	}
	version, err := url.PathUnescape(parts[1])
	return parts[0], version, err == nil
}

// debNewer reports whether Debian version a is newer than b.
func debNewer(ctx context.Context, t testing.TB, a, b string) bool {
	t.Helper()
	err := exec.CommandContext(ctx, "dpkg", "--compare-versions", a, "gt", b).Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("dpkg --compare-versions: %v", err)
	}
	return err == nil
}

func run(ctx context.Context, t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(out)
}

func fileSHA256(t testing.TB, path string) (string, int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil)), n
}

// debControl is what the resolver needs of a package's control file.
type debControl struct {
	text      string // the whole control file, without the trailing newline
	depends   string // Pre-Depends and Depends
	providesV []string
}

// debResolver finds the packages a set of packages needs among files.
type debResolver struct {
	ctx       context.Context
	t         testing.TB
	files     map[string]string
	controls  map[string]debControl
	provides  map[string][]string // virtual package → the loaded packages providing it
	allLoaded bool
}

// load reads the control file of package name.
func (r *debResolver) load(name string) debControl {
	if c, ok := r.controls[name]; ok {
		return c
	}
	text := strings.TrimRight(run(r.ctx, r.t, "dpkg-deb", "--field", r.files[name]), "\n")
	c := debControl{text: text}
	for _, line := range strings.Split(text, "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "Pre-Depends", "Depends":
			c.depends += "," + v
		case "Provides":
			for _, p := range strings.Split(v, ",") {
				c.providesV = append(c.providesV, depName(p))
			}
		}
	}
	r.controls[name] = c
	for _, p := range c.providesV {
		r.provides[p] = append(r.provides[p], name)
	}
	return c
}

// depName is the package name of one alternative of a dependency, without
// its version constraint and architecture qualifier.
func depName(alt string) string {
	name, _, _ := strings.Cut(strings.TrimSpace(alt), " ")
	name, _, _ = strings.Cut(name, "(")
	name, _, _ = strings.Cut(name, ":")
	return strings.TrimSpace(name)
}

// satisfy returns the packages that satisfy one dependency (alternatives
// separated by '|'): the first alternative there is a file of, else the
// providers of the first virtual one. Provides are read from every file
// only when a dependency needs them.
func (r *debResolver) satisfy(dep string) []string {
	alts := strings.Split(dep, "|")
	for _, a := range alts {
		if _, ok := r.files[depName(a)]; ok {
			return []string{depName(a)}
		}
	}
	for {
		for _, a := range alts {
			if p := r.provides[depName(a)]; len(p) > 0 {
				return p[:1]
			}
		}
		if r.allLoaded {
			return nil
		}
		names := slices.Sorted(maps.Keys(r.files))
		for _, name := range names {
			r.load(name)
		}
		r.allLoaded = true
	}
}

// closure returns roots and every package they need, sorted, and what is
// missing ("name (needed by other)").
func (r *debResolver) closure(roots []string) (index, missing []string) {
	in := map[string]bool{}
	type item struct{ name, by string }
	var queue []item
	for _, n := range roots {
		queue = append(queue, item{n, ""})
	}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		if in[it.name] {
			continue
		}
		if _, ok := r.files[it.name]; !ok {
			if p := r.satisfy(it.name); len(p) > 0 { // a virtual root
				queue = append(queue, item{p[0], it.by})
				continue
			}
			m := it.name
			if it.by != "" {
				m += " (needed by " + it.by + ")"
			}
			if !slices.Contains(missing, m) {
				missing = append(missing, m)
			}
			continue
		}
		in[it.name] = true
		index = append(index, it.name)
		for _, dep := range strings.Split(r.load(it.name).depends, ",") {
			if strings.TrimSpace(dep) == "" {
				continue
			}
			p := r.satisfy(dep)
			if len(p) == 0 {
				m := strings.TrimSpace(dep) + " (needed by " + it.name + ")"
				if !slices.Contains(missing, m) {
					missing = append(missing, m)
				}
				continue
			}
			for _, n := range p {
				queue = append(queue, item{n, it.name})
			}
		}
	}
	slices.Sort(index)
	return index, missing
}
