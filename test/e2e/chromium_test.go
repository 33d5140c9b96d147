package e2e

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"genesis.dev/sandbox/internal/testenv"
)

// chromiumText opens url in a new headless Chromium of this machine (a
// fresh profile, no API key, no network beyond loopback) and returns the
// page's body text once loaded.
func chromiumText(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := chromiumContext(t)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("chromium on %s: %v", url, err)
	}
	text, err := chromedp.Run(ctx, chromedp.Text("body"))
	if err != nil {
		t.Fatalf("chromium on %s: body text: %v", url, err)
	}
	return text
}

// chromiumContext starts headless Chromium with the flags this machine
// needs (root: --no-sandbox; no background traffic to the internet).
func chromiumContext(t *testing.T) (context.Context, context.CancelFunc) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(testenv.Chromium(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		// Tests reach only loopback: no name is looked up but *.localhost.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost, EXCLUDE *.localhost"),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	// The whole browser lives under one deadline: the first Run allocates
	// it under ctx.
	ctx, tcancel := context.WithTimeout(ctx, callTimeout)
	return ctx, func() { tcancel(); cancel(); acancel() }
}
