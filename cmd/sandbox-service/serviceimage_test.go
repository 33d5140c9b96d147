package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"genesis.dev/sandbox/images"
)

// dockerfileFinalStage returns the instructions of the Dockerfile's last
// stage, continuation lines joined, comments dropped.
func dockerfileFinalStage(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	cur := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cur += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		all = append(all, cur+line)
		cur = ""
	}
	last := 0
	for i, in := range all {
		if strings.HasPrefix(in, "FROM ") {
			last = i
		}
	}
	return all[last:]
}

// instruction returns the arguments of the one instruction named kw.
func instruction(t *testing.T, stage []string, kw string) string {
	t.Helper()
	var found []string
	for _, in := range stage {
		if rest, ok := strings.CutPrefix(in, kw+" "); ok {
			found = append(found, strings.TrimSpace(rest))
		}
	}
	if len(found) != 1 {
		t.Fatalf("final stage has %d %s instructions, want 1: %q", len(found), kw, found)
	}
	return found[0]
}

// TestServiceDockerfile: the Dockerfile Docker Desktop users build makes
// the image `images build-service` makes: the packages of images/service,
// the same binaries in the same place, and the same labels, volume, port,
// entry point and command.
func TestServiceDockerfile(t *testing.T) {
	t.Parallel()
	const path = "../../deploy/service.Dockerfile"
	stage := dockerfileFinalStage(t, path)
	want := serviceImageConfig()

	r, ok := images.Lookup(images.ServiceRecipe)
	if !ok {
		t.Fatal("no service recipe")
	}
	run := instruction(t, stage, "RUN")
	_, after, ok := strings.Cut(run, "apt-get install ")
	if !ok {
		t.Fatalf("no apt-get install in %q", run)
	}
	after, _, _ = strings.Cut(after, "&&")
	var pkgs []string
	for _, w := range strings.Fields(after) {
		if !strings.HasPrefix(w, "-") {
			pkgs = append(pkgs, w)
		}
	}
	slices.Sort(pkgs)
	wantPkgs := slices.Sorted(slices.Values(r.Packages))
	if !slices.Equal(pkgs, wantPkgs) {
		t.Errorf("Dockerfile installs %v, images/service %v", pkgs, wantPkgs)
	}
	for kw, wantList := range map[string][]string{"ENTRYPOINT": want.Entrypoint, "CMD": want.Cmd} {
		var got []string
		if err := json.Unmarshal([]byte(instruction(t, stage, kw)), &got); err != nil {
			t.Fatalf("%s: %v", kw, err)
		}
		if !slices.Equal(got, wantList) {
			t.Errorf("%s = %q, the image's is %q", kw, got, wantList)
		}
	}
	labels := map[string]string{}
	for _, kv := range strings.Fields(instruction(t, stage, "LABEL")) {
		k, v, _ := strings.Cut(kv, "=")
		labels[k] = v
	}
	if !maps.Equal(labels, want.Labels) {
		t.Errorf("LABEL %v, the image's %v", labels, want.Labels)
	}
	if got := strings.Fields(instruction(t, stage, "EXPOSE")); !slices.Equal(got, want.ExposedPorts) {
		t.Errorf("EXPOSE %v, the image's %v", got, want.ExposedPorts)
	}
	if got := strings.Fields(instruction(t, stage, "VOLUME")); !slices.Equal(got, want.Volumes) {
		t.Errorf("VOLUME %v, the image's %v", got, want.Volumes)
	}
	if got := instruction(t, stage, "COPY"); got != "--from=build /out/ /"+serviceBinDir+"/" {
		t.Errorf("COPY %q: the binaries belong in /%s", got, serviceBinDir)
	}
	// The build stage compiles exactly the image's binaries, statically.
	b, _ := os.ReadFile(path)
	text := string(b)
	for _, name := range serviceBinaries {
		if !strings.Contains(text, "./cmd/"+name) {
			t.Errorf("the build stage does not compile %s", name)
		}
	}
	if !strings.Contains(text, "CGO_ENABLED=0 go build") {
		t.Error("the build stage does not build static binaries")
	}
}

