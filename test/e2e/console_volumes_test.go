package e2e

import (
	"errors"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"genesis.dev/sandbox/client"
)

// TestConsoleVolumes drives the console's Volumes view in Chromium
// (chromedp) under runc and runsc: reached from the navigation, it lists
// a volume with its used bytes / size and the sandbox that holds it writable (linked);
// Delete asks first, and while the sandbox mounts the volume the refusal
// (volume_in_use) is shown and the volume stays; once the sandbox is gone
// the view says it is not mounted and Delete removes it.
func TestConsoleVolumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	requireConsoleBuilt(t, svc)
	c := svc.client()
	if _, err := c.ListVolumes(callCtx(t)); err != nil {
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Status == http.StatusNotImplemented && os.Getenv("CI") != "true" {
			t.Skipf("volumes unavailable on this host: %v", err)
		}
		t.Fatal(err)
	}
	b := newConsoleBrowser(t)
	user := b.tab(t, "tenant", svc.url())
	user.signIn(t, e.apiKey)
	user.eval(t, `(window.confirm = () => true, true)`, nil)

	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			shots := consoleArtifacts(t, "volumes-"+rt)
			name := "console-" + rt
			if _, err := c.CreateVolume(callCtx(t), name, 1536); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.DeleteVolume(callCtx(t), name) })
			req := client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt, Volumes: []client.VolumeMount{{Volume: name, Path: "/mnt/data"}}}
			if rt == "runc" {
				req.RiskLevel = "low"
			}
			sb := e.createSandbox(t, req)
			row := `tr[data-name=` + js(name) + `]`

			user.open(t, "/sandboxes")
			user.run(t, "the navigation's Volumes", chromedp.Click(chromedp.CSS(`header nav a[href="#/volumes"]`)))
			user.wait(t, "the volume's row", `document.querySelector(`+js(row)+`)`)
			var got struct{ Size, Holders, Link string }
			user.eval(t, `(() => { const r = document.querySelector(`+js(row)+`);
				return {size: r.querySelector('.size').textContent, holders: r.querySelector('.holders').textContent,
					link: r.querySelector('.holders a')?.getAttribute('href') ?? ''}; })()`, &got)
			// Used / size: the filesystem's metadata on an empty volume.
			if !regexp.MustCompile(`^[0-9.]+ (KiB|MiB) / 1\.5 GiB \([0-9]+%\)$`).MatchString(got.Size) ||
				!strings.HasPrefix(got.Holders, "written by "+sb.ID+" at /mnt/data") || got.Link != "#/sandboxes/"+sb.ID {
				t.Errorf("the volume's row: %+v, want used / 1.5 GiB, written by %s at /mnt/data, linked", got, sb.ID)
			}
			user.shot(t, shots, "held")

			// Delete while held: asked, refused, and the page says why.
			user.run(t, "delete while held", chromedp.Click(chromedp.CSS(row+` button[data-action="delete"]`)))
			user.wait(t, "the refusal", `document.querySelector('#volumes-msg .error')?.textContent.includes('(volume_in_use)')`)
			if _, err := c.GetVolume(callCtx(t), name); err != nil {
				t.Fatalf("the held volume after a refused delete: %v", err)
			}

			if err := c.DeleteSandbox(callCtx(t), sb.ID); err != nil {
				t.Fatal(err)
			}
			user.open(t, "/volumes")
			user.wait(t, "the volume unheld", `document.querySelector(`+js(row+` .holders`)+`)?.textContent === 'not mounted'`)
			user.run(t, "delete", chromedp.Click(chromedp.CSS(row+` button[data-action="delete"]`)))
			user.wait(t, "the row gone", `document.querySelector('#volume-count') && !document.querySelector(`+js(row)+`)`)
			var ae *client.APIError
			if _, err := c.GetVolume(callCtx(t), name); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
				t.Errorf("the deleted volume: %v, want 404", err)
			}
		})
	}
}
