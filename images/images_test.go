package images

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

const baseRecipe = `{
  "description": "test",
  "suite": "bookworm",
  "variant": "minbase",
  "packages": ["python3", "python3-yaml"],
  "setup": ["common/setup.sh"],
  "env": ["PATH=/usr/bin:/bin", "LANG=C.UTF-8"],
  "workdir": "/workspace"
}`

func testFS(recipe, script string) fstest.MapFS {
	return fstest.MapFS{
		"p/recipe.json":   {Data: []byte(recipe)},
		"common/setup.sh": {Data: []byte(script)},
	}
}

func mustParse(t *testing.T, fsys fstest.MapFS) Recipe {
	t.Helper()
	r, err := load(fsys, "p")
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return r
}

func TestEmbeddedRecipes(t *testing.T) {
	t.Parallel()
	rs, err := Recipes()
	if err != nil {
		t.Fatalf("Recipes: %v", err)
	}
	var names []string
	for _, r := range rs {
		names = append(names, r.Name)
		// tool-node and browser-playwright need Node.js 20 (MCP servers'
		// engines, playwright-core), which is trixie's; bookworm has 18.
		wantSuite := map[string]string{"tool-node": "trixie", "browser-playwright": "trixie"}[r.Name]
		if wantSuite == "" {
			wantSuite = "bookworm"
		}
		if r.Suite != wantSuite || r.Variant != "minbase" {
			t.Errorf("%s: suite/variant = %s/%s, want %s/minbase", r.Name, r.Suite, r.Variant, wantSuite)
		}
		if len(r.Setup) == 0 || r.Setup[0].Path != "common/setup.sh" || r.Setup[0].Content == "" {
			t.Errorf("%s: setup = %+v, want common/setup.sh first", r.Name, r.Setup)
		}
		if !slices.Contains(r.Env, "LANG=C.UTF-8") {
			t.Errorf("%s: env %v lacks LANG=C.UTF-8", r.Name, r.Env)
		}
		if r.WorkDir != "/workspace" {
			t.Errorf("%s: workdir = %q", r.Name, r.WorkDir)
		}
		got, ok := Lookup(r.Name)
		if !ok {
			t.Errorf("Lookup(%q) failed", r.Name)
		} else if got.Hash != r.Hash || got.Ref() != r.Ref() {
			t.Errorf("Lookup(%q) = %s, Recipes has %s", r.Name, got.Ref(), r.Ref())
		}
	}
	want := []string{"browser-playwright", "code-python-basic", "code-python-data", "desktop-browser", "desktop-cloud", "desktop-vnc", "skill-python-basic", "tool-basic", "tool-node"}
	if !slices.Equal(names, want) {
		t.Fatalf("recipes = %v, want %v", names, want)
	}
	// Every profile has its own hash.
	seen := map[string]string{}
	for _, r := range rs {
		if other, dup := seen[r.Hash]; dup {
			t.Errorf("%s and %s share hash %s", r.Name, other, r.Hash)
		}
		seen[r.Hash] = r.Name
	}
}

// TestServiceRecipe: the service's own image is found by Lookup, is no
// profile, and carries what building images and quotas need inside it.
func TestServiceRecipe(t *testing.T) {
	t.Parallel()
	r, ok := Lookup(ServiceRecipe)
	if !ok {
		t.Fatal("Lookup(service) failed")
	}
	rs, err := Recipes()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rs {
		if p.Name == ServiceRecipe || p.Hash == r.Hash {
			t.Errorf("Recipes() lists the service image as profile %s", p.Name)
		}
	}
	for _, pkg := range []string{"debootstrap", "e2fsprogs", "tini"} {
		if !slices.Contains(r.Packages, pkg) {
			t.Errorf("service image lacks %s: %v", pkg, r.Packages)
		}
	}
}

func TestRefFormat(t *testing.T) {
	t.Parallel()
	r, ok := Lookup("tool-basic")
	if !ok {
		t.Fatal("Lookup(tool-basic) failed")
	}
	re := regexp.MustCompile(`^genesis/tool-basic:[0-9a-f]{12}$`)
	if !re.MatchString(r.Ref()) {
		t.Fatalf("Ref() = %q, want genesis/tool-basic:<12 hex>", r.Ref())
	}
	if !strings.HasSuffix(r.Ref(), ":"+r.Hash) {
		t.Fatalf("Ref() = %q does not end with the hash %q", r.Ref(), r.Hash)
	}
	if got := (Recipe{Name: "x", Hash: "0123456789ab"}).Ref(); got != "genesis/x:0123456789ab" {
		t.Fatalf("Ref() = %q", got)
	}
	if got := (Recipe{Name: "x", Hash: "0123456789ab"}).RefIn("genesis-try/"); got != "genesis-try/x:0123456789ab" {
		t.Fatalf("RefIn() = %q", got)
	}
	for prefix, want := range map[string]bool{
		RefRepositoryPrefix: true, "genesis-try/": true, "registry.example/team_a/": true,
		"": false, "genesis": false, "Genesis/": false, "/genesis/": false, "a//b/": false, "host:5000/": false, "a b/": false,
	} {
		if got := ValidRepository(prefix); got != want {
			t.Errorf("ValidRepository(%q) = %v, want %v", prefix, got, want)
		}
	}
}

func TestLookupUnknown(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "no-such-profile", "common", "../images", "Tool-Basic", "tool-basic/recipe.json"} {
		if r, ok := Lookup(name); ok {
			t.Errorf("Lookup(%q) = %+v, want not found", name, r)
		}
	}
}