// desktopRunWords returns the words of the `docker run` command of
// docs/docker-desktop.md.
func desktopRunWords(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/docker-desktop.md")
	if err != nil {
		t.Fatal(err)
	}
	var cmd string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cmd == "" && !strings.HasPrefix(line, "docker run ") {
			continue
		}
		cmd += " " + strings.TrimSuffix(line, `\`)
		if !strings.HasSuffix(line, `\`) {
			break
		}
	}
	return strings.Fields(cmd)
}

// TestComposeFile: deploy/compose.yaml starts the container the documented
// (and tested) `docker run` command starts.
func TestComposeFile(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../deploy/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Name     string `yaml:"name"`
		Services map[string]struct {
			Image string `yaml:"image"`
			Build struct {
				Context    string `yaml:"context"`
				Dockerfile string `yaml:"dockerfile"`
			} `yaml:"build"`
			ContainerName   string   `yaml:"container_name"`
			CapAdd          []string `yaml:"cap_add"`
			SecurityOpt     []string `yaml:"security_opt"`
			StopGracePeriod string   `yaml:"stop_grace_period"`
			Volumes         []string `yaml:"volumes"`
			Ports           []string `yaml:"ports"`
			Command         []string `yaml:"command"`
			Environment     any      `yaml:"environment"`
		} `yaml:"services"`
		Volumes map[string]struct {
			Name string `yaml:"name"`
		} `yaml:"volumes"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatal(err)
	}
	s, ok := f.Services["genesis"]
	if !ok || len(f.Services) != 1 {
		t.Fatalf("services = %v, want just genesis", slices.Collect(maps.Keys(f.Services)))
	}
	if _, err := os.Stat(filepath.Join("../../deploy", s.Build.Context, s.Build.Dockerfile)); err != nil {
		t.Errorf("build: %v", err)
	}

	words := desktopRunWords(t)
	if len(words) < 3 || words[0] != "docker" || words[1] != "run" {
		t.Fatalf("docs/docker-desktop.md: no docker run command: %q", words)
	}
	var vols, ports, caps, secOpts []string
	flags := map[string]string{}
	for i := 2; i < len(words)-1; i++ {
		switch w := words[i]; w {
		case "-v":
			i++
			vols = append(vols, words[i])
		case "-p":
			i++
			ports = append(ports, words[i])
		case "--cap-add":
			i++
			caps = append(caps, words[i])
		case "--security-opt":
			i++
			secOpts = append(secOpts, words[i])
		case "--name", "--stop-timeout":
			i++
			flags[w] = words[i]
		case "-d":
		default:
			t.Fatalf("docs' docker run has %q, which this test does not compare with the compose file", w)
		}
	}
	image := words[len(words)-1]
	if s.Image != image || s.ContainerName != flags["--name"] {
		t.Errorf("compose image %q name %q; docs: %q %q", s.Image, s.ContainerName, image, flags["--name"])
	}
	if !slices.Equal(s.CapAdd, caps) || !slices.Equal(s.SecurityOpt, secOpts) || !slices.Contains(caps, "SYS_ADMIN") {
		t.Errorf("compose cap_add %q security_opt %q; docs %q %q (image builds need SYS_ADMIN)", s.CapAdd, s.SecurityOpt, caps, secOpts)
	}
	if s.StopGracePeriod != flags["--stop-timeout"]+"s" {
		t.Errorf("compose stop_grace_period %q, docs --stop-timeout %q", s.StopGracePeriod, flags["--stop-timeout"])
	}
	if !slices.Equal(s.Volumes, vols) || !slices.Equal(s.Ports, ports) {
		t.Errorf("compose volumes %q ports %q; docs %q %q", s.Volumes, s.Ports, vols, ports)
	}
	for _, v := range vols {
		src, _, _ := strings.Cut(v, ":")
		if !strings.HasPrefix(src, "/") && f.Volumes[src].Name != src {
			t.Errorf("compose volume %s must keep the docs' name (volumes.%s.name: %s), got %q", src, src, src, f.Volumes[src].Name)
		}
	}
	if s.Command != nil || s.Environment != nil {
		t.Errorf("compose sets a command or environment the docs' command does not")
	}
}

// TestServiceFiles: the image's binaries must be static Linux executables;
// they are placed in /usr/local/bin, and the image's name follows their
// content and the base.
func TestServiceFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	static := filepath.Join(dir, "static")
	build := exec.Command("go", "build", "-o", static, src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GO111MODULE=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	exe, err := os.ReadFile(static)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	write := func(name string, data []byte) {
		t.Helper()
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(bin, name), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range serviceBinaries {
		write(n, exe)
	}
	tarball, sum, err := serviceFiles(bin)
	if err != nil {
		t.Fatalf("serviceFiles: %v", err)
	}
	tr := tar.NewReader(bytes.NewReader(tarball))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Mode != 0o755 || h.Uid != 0 || h.Size != int64(len(exe)) {
			t.Errorf("%s: mode %o uid %d size %d", h.Name, h.Mode, h.Uid, h.Size)
		}
		names = append(names, h.Name)
	}
	if !slices.Equal(names, []string{"usr/local/bin/sandbox-service", "usr/local/bin/genesis-agent", "usr/local/bin/genesis-egress", "usr/local/bin/genesis"}) {
		t.Errorf("tar holds %v", names)
	}
	ref := serviceImageRef("genesis/service:aaaaaaaaaaaa", sum)
	if !strings.HasPrefix(ref, serviceImageRepo+":") || len(ref) != len(serviceImageRepo)+13 {
		t.Errorf("ref %q", ref)
	}
	if other := serviceImageRef("genesis/service:bbbbbbbbbbbb", sum); other == ref {
		t.Error("a new base keeps the image's name")
	}
	write("genesis", append(slices.Clone(exe), 0))
	_, sum2, err := serviceFiles(bin)
	if err != nil {
		t.Fatal(err)
	}
	if serviceImageRef("genesis/service:aaaaaaaaaaaa", sum2) == ref {
		t.Error("a changed binary keeps the image's name")
	}

	// Not an executable, and a dynamically linked one (the host's sh) are
	// refused with the command that builds them right.
	write("genesis", []byte("#!/bin/sh\n"))
	if _, _, err := serviceFiles(bin); err == nil || !strings.Contains(err.Error(), "make service-image") {
		t.Errorf("a script as a binary: %v", err)
	}
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	write("genesis", sh)
	if _, _, err := serviceFiles(bin); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("a dynamic executable: %v", err)
	}
	os.Remove(filepath.Join(bin, "genesis"))
	if _, _, err := serviceFiles(bin); err == nil || !strings.Contains(err.Error(), "genesis") {
		t.Errorf("a missing binary: %v", err)
	}
}

func TestReachableAddr(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"0.0.0.0:8080":   "127.0.0.1:8080",
		"[::]:8080":      "127.0.0.1:8080",
		"127.0.0.1:9000": "127.0.0.1:9000",
		"10.0.0.5:8080":  "10.0.0.5:8080",
	} {
		a, err := net.ResolveTCPAddr("tcp", in)
		if err != nil {
			t.Fatal(err)
		}
		if got := reachableAddr(a); got != want {
			t.Errorf("reachableAddr(%s) = %s, want %s", in, got, want)
		}
	}
}
