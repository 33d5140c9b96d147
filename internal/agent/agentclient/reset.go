package agentclient

import (
	"context"
	"net/http"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

// Reset asks the agent to wipe the sandbox for its next holder: kill every
// process but itself, forget its jobs and terminals, and empty every
// writable place. An error means something may be left: the sandbox must
// not be handed to anyone else.
func (c *Client) Reset(ctx context.Context) (agentproto.ResetResult, error) {
	var res agentproto.ResetResult
	err := c.do(ctx, http.MethodPost, agentproto.PathReset, nil, &res)
	return res, err
}
