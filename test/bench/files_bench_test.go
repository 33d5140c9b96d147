package bench

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"
)

// BenchmarkFiles measures the file API per runtime on one sandbox: upload
// and download throughput of one big file (GENESIS_BENCH_FILE_MIB, default
// 1024) through PUT/GET /v1/sandboxes/{id}/files, checked by sha256 on both
// ends, and the latency of writing then reading back a small file
// (GENESIS_BENCH_SMALL_ITERS pairs of 1 KiB, default 300), and one batch
// replace across GENESIS_BENCH_REPLACE_FILES files (default 1000, 40
// replacements each) made by extracting one archive.
func BenchmarkFiles(b *testing.B) {
	s := startService(b)
	mib := envInt(b, "GENESIS_BENCH_FILE_MIB", 1024)
	smallIters := envInt(b, "GENESIS_BENCH_SMALL_ITERS", 300)
	replaceFiles := envInt(b, "GENESIS_BENCH_REPLACE_FILES", 1000)
	tbl := NewTable("runtime", "MiB", "upload MiB/s", "download MiB/s", "small n", "write+read p50 ms", "p99 ms", "write p50", "read p50",
		"replace files", "replace ms")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		sb, err := s.create(ctx, rt)
		if err != nil {
			b.Fatalf("create (%s): %v", rt, err)
		}
		defer func() {
			if err := s.remove(ctx, sb.ID); err != nil {
				b.Error(err)
			}
		}()
		size := int64(mib) << 20
		block := make([]byte, 1<<20)
		rand.Read(block)

		// Upload.
		src := &patternReader{block: block, left: size, h: sha256.New()}
		t0 := time.Now()
		var written struct {
			Size   int64  `json:"size"`
			SHA256 string `json:"sha256"`
		}
		// A client with large socket buffers, as a bulk uploader would use:
		// with the default 4 KiB one the client's own writes cap the rate.
		bulk := &http.Client{Transport: &http.Transport{WriteBufferSize: 1 << 20, ReadBufferSize: 1 << 20}}
		defer bulk.CloseIdleConnections()
		if err := s.fileCallWith(ctx, bulk, "PUT", sb.ID, "/workspace/big.bin", src, size, nil, &written); err != nil {
			b.Fatalf("upload (%s): %v", rt, err)
		}
		up := time.Since(t0)
		if want := hex.EncodeToString(src.h.Sum(nil)); written.Size != size || written.SHA256 != want {
			b.Fatalf("upload (%s): service wrote %d bytes sha256 %s, sent %d sha256 %s", rt, written.Size, written.SHA256, size, want)
		}

		// Download.
		h := sha256.New()
		t0 = time.Now()
		if err := s.fileCallWith(ctx, bulk, "GET", sb.ID, "/workspace/big.bin", nil, 0, h, nil); err != nil {
			b.Fatalf("download (%s): %v", rt, err)
		}
		down := time.Since(t0)
		if got := hex.EncodeToString(h.Sum(nil)); got != written.SHA256 {
			b.Fatalf("download (%s): sha256 %s, uploaded %s", rt, got, written.SHA256)
		}
		if err := s.fileCall(ctx, "POST", sb.ID, "delete", bytes.NewReader([]byte(`{"path":"/workspace/big.bin"}`)), -1, nil, nil); err != nil {
			b.Fatalf("delete (%s): %v", rt, err)
		}
		upRate := float64(mib) / up.Seconds()
		downRate := float64(mib) / down.Seconds()

		// Small files: write 1 KiB, read it back.
		small := block[:1024]
		var pair, writes, reads []time.Duration
		for i := range smallIters + 10 { // ten warm-ups
			p := "/workspace/small/" + strconv.Itoa(i%50)
			t0 := time.Now()
			if err := s.fileCall(ctx, "PUT", sb.ID, p, bytes.NewReader(small), int64(len(small)), nil, nil); err != nil {
				b.Fatalf("small write (%s): %v", rt, err)
			}
			t1 := time.Now()
			var got bytes.Buffer
			if err := s.fileCall(ctx, "GET", sb.ID, p, nil, 0, &got, nil); err != nil {
				b.Fatalf("small read (%s): %v", rt, err)
			}
			t2 := time.Now()
			if !bytes.Equal(got.Bytes(), small) {
				b.Fatalf("small read (%s): %d bytes differ from what was written", rt, got.Len())
			}
			if i >= 10 {
				pair, writes, reads = append(pair, t2.Sub(t0)), append(writes, t1.Sub(t0)), append(reads, t2.Sub(t1))
			}
		}
		// Batch replace across many files, made in one extracted archive.
		var tarball bytes.Buffer
		tw := tar.NewWriter(&tarball)
		line := bytes.Repeat([]byte("value = old_name + 1\n"), 40)
		for i := range replaceFiles {
			tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("tree/d%02d/f%04d.py", i%20, i), Mode: 0o644, Size: int64(len(line)), Typeflag: tar.TypeReg})
			tw.Write(line)
		}
		tw.Close()
		if err := s.fileCall(ctx, "POST", sb.ID, "extract?path=/workspace", bytes.NewReader(tarball.Bytes()), int64(tarball.Len()), nil, nil); err != nil {
			b.Fatalf("extract (%s): %v", rt, err)
		}
		var rr struct {
			Replacements int `json:"replacements"`
			FilesChanged int `json:"files_changed"`
		}
		t0 = time.Now()
		req := `{"path":"/workspace/tree","glob":"*.py","find":"old_name","replace":"new_name"}`
		if err := s.fileCall(ctx, "POST", sb.ID, "replace", bytes.NewReader([]byte(req)), int64(len(req)), nil, &rr); err != nil {
			b.Fatalf("replace (%s): %v", rt, err)
		}
		replaceTime := time.Since(t0)
		if rr.FilesChanged != replaceFiles || rr.Replacements != 40*replaceFiles {
			b.Fatalf("replace (%s): %+v, want %d files changed", rt, rr, replaceFiles)
		}

		ps := Summarize(pair)
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(upRate, "upload-MiB/s")
		b.ReportMetric(downRate, "download-MiB/s")
		b.ReportMetric(Ms(ps.P50), "small-write+read-p50-ms")
		b.ReportMetric(Ms(ps.P99), "small-write+read-p99-ms")
		b.ReportMetric(Ms(replaceTime), "replace-1000-files-ms")
		tbl.Row(rt, strconv.Itoa(mib), fmt.Sprintf("%.0f", upRate), fmt.Sprintf("%.0f", downRate), strconv.Itoa(ps.N),
			FormatMs(ps.P50), FormatMs(ps.P99), FormatMs(Summarize(writes).P50), FormatMs(Summarize(reads).P50),
			strconv.Itoa(replaceFiles), FormatMs(replaceTime))
	})
	printTable("file API: one big file up and down (MiB/s, sha256-checked), 1 KiB write then read back (ms), one batch replace across many files (ms)", tbl)
}

