package agentproto

// An agent that listens on TCP (a sandbox on another machine, reached over
// the cluster network) admits a connection only after its first bytes are
// TokenPreface followed by the sandbox's token in hex and a newline. The
// token is a secret the service derives for that sandbox alone, so a
// neighbour on the same network cannot drive another sandbox's agent.
const (
	// TokenPreface starts every TCP connection to an agent.
	TokenPreface = "GENESIS-AGENT-TOKEN "
	// TokenBytes is the length of a token (its hex form is twice as long).
	TokenBytes = 32
	// TokenEnv is the environment variable the agent reads its token from
	// (like every GENESIS_AGENT_* variable, never passed on to jobs).
	TokenEnv = "GENESIS_AGENT_TOKEN"
	// DefaultTCPPort is where an agent listens when it listens on TCP.
	DefaultTCPPort = 7070
)
