package errdefs

import (
	"fmt"
	"testing"
	"time"
)

func TestRetryAfterKeepsClassAndCode(t *testing.T) {
	err := WithRetryAfter(3*time.Second, WithCode("quota_exceeded", fmt.Errorf("tenant a: %w", ErrResourceExhausted)))
	if d, ok := RetryAfter(err); !ok || d != 3*time.Second {
		t.Fatalf("RetryAfter = %v, %v; want 3s, true", d, ok)
	}
	if HTTPStatus(err) != 429 || Code(err) != "quota_exceeded" {
		t.Fatalf("status %d code %q; want 429 quota_exceeded", HTTPStatus(err), Code(err))
	}
	if _, ok := RetryAfter(ErrUnavailable); ok {
		t.Fatal("a plain class error carries no retry hint")
	}
}
