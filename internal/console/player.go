package console

import (
	"bytes"
	"errors"
	"strings"
)

// PlayerHTML is the trace player as one self-contained page for a trace
// export: its script and style inline, the trace (traceJSON: {"sandbox_id",
// "events", "ext": {artifact id: file extension}}) in a JSON script element,
// the artifacts beside it under artifacts/. It opens offline, from the
// unpacked archive. Without a built front-end it is an error: the export
// then carries no player.
func PlayerHTML(traceJSON []byte) ([]byte, error) {
	h := New()
	js, ok1 := h.files["player.js"]
	css, ok2 := h.files["player-style.css"]
	if !ok1 || !ok2 {
		return nil, errors.New("console: the trace player was not built into this binary (make build)")
	}
	// Nothing inline may end its element early.
	script := strings.ReplaceAll(string(js.body), "</script", `<\/script`)
	style := strings.ReplaceAll(string(css.body), "</style", `<\/style`)
	data := bytes.ReplaceAll(traceJSON, []byte("</"), []byte(`<\/`))
	var b bytes.Buffer
	b.WriteString(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:; media-src 'self'">
<title>Trace — Genesis Sandbox</title>
<style>
:root { color-scheme: light dark; }
body { margin: 0; padding: 1rem; font: 14px/1.4 system-ui, sans-serif; }
`)
	b.WriteString(style)
	b.WriteString("</style>\n</head>\n<body>\n<main id=\"main\"></main>\n<script type=\"application/json\" id=\"trace-data\">")
	b.Write(data)
	b.WriteString("</script>\n<script type=\"module\">")
	b.WriteString(script)
	b.WriteString("</script>\n</body>\n</html>\n")
	return b.Bytes(), nil
}
