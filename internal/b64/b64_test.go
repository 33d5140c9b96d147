package b64

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"testing"
)

func TestAppendEncodeMatchesStd(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 8))
	prefix := []byte("data: ")
	for n := range 200 {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		got := AppendEncode(append([]byte(nil), prefix...), src)
		want := base64.StdEncoding.AppendEncode(append([]byte(nil), prefix...), src)
		if !bytes.Equal(got, want) {
			t.Fatalf("%d bytes: %q, want %q", n, got, want)
		}
	}
	big := make([]byte, 3<<20+5)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	if got := AppendEncode(make([]byte, 0, 10), big); !bytes.Equal(got, base64.StdEncoding.AppendEncode(nil, big)) {
		t.Fatal("3 MiB input differs")
	}
}

func FuzzAppendEncode(f *testing.F) {
	f.Add([]byte("hi\n"), []byte("x"))
	f.Fuzz(func(t *testing.T, src, prefix []byte) {
		got := AppendEncode(append([]byte(nil), prefix...), src)
		if want := base64.StdEncoding.AppendEncode(append([]byte(nil), prefix...), src); !bytes.Equal(got, want) {
			t.Fatalf("%q: %q, want %q", src, got, want)
		}
	})
}

func BenchmarkAppendEncode(b *testing.B) {
	src := make([]byte, 1<<20)
	dst := make([]byte, 0, 2<<20)
	b.SetBytes(int64(len(src)))
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			dst = AppendEncode(dst[:0], src)
		}
	})
	b.Run("std", func(b *testing.B) {
		for b.Loop() {
			dst = base64.StdEncoding.AppendEncode(dst[:0], src)
		}
	})
}
