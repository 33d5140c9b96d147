package e2e

import (
	"encoding/base64"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// colours counts the distinct colours of img (up to limit).
func colours(img image.Image, limit int) int {
	seen := map[uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[(r>>8)<<16|(g>>8)<<8|bl>>8] = true
			if len(seen) >= limit {
				return len(seen)
			}
		}
	}
	return len(seen)
}

// TestDesktopImages starts the desktop-cloud (XFCE) and desktop-browser
// (Chromium on the display) profiles under runc and runsc and checks what
// an agent sees: the XFCE panel and desktop windows, or a Chromium window,
// in list_windows, and a screenshot that is a drawn desktop (hundreds of
// colours: a wallpaper, a panel's icons, a browser's page and toolbar), not
// a blank screen. The screenshots are saved under
// test/e2e/artifacts/console/desktop-images/.
func TestDesktopImages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "desktop-cloud")
	e.requireImage(t, "desktop-browser")
	svc := e.start(t)
	c := svc.client()
	for _, tc := range []struct{ profile, window string }{
		{"desktop-cloud", "xfce4-panel"},
		{"desktop-browser", "Chromium"},
	} {
		for _, rt := range e.runtimes(t) {
			t.Run(tc.profile+"/"+rt, func(t *testing.T) {
				req := client.CreateSandboxRequest{Profile: tc.profile, Runtime: rt}
				if rt == "runc" {
					req.RiskLevel = "low"
				}
				sb := e.createSandbox(t, req)
				var titles []string
				eventually(t, 60*time.Second, "the "+tc.window+" window", func() (bool, string) {
					res, err := c.ComputerActions(callCtx(t), sb.ID, client.ComputerActionsRequest{Actions: []client.ComputerAction{{Action: "list_windows"}}})
					if err != nil || !res.OK {
						return false, fmt.Sprint(res, err)
					}
					titles = titles[:0]
					for _, w := range res.Results[0].Windows {
						titles = append(titles, w.Title)
						if strings.Contains(w.Title, tc.window) {
							return true, ""
						}
					}
					return false, fmt.Sprintf("windows %q", titles)
				})
				var n int
				var shot string
				eventually(t, 30*time.Second, "a drawn desktop", func() (bool, string) {
					res, err := c.ComputerActions(callCtx(t), sb.ID, client.ComputerActionsRequest{Actions: []client.ComputerAction{{Action: "screenshot"}}})
					if err != nil || !res.OK {
						return false, fmt.Sprint(res, err)
					}
					img := decodeShot(t, res.Results[0].Screenshot)
					n = colours(img, 1000)
					shot = res.Results[0].Screenshot
					// The middle of the screen is drawn too (a wallpaper, a
					// page): X's bare root window is black.
					r, g, bl, _ := img.At(640, 400).RGBA()
					return n >= 100 && r+g+bl > 0, fmt.Sprintf("%d colours, middle %d/%d/%d", n, r>>8, g>>8, bl>>8)
				})
				raw, _ := base64.StdEncoding.DecodeString(shot)
				if err := os.WriteFile(filepath.Join(consoleArtifacts(t, "desktop-images"), tc.profile+"-"+rt+".png"), raw, 0o644); err != nil {
					t.Error(err)
				}
				t.Logf("%s under %s: windows %q, %d+ colours", tc.profile, rt, titles, n)
			})
		}
	}
}
