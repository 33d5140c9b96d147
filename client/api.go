package client

import "genesis.dev/sandbox/api"

// The wire types of the API are declared in package api; these aliases keep
// the SDK's names.
type (
	Snapshot                    = api.Snapshot
	SnapshotList                = api.SnapshotList
	CreateSnapshotRequest       = api.CreateSnapshotRequest
	ForkRequest                 = api.ForkRequest
	ForkResult                  = api.ForkResult
	ForkError                   = api.ForkError
	RollbackRequest             = api.RollbackRequest
	Suspension                  = api.Suspension
	ArtifactRequest             = api.ArtifactRequest
	ArtifactSummary             = api.ArtifactSummary
	Artifact                    = api.Artifact
	SkippedArtifact             = api.SkippedArtifact
	ArtifactList                = api.ArtifactList
	BrowserAction               = api.BrowserAction
	BrowserImage                = api.BrowserImage
	BrowserActionsRequest       = api.BrowserActionsRequest
	BrowserActionResult         = api.BrowserActionResult
	BrowserActionsResult        = api.BrowserActionsResult
	BrowserTab                  = api.BrowserTab
	BrowserStatus               = api.BrowserStatus
	BrowserLink                 = api.BrowserLink
	BrowserDownload             = api.BrowserDownload
	BrowserDownloadList         = api.BrowserDownloadList
	KeepBrowserDownloadsRequest = api.KeepBrowserDownloadsRequest
	SaveBrowserProfileRequest   = api.SaveBrowserProfileRequest
	LoadBrowserProfileRequest   = api.LoadBrowserProfileRequest
	BrowserProfile              = api.BrowserProfile
	ComputerPoint               = api.ComputerPoint
	DisplaySize                 = api.DisplaySize
	ComputerAction              = api.ComputerAction
	ComputerActionsRequest      = api.ComputerActionsRequest
	ComputerWindow              = api.ComputerWindow
	ComputerStepResult          = api.ComputerStepResult
	ComputerActionsResult       = api.ComputerActionsResult
	DesktopControlRequest       = api.DesktopControlRequest
	DesktopControl              = api.DesktopControl
	TakeDesktopControlRequest   = api.TakeDesktopControlRequest
	RequestHumanRequest         = api.RequestHumanRequest
	CreateDisplayLinkRequest    = api.CreateDisplayLinkRequest
	DisplayLink                 = api.DisplayLink
	RecordingRequest            = api.RecordingRequest
	Recording                   = api.Recording
	E2BSandbox                  = api.E2BSandbox
	FileInfo                    = api.FileInfo
	FileList                    = api.FileList
	FileWritten                 = api.FileWritten
	MkdirRequest                = api.MkdirRequest
	MoveRequest                 = api.MoveRequest
	DeleteFileRequest           = api.DeleteFileRequest
	ChmodRequest                = api.ChmodRequest
	ExtractResult               = api.ExtractResult
	SearchRequest               = api.SearchRequest
	SearchMatch                 = api.SearchMatch
	SearchResult                = api.SearchResult
	ReplaceRequest              = api.ReplaceRequest
	ReplaceFile                 = api.ReplaceFile
	ReplaceResult               = api.ReplaceResult
	AcquireLeaseRequest         = api.AcquireLeaseRequest
	Lease                       = api.Lease
	LeaseList                   = api.LeaseList
	RenewLeaseRequest           = api.RenewLeaseRequest
	Pool                        = api.Pool
	PoolList                    = api.PoolList
	MCPToolRules                = api.MCPToolRules
	MCPPermissions              = api.MCPPermissions
	MCPSpec                     = api.MCPSpec
	MCPCreateRequest            = api.MCPCreateRequest
	MCPDecision                 = api.MCPDecision
	MCPImplementation           = api.MCPImplementation
	MCPServer                   = api.MCPServer
	MCPServerList               = api.MCPServerList
	MCPTool                     = api.MCPTool
	MCPToolList                 = api.MCPToolList
	MCPPinChange                = api.MCPPinChange
	MCPPin                      = api.MCPPin
	MCPPinList                  = api.MCPPinList
	MCPCallRecord               = api.MCPCallRecord
	MCPCallPage                 = api.MCPCallPage
	MCPCatalogEntry             = api.MCPCatalogEntry
	AddMCPCatalogEntryRequest   = api.AddMCPCatalogEntryRequest
	MCPPinRef                   = api.MCPPinRef
	MCPCatalog                  = api.MCPCatalog
	MCPApproval                 = api.MCPApproval
	MCPApprovalList             = api.MCPApprovalList
	MCPApprovalDecision         = api.MCPApprovalDecision
	UploadedFile                = api.UploadedFile
	UploadFilesResult           = api.UploadFilesResult
	NetworkPolicy               = api.NetworkPolicy
	NetworkRule                 = api.NetworkRule
	NetworkSummary              = api.NetworkSummary
	SandboxNetwork              = api.SandboxNetwork
	NetworkEvent                = api.NetworkEvent
	NetworkEventList            = api.NetworkEventList
	NetworkCapabilities         = api.NetworkCapabilities
	OpenSandboxSandbox          = api.OpenSandboxSandbox
	Endpoint                    = api.Endpoint
	CreatePortLinkRequest       = api.CreatePortLinkRequest
	PortLink                    = api.PortLink
	SkillManifest               = api.SkillManifest
	SkillFile                   = api.SkillFile
	SkillSecretFinding          = api.SkillSecretFinding
	SkillReport                 = api.SkillReport
	SkillRevision               = api.SkillRevision
	SkillList                   = api.SkillList
	SkillRevisionList           = api.SkillRevisionList
	SkillInputFile              = api.SkillInputFile
	SkillRunRequest             = api.SkillRunRequest
	SkillRunDecision            = api.SkillRunDecision
	SkillRun                    = api.SkillRun
	StdinWritten                = api.StdinWritten
	JobExit                     = api.JobExit
	LogEvent                    = api.LogEvent
	Quotas                      = api.Quotas
	QuotasPatch                 = api.QuotasPatch
	Usage                       = api.Usage
	Tenant                      = api.Tenant
	TenantList                  = api.TenantList
	CreateTenantRequest         = api.CreateTenantRequest
	UpdateTenantRequest         = api.UpdateTenantRequest
	APIKey                      = api.APIKey
	APIKeyList                  = api.APIKeyList
	CreateAPIKeyRequest         = api.CreateAPIKeyRequest
	AuditRecord                 = api.AuditRecord
	AuditPage                   = api.AuditPage
	TraceEvent                  = api.TraceEvent
	TracePage                   = api.TracePage
	TraceEventRequest           = api.TraceEventRequest
	TraceInterruption           = api.TraceInterruption
	TraceManifest               = api.TraceManifest
	TraceManifestFile           = api.TraceManifestFile
	ReplayRequest               = api.ReplayRequest
	ReplayStep                  = api.ReplayStep
	ReplayReport                = api.ReplayReport
	Problem                     = api.Problem
	Resources                   = api.Resources
	CreateSandboxRequest        = api.CreateSandboxRequest
	Sandbox                     = api.Sandbox
	ServiceStatus               = api.ServiceStatus
	SandboxList                 = api.SandboxList
	JobList                     = api.JobList
	PatchSandboxRequest         = api.PatchSandboxRequest
	RenewSandboxRequest         = api.RenewSandboxRequest
	ExecRequest                 = api.ExecRequest
	ExecResult                  = api.ExecResult
	Job                         = api.Job
	Profile                     = api.Profile
	ProfileDesktop              = api.ProfileDesktop
	ProfileBrowser              = api.ProfileBrowser
	ProfilePool                 = api.ProfilePool
	ProfileLease                = api.ProfileLease
	ProfileList                 = api.ProfileList
	Diff                        = api.Diff
	DiffFile                    = api.DiffFile
	DiffSummary                 = api.DiffSummary
	PatchRequest                = api.PatchRequest
	PatchResult                 = api.PatchResult
	PatchedFile                 = api.PatchedFile
	ImageBuild                  = api.ImageBuild
	Image                       = api.Image
	ImageList                   = api.ImageList
	RuntimeInfo                 = api.RuntimeInfo
	RuntimeFeatures             = api.RuntimeFeatures
	Feature                     = api.Feature
	Capabilities                = api.Capabilities
	VolumesCapability           = api.VolumesCapability
	Health                      = api.Health
	Session                     = api.Session
	CreateContextRequest        = api.CreateContextRequest
	RunCodeRequest              = api.RunCodeRequest
	CodeError                   = api.CodeError
	RichOutput                  = api.RichOutput
	RunCodeResult               = api.RunCodeResult
	TruncatedEvent              = api.TruncatedEvent
	ExitEvent                   = api.ExitEvent
	TerminalTicket              = api.TerminalTicket
	TerminalMessage             = api.TerminalMessage
	Whoami                      = api.Whoami
)

