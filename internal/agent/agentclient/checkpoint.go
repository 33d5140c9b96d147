package agentclient

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

// PrepareCheckpoint readies the agent for a save of its sandbox: it answers,
// then closes its socket and every connection until the save is done or
// timeout passes (agentproto.PathCheckpointPrepare). The client's own idle
// connections are closed too; the next call dials again.
func (c *Client) PrepareCheckpoint(ctx context.Context, timeout time.Duration) (agentproto.CheckpointPrepared, error) {
	body, _ := json.Marshal(agentproto.CheckpointPrepare{TimeoutMS: timeout.Milliseconds()})
	var res agentproto.CheckpointPrepared
	err := c.do(ctx, http.MethodPost, agentproto.PathCheckpointPrepare, body, &res)
	if err == nil {
		c.Close()
	}
	return res, err
}
