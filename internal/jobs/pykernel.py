"""Genesis Sandbox Python code-interpreter kernel (standard library only).

serve SOCK        run the kernel: keeps one globals dict across runs
ping SOCK         wait (up to 15 s) until the kernel answers
run SOCK RESULT   read {"code": ...} from stdin, run it in the kernel, relay its
                  stdout/stderr live, write the result JSON to RESULT
"""
import ast
import base64
import io
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback


def send(conn, lock, msg):
    data = (json.dumps(msg) + "\n").encode()
    with lock:
        conn.sendall(data)


class Relay(io.TextIOBase):
    def __init__(self, conn, lock, name):
        self.conn, self.lock, self.name = conn, lock, name

    def writable(self):
        return True

    def write(self, s):
        if s:
            send(self.conn, self.lock, {"t": self.name, "d": s})
        return len(s)

    def flush(self):
        pass


def rich_outputs():
    out = []
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return out
    for num in plt.get_fignums():
        fig = plt.figure(num)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", bbox_inches="tight")
        out.append({"mime": "image/png", "data": base64.b64encode(buf.getvalue()).decode()})
    plt.close("all")
    return out


def execute(code, g):
    tree = ast.parse(code, "<cell>", "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, "<cell>", "exec"), g)
    if last is not None:
        return eval(compile(last, "<cell>", "eval"), g)
    return None


def handle(conn, g):
    lock = threading.Lock()
    f = conn.makefile("rb")
    line = f.readline()
    if not line:
        return
    req = json.loads(line)
    if req.get("ping"):
        send(conn, lock, {"t": "pong"})
        return
    done = threading.Event()

    def watch():
        # The caller went away (timeout or cancel): interrupt the run.
        while not done.is_set():
            try:
                b = conn.recv(1, socket.MSG_PEEK)
            except OSError:
                b = b""
            if not b and not done.is_set():
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Relay(conn, lock, "stdout"), Relay(conn, lock, "stderr")
    result = {"status": "ok"}
    try:
        value = execute(req["code"], g)
        if value is not None:
            result["value"] = repr(value)
            g["_"] = value
    except BaseException as e:  # noqa: B036 - report everything, keep the kernel
        # Show the user's frames only, not the kernel's.
        t = e.__traceback__
        while t is not None and t.tb_frame.f_code.co_filename != "<cell>":
            t = t.tb_next
        tb = traceback.format_exception(type(e), e, t)
        result = {"status": "error", "error": {"ename": type(e).__name__, "evalue": str(e), "traceback": tb}}
        sys.stderr.write("".join(tb))
    finally:
        try:
            result["outputs"] = rich_outputs()
        except Exception as e:  # noqa: BLE001
            result.setdefault("warnings", []).append("rendering figures failed: %s" % e)
        sys.stdout, sys.stderr = old
        done.set()
    try:
        send(conn, lock, {"t": "result", "r": result})
    except OSError:
        pass


def serve(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(4)
    g = {"__name__": "__main__"}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    while True:
        conn, _ = s.accept()
        try:
            handle(conn, g)
        except KeyboardInterrupt:
            pass
        except Exception:  # noqa: BLE001
            traceback.print_exc()
        finally:
            # shutdown, not just close: it wakes the watcher blocked in recv
            # and sends the client its end of stream.
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()


def connect(path, wait):
    deadline = time.time() + wait
    while True:
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            c.connect(path)
            return c
        except OSError:
            c.close()
            if time.time() > deadline:
                raise
            time.sleep(0.02)


def ping(path):
    c = connect(path, 15)
    c.sendall(b'{"ping": true}\n')
    print(c.makefile("rb").readline().decode().strip())


def run(path, result_path):
    req = json.loads(sys.stdin.read())
    c = connect(path, 5)
    c.sendall((json.dumps({"code": req["code"]}) + "\n").encode())
    result = {"status": "error", "error": {"ename": "KernelDied", "evalue": "the kernel ended during the run", "traceback": []}}
    for line in c.makefile("rb"):
        m = json.loads(line)
        if m["t"] == "stdout":
            sys.stdout.write(m["d"])
            sys.stdout.flush()
        elif m["t"] == "stderr":
            sys.stderr.write(m["d"])
            sys.stderr.flush()
        elif m["t"] == "result":
            result = m["r"]
    tmp = result_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, result_path)
    sys.exit(0 if result.get("status") == "ok" else 1)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "serve":
        serve(sys.argv[2])
    elif cmd == "ping":
        ping(sys.argv[2])
    elif cmd == "run":
        run(sys.argv[2], sys.argv[3])
    else:
        sys.exit("unknown command " + cmd)
