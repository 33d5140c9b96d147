# A stdio MCP server in plain Python (standard library only), for tests
# that need a server already present in a profile's image: the tools echo
# and fetch (a GET of a URL, for tests of the server's own traffic).
import json
import sys
import urllib.request

VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26"]


def answer(msg_id, result=None, error=None):
    out = {"jsonrpc": "2.0", "id": msg_id}
    if error is not None:
        out["error"] = error
    else:
        out["result"] = result
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    msg = json.loads(line)
    method, msg_id = msg.get("method"), msg.get("id")
    if msg_id is None:
        continue  # a notification
    if method == "initialize":
        asked = msg["params"].get("protocolVersion")
        answer(msg_id, {
            "protocolVersion": asked if asked in VERSIONS else VERSIONS[0],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "pyfixture", "version": "1.0"},
        })
    elif method == "ping":
        answer(msg_id, {})
    elif method == "tools/list":
        answer(msg_id, {"tools": [{
            "name": "echo", "description": "Echoes its text.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        }, {
            "name": "fetch", "description": "GETs a URL and answers with its status and body.",
            "inputSchema": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
        }]})
    elif method == "tools/call" and msg["params"].get("name") == "echo":
        text = msg["params"].get("arguments", {}).get("text", "")
        answer(msg_id, {"content": [{"type": "text", "text": "echo: " + text}]})
    elif method == "tools/call" and msg["params"].get("name") == "fetch":
        url = msg["params"].get("arguments", {}).get("url", "")
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                body = resp.read(4096).decode("utf-8", "replace").strip()
                answer(msg_id, {"content": [{"type": "text", "text": "%d %s" % (resp.status, body)}]})
        except Exception as e:  # the refusal is the answer
            answer(msg_id, {"isError": True, "content": [{"type": "text", "text": str(e)}]})
    else:
        answer(msg_id, error={"code": -32601, "message": "method not found: %s" % method})
