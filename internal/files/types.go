package files

import "genesis.dev/sandbox/internal/agent/agentproto"

// The request and result types of the gateway's API. The gateway passes
// them through to the sandbox's agent, so they are the agent protocol's;
// they are named here so that the API layer depends on files alone.
type (
	FileInfo        = agentproto.FileInfo
	FileList        = agentproto.FileList
	FileWriteResult = agentproto.FileWriteResult
	MkdirRequest    = agentproto.MkdirRequest
	MoveRequest     = agentproto.MoveRequest
	DeleteRequest   = agentproto.DeleteRequest
	ChmodRequest    = agentproto.ChmodRequest
	ExtractResult   = agentproto.ExtractResult
	SearchRequest   = agentproto.SearchRequest
	SearchResult    = agentproto.SearchResult
	ReplaceRequest  = agentproto.ReplaceRequest
	ReplaceResult   = agentproto.ReplaceResult
)

// Problem codes and headers of file transfers.
const (
	// CodeUploadTooLarge is the problem code of an upload over its limit.
	CodeUploadTooLarge = agentproto.CodeUploadTooLarge
	// HeaderFileSize and HeaderFileMode carry a downloaded file's size and
	// mode.
	HeaderFileSize = agentproto.HeaderFileSize
	HeaderFileMode = agentproto.HeaderFileMode
)
