package b64

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"testing"
)

// bothPaths runs fn with the vector encoder (where this CPU has it) and
// with the table.
func bothPaths(t testing.TB, fn func(t testing.TB)) {
	was := vector
	t.Cleanup(func() { vector = was })
	for _, v := range []bool{was, false} {
		vector = v
		fn(t)
		if !was {
			return
		}
	}
}

func TestAppendEncodeMatchesStd(t *testing.T) {
	bothPaths(t, testAppendEncode)
}

func testAppendEncode(t testing.TB) {
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
			t.Fatalf("vector %v, %d bytes: %q, want %q", vector, n, got, want)
		}
	}
	big := make([]byte, 3<<20+5)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	if got := AppendEncode(make([]byte, 0, 10), big); !bytes.Equal(got, base64.StdEncoding.AppendEncode(nil, big)) {
		t.Fatalf("vector %v: 3 MiB input differs", vector)
	}
}

func FuzzAppendEncode(f *testing.F) {
	f.Add([]byte("hi\n"), []byte("x"))
	f.Fuzz(func(t *testing.T, src, prefix []byte) {
		bothPaths(t, func(t testing.TB) {
			got := AppendEncode(append([]byte(nil), prefix...), src)
			if want := base64.StdEncoding.AppendEncode(append([]byte(nil), prefix...), src); !bytes.Equal(got, want) {
				t.Fatalf("vector %v, %q: %q, want %q", vector, src, got, want)
			}
		})
	})
}

func BenchmarkAppendEncode(b *testing.B) {
	src := make([]byte, 1<<20)
	dst := make([]byte, 0, 2<<20)
	was := vector
	defer func() { vector = was }()
	for _, v := range []bool{true, false} {
		name := map[bool]string{true: "vector", false: "table"}[v]
		if v && !was {
			continue // this CPU has no vector encoder
		}
		b.Run(name, func(b *testing.B) {
			vector = v
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				dst = AppendEncode(dst[:0], src)
			}
		})
	}
	b.Run("std", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			dst = base64.StdEncoding.AppendEncode(dst[:0], src)
		}
	})
}
