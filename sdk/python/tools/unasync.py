"""Generates the synchronous client (_sync.py) from the asynchronous one
(_async.py), so that the two never drift: edit _async.py, then run

    python3 sdk/python/tools/unasync.py

tests/test_units.py fails when _sync.py is not what this makes. The
rules: the few places where the clients differ by more than keywords
(imports, the async-only _Pending wrapper, docstrings that speak of
await) are literal replacements that must each match once; then async
keywords and names become their sync forms, and the continuation lines
of a def that lost its ``async`` move left with it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import List, Tuple

PKG = Path(__file__).resolve().parents[1] / "src" / "genesis_sandbox"

# (async text, sync text): each must occur exactly once in _async.py.
LITERALS: List[Tuple[str, str]] = [
    ('"""The asynchronous client: the same calls as the sync one, awaited."""',
     '"""The synchronous client. Generated from _async.py by tools/unasync.py: edit\nthat file, then run it."""'),
    ("import asyncio\nfrom typing import (Any, AsyncIterator, Awaitable, BinaryIO, Callable, Dict, Generator, Generic, "
     "Iterable, List,\n                    Mapping, Optional, TypeVar, Union)\n",
     "import time\nfrom typing import Any, BinaryIO, Dict, Iterable, Iterator, List, Mapping, Optional, Union\n"),
    ("Body = Union[bytes, str, BinaryIO, Iterable[bytes], AsyncIterator[bytes]]\n",
     "Body = Union[bytes, str, BinaryIO, Iterable[bytes]]\n"),
    ('T = TypeVar("T")\n', ""),
    ('    """bytes and str go as they are; a file, an iterator or an async\n    iterator is streamed."""\n',
     '    """bytes and str go as they are; a file or an iterator is streamed."""\n'),
    ('    if hasattr(data, "__aiter__"):\n        return data\n', ""),
    ('    """An asyncio client of the Genesis Sandbox HTTP API (see Genesis).\n',
     '    """A client of the Genesis Sandbox HTTP API.\n'),
    ('        """Creates a sandbox: ``async with client.sandbox(...) as sb`` destroys\n'
     '        it when the block ends; ``await client.sandbox(...)`` just creates it."""\n',
     '        """Creates a sandbox to use as a context manager: it is destroyed\n'
     '        when the ``with`` block ends."""\n'),
    ('        """Starts an MCP server instance (see Genesis.create_mcp_server):\n'
     '        await it, or ``async with`` it to stop it when the block ends."""\n',
     '        """Starts an MCP server instance: a catalog entry or a ``spec`` of\n'
     '        your own (a stdio command), in a sandbox of its own or, with\n'
     '        ``lease_id``, in a leased sandbox. As a context manager it is\n'
     '        stopped when the block ends. Further keyword arguments (runtime,\n'
     '        scope, tools, …) go into the body as given."""\n'),
    ("as an async context manager it is closed on exit.", "as a context manager it is closed on exit."),
]

# The async-only wrapper that lets an awaitable create be a context
# manager: a sync create returns the object, a context manager itself.
PENDING = re.compile(r"\nclass _Pending\(Generic\[T\]\):\n.*?\n\n\n", re.S)

# Async keywords and names, in order.
WORDS: List[Tuple[str, str]] = [
    (r'-> "_Pending\[(\w+)\]":', r'-> "\1":'),
    (r"return _Pending\(lambda: (.*)\)$", r"return \1"),
    (r"return _Pending\((\w+)\)$", r"return \1()"),
    (r"\basync for ", "for "),
    (r"\basync with ", "with "),
    (r"\bawait ", ""),
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\bAsyncGenesis\b", "Genesis"),
    (r"\bAsyncTerminal\b", "Terminal"),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\.aclose\(\)", ".close()"),
    (r"\.aread\(\)", ".read()"),
    (r"\baiter_bytes\b", "iter_bytes"),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (r"\bhttpx\.AsyncClient\b", "httpx.Client"),
    (r"\basync_transport\b", "sync_transport"),
]

ASYNC_DEF = "async def "
SHIFT = len(ASYNC_DEF) - len("def ")


def unasync(src: str) -> str:
    for a, s in LITERALS:
        n = src.count(a)
        if n != 1:
            raise ValueError(f"unasync: {a[:60]!r} occurs {n} times in _async.py, want once")
        src = src.replace(a, s)
    src, n = PENDING.subn("\n", src)
    if n != 1:
        raise ValueError(f"unasync: class _Pending found {n} times, want once")
    out: List[str] = []
    paren = -1  # the column of the open paren of a def that lost its async
    for line in src.split("\n"):
        if paren >= 0:
            # A continuation line of the def's signature: one aligned to
            # the paren stays aligned to it.
            lead = len(line) - len(line.lstrip(" "))
            if lead == paren + 1:
                line = " " * (paren + 1 - SHIFT) + line[lead:]
            if line.rstrip().endswith(":"):
                paren = -1
        i = line.find(ASYNC_DEF)
        if i >= 0 and line[:i].strip() == "":
            if not line.rstrip().endswith(":"):
                paren = line.find("(")
            line = line[:i] + "def " + line[i + len(ASYNC_DEF):]
        for pat, rep in WORDS:
            line = re.sub(pat, rep, line)
        out.append(line)
    return "\n".join(out)


def main() -> None:
    gen = unasync((PKG / "_async.py").read_text())
    target = PKG / "_sync.py"
    if "--check" in sys.argv[1:]:
        if target.read_text() != gen:
            raise SystemExit("_sync.py is not what tools/unasync.py makes of _async.py: run it")
        return
    target.write_text(gen)


if __name__ == "__main__":
    main()
