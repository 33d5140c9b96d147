package grpcedge

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// strictJSON is connect-go's JSON codec but refusing unknown fields, as
// the HTTP API refuses them: a misspelt field of a JSON call is
// INVALID_ARGUMENT, not silently ignored. Binary protobuf keeps proto's
// rule (unknown fields are skipped), as every gRPC server's does: that is
// how a newer client talks to an older server.
type strictJSON struct{ name string }

func (c strictJSON) Name() string { return c.name }

func (c strictJSON) Marshal(m any) ([]byte, error) {
	pm, ok := m.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a proto message", m)
	}
	return protojson.Marshal(pm)
}

func (c strictJSON) Unmarshal(b []byte, m any) error {
	pm, ok := m.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a proto message", m)
	}
	if len(b) == 0 {
		return errors.New("an empty body is no JSON object (send {})")
	}
	if err := protojson.Unmarshal(b, pm); err != nil {
		return fmt.Errorf("the JSON request: %w", err)
	}
	return nil
}