func TestHashStable(t *testing.T) {
	t.Parallel()
	a := mustParse(t, testFS(baseRecipe, "echo hi\n"))
	b := mustParse(t, testFS(baseRecipe, "echo hi\n"))
	if a.Hash != b.Hash {
		t.Fatalf("same recipe hashed twice: %s vs %s", a.Hash, b.Hash)
	}
	if len(a.Hash) != 12 {
		t.Fatalf("hash %q is not 12 characters", a.Hash)
	}
	// Formatting, description and package order do not change the image.
	same := map[string]string{
		"reformatted":   strings.ReplaceAll(baseRecipe, "\n", " "),
		"description":   strings.Replace(baseRecipe, `"test"`, `"other words"`, 1),
		"package order": strings.Replace(baseRecipe, `["python3", "python3-yaml"]`, `["python3-yaml", "python3"]`, 1),
	}
	for what, recipe := range same {
		if got := mustParse(t, testFS(recipe, "echo hi\n")).Hash; got != a.Hash {
			t.Errorf("%s changed the hash: %s -> %s", what, a.Hash, got)
		}
	}
	// A pinned value: if it changes, every image is rebuilt. Update it only
	// together with a deliberate BuildFormat bump or hash encoding change.
	const pinned, pinnedFormat = "31af8e314b67", 2
	if a.Hash != pinned || BuildFormat != pinnedFormat {
		t.Errorf("hash of the fixed test recipe = %s with BuildFormat %d, pinned %s with %d: update the pin only with a deliberate format change",
			a.Hash, BuildFormat, pinned, pinnedFormat)
	}
}

func TestHashChangesWithRecipe(t *testing.T) {
	t.Parallel()
	base := mustParse(t, testFS(baseRecipe, "echo hi\n")).Hash
	changed := map[string]fstest.MapFS{
		"package added":   testFS(strings.Replace(baseRecipe, `"python3-yaml"]`, `"python3-yaml", "curl"]`, 1), "echo hi\n"),
		"package removed": testFS(strings.Replace(baseRecipe, `, "python3-yaml"`, ``, 1), "echo hi\n"),
		"suite":           testFS(strings.Replace(baseRecipe, "bookworm", "trixie", 1), "echo hi\n"),
		"env":             testFS(strings.Replace(baseRecipe, "C.UTF-8", "en_US.UTF-8", 1), "echo hi\n"),
		"workdir":         testFS(strings.Replace(baseRecipe, `"/workspace"`, `"/work"`, 1), "echo hi\n"),
		"setup script":    testFS(baseRecipe, "echo hello\n"),
	}
	seen := map[string]string{base: "base"}
	for what, fsys := range changed {
		got := mustParse(t, fsys).Hash
		if prev, dup := seen[got]; dup {
			t.Errorf("%s: hash %s equals that of %s", what, got, prev)
		}
		seen[got] = what
	}
	// The profile name is part of the hash too.
	fsys := testFS(baseRecipe, "echo hi\n")
	fsys["q/recipe.json"] = fsys["p/recipe.json"]
	q, err := load(fsys, "q")
	if err != nil {
		t.Fatal(err)
	}
	if q.Hash == base {
		t.Errorf("renamed profile kept hash %s", base)
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"unknown field":   strings.Replace(baseRecipe, `"suite"`, `"extra": 1, "suite"`, 1),
		"bad variant":     strings.Replace(baseRecipe, "minbase", "buildd", 1),
		"bad suite":       strings.Replace(baseRecipe, `"bookworm"`, `"Bookworm;rm"`, 1),
		"package inject":  strings.Replace(baseRecipe, `"python3-yaml"`, `"a,--foreign"`, 1),
		"package spaces":  strings.Replace(baseRecipe, `"python3-yaml"`, `"python3 yaml"`, 1),
		"no setup":        strings.Replace(baseRecipe, `["common/setup.sh"]`, `[]`, 1),
		"missing setup":   strings.Replace(baseRecipe, `common/setup.sh`, `common/none.sh`, 1),
		"escaping setup":  strings.Replace(baseRecipe, `common/setup.sh`, `../setup.sh`, 1),
		"env without =":   strings.Replace(baseRecipe, `"LANG=C.UTF-8"`, `"LANG"`, 1),
		"env duplicate":   strings.Replace(baseRecipe, `"LANG=C.UTF-8"`, `"PATH=/bin"`, 1),
		"env newline":     strings.Replace(baseRecipe, `"LANG=C.UTF-8"`, `"LANG=C\nWORKDIR /"`, 1),
		"relative wd":     strings.Replace(baseRecipe, `"/workspace"`, `"workspace"`, 1),
		"trailing object": baseRecipe + `{}`,
		"not json":        "suite: bookworm",
	}
	for name, recipe := range cases {
		if _, err := load(testFS(recipe, "echo hi\n"), "p"); err == nil {
			t.Errorf("%s: load succeeded, want error", name)
		}
	}
	if _, err := load(testFS(baseRecipe, ""), "Bad_Name"); err == nil {
		t.Error("invalid profile name accepted")
	}
}

func TestChanges(t *testing.T) {
	t.Parallel()
	r := mustParse(t, testFS(baseRecipe, "echo hi\n"))
	want := []string{"ENV PATH=/usr/bin:/bin", "ENV LANG=C.UTF-8", "WORKDIR /workspace"}
	if got := r.Changes(); !slices.Equal(got, want) {
		t.Fatalf("Changes() = %q, want %q", got, want)
	}
}
