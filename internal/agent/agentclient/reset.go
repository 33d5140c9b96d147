package agentclient

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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

// SetToken makes the agent (one that listens on TCP) admit from now on
// only connections that present the token whose SHA-256 is sum, and close
// every connection but the one this call came on. Connections this client
// dials afterwards must present the new token.
func (c *Client) SetToken(ctx context.Context, sum [sha256.Size]byte) error {
	body, err := json.Marshal(agentproto.TokenChange{SHA256: hex.EncodeToString(sum[:])})
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPost, agentproto.PathToken, body, nil)
}