// The wire constants of the API, declared in package api.
const (
	StatusClientClosed   = api.StatusClientClosed
	ScopeApprove         = api.ScopeApprove
	MCPStateStarting     = api.MCPStateStarting
	MCPStateReady        = api.MCPStateReady
	MCPStateRestarting   = api.MCPStateRestarting
	MCPStateFailed       = api.MCPStateFailed
	MCPStateStopped      = api.MCPStateStopped
	MCPApprovalPending   = api.MCPApprovalPending
	MCPApprovalApproved  = api.MCPApprovalApproved
	MCPApprovalDenied    = api.MCPApprovalDenied
	MCPApprovalExpired   = api.MCPApprovalExpired
	MCPApprovalAbandoned = api.MCPApprovalAbandoned
	NetworkNone          = api.NetworkNone
	NetworkAllowlist     = api.NetworkAllowlist
	NetworkInternalAPI   = api.NetworkInternalAPI
	NetworkToolProxy     = api.NetworkToolProxy
	SkillArchiveGzip     = api.SkillArchiveGzip
	SkillArchiveTar      = api.SkillArchiveTar
	SkillArchiveZip      = api.SkillArchiveZip
	SkillArchiveBytes    = api.SkillArchiveBytes
	EventJob             = api.EventJob
	EventStdout          = api.EventStdout
	EventStderr          = api.EventStderr
	EventTruncated       = api.EventTruncated
	EventExit            = api.EventExit
	EncodingText         = api.EncodingText
	EncodingBase64       = api.EncodingBase64
)

// BrowserPath is api.BrowserPath.
func BrowserPath(id string) string { return api.BrowserPath(id) }

// ComputerPath is api.ComputerPath.
func ComputerPath(sandboxID string) string { return api.ComputerPath(sandboxID) }

// ControlPath is api.ControlPath.
func ControlPath(sandboxID string) string { return api.ControlPath(sandboxID) }

// PortPath is api.PortPath.
func PortPath(sandboxID string, port int) string { return api.PortPath(sandboxID, port) }

// TracePath is api.TracePath.
func TracePath(id string) string { return api.TracePath(id) }
