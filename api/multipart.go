package api

// UploadedFile is one file a multipart upload wrote.
type UploadedFile struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // hex
	Mode   string `json:"mode"`
}

// UploadFilesResult is the answer of POST /v1/sandboxes/{id}/files.
type UploadFilesResult struct {
	Files []UploadedFile `json:"files"`
}
