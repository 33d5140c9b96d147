package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDesktopConfig(t *testing.T) {
	t.Parallel()
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	p, ok := c.Profile("desktop-vnc")
	if !ok || p.Desktop == nil || p.Desktop.XPort() != 6001 || p.Desktop.VNCPort() != 5901 || p.Ports.Allows(5901) || p.Ports.Allows(6001) || !p.Ports.Allows(8000) {
		t.Fatalf("default desktop-vnc profile: desktop %+v, ports %+v", p.Desktop, p.Ports)
	}
	dir := t.TempDir()
	const good = `display: 1, width: 1280, height: 800, action_timeout: 1s, max_actions: 3`
	const closed = `, ports: {allow: ['1024-5899', '6064-65535']}`
	prof := func(desktop, ports string) string {
		return "profiles:\n  - {name: d, recipe: r, allowed_runtimes: [runsc], resources: {cpu: 1, memory_mb: 64, pids: 64}, network: none" +
			ports + ", desktop: {" + desktop + "}}\n"
	}
	for in, key := range map[string]string{
		prof(good, ""):                           "profiles.d.desktop.display", // the default range holds 5901 and 6001
		prof(good, ", ports: {allow: ['6001']}"): "profiles.d.desktop.display",
		prof(strings.Replace(good, "display: 1", "display: 99", 1), closed):                "profiles.d.desktop.display",
		prof(strings.Replace(good, "width: 1280", "width: 10", 1), closed):                 "profiles.d.desktop.width",
		prof(strings.Replace(good, "action_timeout: 1s", "action_timeout: 0s", 1), closed): "profiles.d.desktop.action_timeout",
		prof(strings.Replace(good, "max_actions: 3", "max_actions: 0", 1), closed):         "profiles.d.desktop.max_actions",
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
	if err := os.WriteFile(f, []byte(prof(good, closed)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(f); err != nil {
		t.Errorf("a valid desktop profile: %v", err)
	}
}
