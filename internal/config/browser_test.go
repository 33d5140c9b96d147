package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBrowserConfig(t *testing.T) {
	t.Parallel()
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	p, ok := c.Profile("browser-playwright")
	if !ok || p.Browser == nil || p.Browser.CDPPort != 9222 || p.Browser.PlaywrightPort != 9223 || p.Browser.MaxActions < 1 {
		t.Fatalf("default browser-playwright profile browser = %+v", p.Browser)
	}
	if tb, _ := c.Profile("tool-basic"); tb.Browser != nil {
		t.Errorf("tool-basic has a browser: %+v", tb.Browser)
	}
	dir := t.TempDir()
	const ok1 = `cdp_port: 9222, downloads_dir: /workspace/dl, profile_dir: /home/sandbox/p, action_timeout: 1s, max_action_timeout: 2s, max_actions: 3`
	prof := func(browser, ports string) string {
		return "profiles:\n  - {name: b, recipe: r, allowed_runtimes: [runsc], resources: {cpu: 1, memory_mb: 64, pids: 64}, network: none" +
			ports + ", browser: {" + browser + "}}\n"
	}
	for in, key := range map[string]string{
		prof(strings.Replace(ok1, "9222", "0", 1), ""):                                           "profiles.b.browser.cdp_port",
		prof(ok1, ", ports: {allow: ['8000']}"):                                                  "profiles.b.browser.cdp_port",
		prof(ok1+", playwright_port: 70000", ""):                                                 "profiles.b.browser.playwright_port",
		prof(strings.Replace(ok1, "/workspace/dl", "dl", 1), ""):                                 "profiles.b.browser.downloads_dir",
		prof(strings.Replace(ok1, "/home/sandbox/p", "/home/../p", 1), ""):                       "profiles.b.browser.profile_dir",
		prof(strings.Replace(ok1, "max_action_timeout: 2s", "max_action_timeout: 500ms", 1), ""): "profiles.b.browser.action_timeout",
		prof(strings.Replace(ok1, "max_actions: 3", "max_actions: 0", 1), ""):                    "profiles.b.browser.max_actions",
	} {
		f := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(f, []byte(in), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(f); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("Load(%q) = %v; want an error naming %s", in, err, key)
		}
	}
	f := filepath.Join(dir, "ok.yaml")
	if err := os.WriteFile(f, []byte(prof(ok1, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(f); err != nil {
		t.Errorf("a valid browser profile: %v", err)
	}
}
