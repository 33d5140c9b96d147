package recording

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"io"
	"testing"

	"genesis.dev/sandbox/internal/sandbox"
)

func TestScale(t *testing.T) {
	// A box-filtered down-scale keeps flat colours and halves the size.
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	for i := range 16 {
		img.Set(i%4, i/4, color.RGBA{200, 100, 50, 255})
	}
	out := Scale(img, 2, 2)
	if out.Bounds().Dx() != 2 || out.RGBAAt(1, 1) != (color.RGBA{200, 100, 50, 255}) {
		t.Errorf("scale: %v %v", out.Bounds(), out.RGBAAt(1, 1))
	}
}

func TestShotModes(t *testing.T) {
	for _, c := range []struct {
		mode          string
		before, after bool
	}{{ShotsOff, false, false}, {ShotsAfter, false, true}, {ShotsBoth, true, true}} {
		if WantShot(c.mode, "before") != c.before || WantShot(c.mode, "after") != c.after {
			t.Errorf("mode %s", c.mode)
		}
	}
	if m, err := CheckShots(""); err != nil || m != ShotsAfter {
		t.Errorf("default %q %v", m, err)
	}
	if _, err := CheckShots("always"); err == nil {
		t.Error("an unknown mode was taken")
	}
}

type memKeeper map[string][]byte

func (k memKeeper) KeepBytes(_ context.Context, _, _, name string, r io.Reader) (*sandbox.Artifact, error) {
	b, err := io.ReadAll(r)
	k[name] = b
	return &sandbox.Artifact{ID: name, Size: int64(len(b))}, err
}

func TestKeepEncoded(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 1280, 800))
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	k := memKeeper{}
	s, err := KeepEncoded(context.Background(), k, "t", "sb", "shot", buf.Bytes())
	if err != nil || s.Thumb == nil || s.Size != image.Pt(1280, 800) {
		t.Fatalf("%+v %v", s, err)
	}
	if !bytes.Equal(k["shot.png"], buf.Bytes()) {
		t.Error("the full image was not kept as sent")
	}
	th, err := png.Decode(bytes.NewReader(k["shot-thumb.png"]))
	if err != nil || th.Bounds().Dx() != ThumbWidth || th.Bounds().Dy() != 200 {
		t.Errorf("thumbnail %v %v", th.Bounds(), err)
	}
	if _, err := KeepEncoded(context.Background(), k, "t", "sb", "bad", []byte("not an image")); err == nil {
		t.Error("a broken image was kept")
	}
}
