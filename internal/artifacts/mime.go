package artifacts

import (
	"mime"
	"net/http"
	"path"
	"strings"
)

// extraTypes are extensions whose type the standard table may lack on a
// host without mime.types; they win over it so the answer does not depend
// on the host.
var extraTypes = map[string]string{
	".csv": "text/csv; charset=utf-8", ".md": "text/markdown; charset=utf-8", ".txt": "text/plain; charset=utf-8",
	".log": "text/plain; charset=utf-8", ".py": "text/x-python; charset=utf-8", ".yaml": "application/yaml",
	".yml": "application/yaml", ".tar": "application/x-tar", ".gz": "application/gzip",
	".zip": "application/zip", ".ipynb": "application/x-ipynb+json", ".parquet": "application/vnd.apache.parquet",
}

// DetectMIME names the type of a file: by its extension first, then by
// sniffing its first bytes (head), else application/octet-stream.
func DetectMIME(name string, head []byte) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := extraTypes[ext]; ok {
		return t
	}
	if ext != "" {
		if t := mime.TypeByExtension(ext); t != "" {
			return t
		}
	}
	return http.DetectContentType(head)
}
