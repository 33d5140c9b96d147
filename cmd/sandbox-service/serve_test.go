package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadOrMakeKey: a missing key file is made with a random key that
// only its owner may read, and read back unchanged; a file without a key
// is refused rather than replaced.
func TestLoadOrMakeKey(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "sub", "admin_key")
	k1, err := loadOrMakeKey(p, "gsk_admin_")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(k1, "gsk_admin_") || len(k1) != len("gsk_admin_")+48 {
		t.Errorf("key %q, want gsk_admin_ and 48 hex digits", k1)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
	}
	k2, err := loadOrMakeKey(p, "gsk_admin_")
	if err != nil || k2 != k1 {
		t.Errorf("second load: %q, %v; want the same key %q", k2, err, k1)
	}
	other, err := loadOrMakeKey(filepath.Join(t.TempDir(), "admin_key"), "gsk_admin_")
	if err != nil || other == k1 {
		t.Errorf("a second file's key %q (%v) equals the first", other, err)
	}
	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte("tiny\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadOrMakeKey(short, "gsk_"); err == nil {
		t.Error("a file holding a short key was accepted")
	}
	if b, _ := os.ReadFile(short); string(b) != "tiny\n" {
		t.Errorf("the short key file was rewritten: %q", b)
	}
}

// TestBanner: the start-up banner shows the service and console URLs,
// where the API key is kept and how to have and use an admin key.
func TestBanner(t *testing.T) {
	t.Parallel()
	made := banner(bannerInfo{url: "http://127.0.0.1:8080", console: true, apiKey: "gsk_x", generated: true,
		apiKeyFile: "/d/api_key", admin: true, adminKeyFile: "/d/admin_key"})
	for _, want := range []string{
		"serves on http://127.0.0.1:8080",
		"console:   http://127.0.0.1:8080/console/",
		"gsk_x (kept in /d/api_key)",
		"admin key: kept in /d/admin_key",
		"GENESIS_API_KEY=$(cat /d/admin_key) genesis tenant ls",
		"export GENESIS_URL=http://127.0.0.1:8080 GENESIS_API_KEY=gsk_x",
	} {
		if !strings.Contains(made, want) {
			t.Errorf("banner lacks %q:\n%s", want, made)
		}
	}
	given := banner(bannerInfo{url: "http://127.0.0.1:8080", apiKey: "secret-key-given-0123", apiKeyFile: "/d/api_key"})
	for _, want := range []string{"--api-key or GENESIS_API_KEY", "admin key: none; start with --admin-key-file"} {
		if !strings.Contains(given, want) {
			t.Errorf("banner lacks %q:\n%s", want, given)
		}
	}
	if strings.Contains(given, "secret-key-given-0123") || strings.Contains(given, "console:") {
		t.Errorf("banner shows a given key or a disabled console:\n%s", given)
	}
}
