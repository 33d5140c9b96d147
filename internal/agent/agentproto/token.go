package agentproto

// An agent that listens on TCP (a sandbox on another machine, reached over
// the cluster network) admits a connection only after its first bytes are
// TokenPreface followed by the sandbox's token in hex and a newline. The
// token is a secret the service derives for that sandbox alone, so a
// neighbour on the same network cannot drive another sandbox's agent.
//
// The agent never holds the token itself: it is given the token's SHA-256
// (TokenSHA256Env) and checks the SHA-256 of what a connection presents
// against it. The sandbox's own processes, which can read the agent's
// environment, learn nothing they could present. When a sandbox is handed
// to another holder the service gives the agent the SHA-256 of a new token
// (PathToken): the old one opens nothing from then on.
const (
	// TokenPreface starts every TCP connection to an agent.
	TokenPreface = "GENESIS-AGENT-TOKEN "
	// TokenBytes is the length of a token (its hex form is twice as long).
	TokenBytes = 32
	// TokenSHA256Env is the environment variable the agent reads the hex
	// SHA-256 of its token from (like every GENESIS_AGENT_* variable,
	// never passed on to jobs).
	TokenSHA256Env = "GENESIS_AGENT_TOKEN_SHA256"
	// DefaultTCPPort is where an agent listens when it listens on TCP.
	DefaultTCPPort = 7070
	// PathToken replaces the token a TCP agent admits (POST TokenChange →
	// 204): new connections must present the new one, and every other
	// connection the agent holds is closed; the one that asked stays open.
	// An agent on a Unix socket has no token: 409 no_token.
	PathToken = "/v1/token"
)

// TokenChange is the body of POST PathToken.
type TokenChange struct {
	// SHA256 is the hex SHA-256 of the new token.
	SHA256 string `json:"sha256"`
}
