package grpcedge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"genesis.dev/sandbox/internal/artifacts"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/snapshots"
)

// Workloads are the managers behind FileService, ArtifactService and
// SnapshotService, the same ones the HTTP API's routes call. A nil one
// makes its service's RPCs answer UNIMPLEMENTED (not_supported), as the
// HTTP API serves no routes for it.
type Workloads struct {
	Files     *files.Gateway
	Artifacts *artifacts.Keeper
	// Snapshots is nil when the service keeps no snapshots.
	Snapshots *snapshots.Manager
	// Services are the sandboxes' services (GetSandbox lists them; nil:
	// none listed).
	Services *jobs.Services
}

// chunkBytes is the most a download sends in one message: well under any
// client's default receive limit (4 MiB for grpc-go).
const chunkBytes = 256 << 10

func notSupported(what string) error {
	return errdefs.WithCode("not_supported", fmt.Errorf("this service has no %s: %w", what, errdefs.ErrNotImplemented))
}

// byteRange checks a download's offset and length (0: to the end).
func byteRange(offset, length int64) error {
	if offset < 0 {
		return errdefs.WithCode("invalid_range", invalidArg("offset %d is negative", offset))
	}
	if length < 0 {
		return errdefs.WithCode("invalid_range", invalidArg("length %d is negative", length))
	}
	return nil
}

// rangeNotSatisfiable is OUT_OF_RANGE with the stable code the HTTP API's
// 416 carries. errdefs' class table has no class for it (416 belongs to
// Range, not to a class), so the error is made here, with the same
// ErrorInfo detail as every other error of the edge.
func rangeNotSatisfiable(ctx context.Context, what string, offset, size int64) error {
	msg := fmt.Sprintf("offset %d is not satisfiable for %s of %s bytes", offset, what, sizeText(size))
	out := connect.NewError(connect.CodeOutOfRange, errors.New(msg))
	info := &errdetails.ErrorInfo{Reason: "range_not_satisfiable", Domain: ErrorDomain, Metadata: map[string]string{}}
	if rid := requestIDOf(ctx); rid != "" {
		info.Metadata[MetaRequestID] = rid
	}
	if d, err := connect.NewErrorDetail(info); err == nil {
		out.AddDetail(d)
	}
	return out
}

func sizeText(size int64) string {
	if size < 0 {
		return "unknown"
	}
	return strconv.FormatInt(size, 10)
}

// sendChunks streams r in messages of at most chunkBytes, made by msg
// (first is true for the first one), from offset. want is the number of
// bytes r must yield (-1: unknown): a source that ends short is an error,
// so a client never takes a partial download for a whole one. Each send
// waits for the client's flow control, so a client that does not read
// holds the reader, not memory.
func sendChunks(r io.Reader, offset, want int64, send func(first bool, offset int64, data []byte) error) error {
	buf := make([]byte, chunkBytes)
	var n int64
	first := true
	for {
		k, err := io.ReadFull(r, buf)
		if k > 0 || first {
			if serr := send(first, offset+n, buf[:k]); serr != nil {
				return serr
			}
			first = false
			n += int64(k)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading after %d bytes: %w", n, err)
		}
	}
	if want >= 0 && n != want {
		return fmt.Errorf("the source ended after %d of %d bytes: %w", n, want, errdefs.ErrUnavailable)
	}
	return nil
}
