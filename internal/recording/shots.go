package recording

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/draw"
	_ "image/jpeg" // KeepEncoded decodes JPEG screenshots too
	"image/png"
	"io"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// Keeper keeps bytes as an artifact of a sandbox.
type Keeper interface {
	KeepBytes(ctx context.Context, tenant, sandboxID, name string, r io.Reader) (*sandbox.Artifact, error)
}

// Screenshot modes of the trace (trace.screenshots).
const (
	ShotsOff   = "off"
	ShotsAfter = "after"
	ShotsBoth  = "both"
)

// ThumbWidth is the width of a trace screenshot's thumbnail.
const ThumbWidth = 320

// CheckShots returns the screenshot mode, after when empty; another word
// is invalid.
func CheckShots(mode string) (string, error) {
	switch mode {
	case "":
		return ShotsAfter, nil
	case ShotsOff, ShotsAfter, ShotsBoth:
		return mode, nil
	}
	return "", errdefs.Invalid("screenshots %q must be off, after or both", mode)
}

// WantShot reports whether mode keeps a screenshot in phase ("before" or
// "after").
func WantShot(mode, phase string) bool {
	switch mode {
	case ShotsBoth:
		return true
	case ShotsAfter:
		return phase == "after"
	}
	return false
}

// Ref is an artifact as trace events name it.
func Ref(a *sandbox.Artifact) map[string]any {
	return map[string]any{"id": a.ID, "sha256": a.SHA256, "size": a.Size, "mime": a.MIME}
}

// Shot is a kept screenshot: the full image and its thumbnail (nil if it
// could not be kept).
type Shot struct {
	Full, Thumb *sandbox.Artifact
	Size        image.Point
}

// KeepRGBA keeps img as name+".png" and a thumbnail ThumbWidth wide as
// name+"-thumb.png".
func KeepRGBA(ctx context.Context, k Keeper, tenant, id, name string, img *image.RGBA) (*Shot, error) {
	full, err := keepPNG(ctx, k, tenant, id, name+".png", img)
	if err != nil {
		return nil, err
	}
	s := &Shot{Full: full, Size: img.Rect.Size()}
	s.Thumb, _ = keepThumb(ctx, k, tenant, id, name, img)
	return s, nil
}

// KeepEncoded keeps an encoded PNG (or JPEG) as it is and a PNG thumbnail of it.
func KeepEncoded(ctx context.Context, k Keeper, tenant, id, name string, encoded []byte) (*Shot, error) {
	img, _, err := image.Decode(bytes.NewReader(encoded))
	if err != nil {
		return nil, fmt.Errorf("decoding the screenshot: %w", err)
	}
	full, err := k.KeepBytes(ctx, tenant, id, name+".png", bytes.NewReader(encoded))
	if err != nil {
		return nil, err
	}
	rgba := ToRGBA(img)
	s := &Shot{Full: full, Size: rgba.Rect.Size()}
	s.Thumb, _ = keepThumb(ctx, k, tenant, id, name, rgba)
	return s, nil
}

func keepThumb(ctx context.Context, k Keeper, tenant, id, name string, img *image.RGBA) (*sandbox.Artifact, error) {
	w := min(ThumbWidth, img.Rect.Dx())
	h := max(1, img.Rect.Dy()*w/max(1, img.Rect.Dx()))
	return keepPNG(ctx, k, tenant, id, name+"-thumb.png", Scale(img, w, h))
}

func keepPNG(ctx context.Context, k Keeper, tenant, id, name string, img image.Image) (*sandbox.Artifact, error) {
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, img); err != nil {
		return nil, err
	}
	return k.KeepBytes(ctx, tenant, id, name, &buf)
}

// ToRGBA returns img as an *image.RGBA with its origin at 0,0.
func ToRGBA(img image.Image) *image.RGBA {
	if r, ok := img.(*image.RGBA); ok && r.Rect.Min == (image.Point{}) {
		return r
	}
	b := img.Bounds()
	dst := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(dst, dst.Rect, img, b.Min, draw.Src)
	return dst
}

// Scale resizes img to w×h by averaging the source pixels each target
// pixel covers (a box filter: sharp enough for text at the common
// down-scales, and no dependency).
func Scale(img *image.RGBA, w, h int) *image.RGBA {
	b := img.Bounds()
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	sw, sh := b.Dx(), b.Dy()
	for y := range h {
		y0 := y * sh / h
		y1 := max(y0+1, (y+1)*sh/h)
		for x := range w {
			x0 := x * sw / w
			x1 := max(x0+1, (x+1)*sw/w)
			var rs, gs, bs, n int
			for yy := y0; yy < y1; yy++ {
				o := img.PixOffset(b.Min.X+x0, b.Min.Y+yy)
				for xx := x0; xx < x1; xx++ {
					rs += int(img.Pix[o])
					gs += int(img.Pix[o+1])
					bs += int(img.Pix[o+2])
					o += 4
					n++
				}
			}
			do := dst.PixOffset(x, y)
			dst.Pix[do], dst.Pix[do+1], dst.Pix[do+2], dst.Pix[do+3] = uint8(rs/n), uint8(gs/n), uint8(bs/n), 0xff
		}
	}
	return dst
}