// fileCall performs one file request. For PUT, body is streamed with the
// given length; for GET, the answer's body is copied to into; for POST,
// path names the operation (e.g. "delete") and body is its JSON. out, if
// not nil, receives a JSON answer.
func (s *service) fileCall(ctx context.Context, method, id, path string, body io.Reader, size int64, into io.Writer, out any) error {
	return s.fileCallWith(ctx, s.http, method, id, path, body, size, into, out)
}

// fileCallWith is fileCall through hc.
func (s *service) fileCallWith(ctx context.Context, hc *http.Client, method, id, path string, body io.Reader, size int64, into io.Writer, out any) error {
	u := s.url + "/v1/sandboxes/" + id + "/files"
	if method == "POST" {
		u += "/" + path // an operation, with its query if any
	} else {
		u += "?" + url.Values{"path": {path}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	if body != nil {
		req.ContentLength = size
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, msg)
	}
	if into != nil {
		_, err = io.CopyBuffer(into, resp.Body, make([]byte, 256<<10))
		return err
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// patternReader yields left bytes by repeating block, hashing them.
type patternReader struct {
	block []byte
	off   int
	left  int64
	h     hash.Hash
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.block[p.off:])
	if int64(n) > p.left {
		n = int(p.left)
	}
	p.h.Write(b[:n])
	p.off = (p.off + n) % len(p.block)
	p.left -= int64(n)
	return n, nil
}
