"""Genesis Sandbox: a Python client of the Genesis Sandbox HTTP API.

>>> from genesis_sandbox import Genesis
>>> with Genesis() as client, client.sandbox("code-python-basic", runtime="runsc") as sb:
...     print(sb.exec("echo hi").stdout)
"""

from ._async import AsyncGenesis
from ._async import CodeContext as AsyncCodeContext
from ._async import Job as AsyncJob
from ._async import Lease as AsyncLease
from ._async import McpServer as AsyncMcpServer
from ._async import Sandbox as AsyncSandbox
from ._async import Session as AsyncSession
from ._core import DEFAULT_URL, ENV_API_KEY, ENV_URL
from ._sync import CodeContext, Genesis, Job, Lease, McpServer, Sandbox, Session
from ._ws import AsyncTerminal, Terminal
from .errors import (
    BadRequest,
    CapacityExhausted,
    Conflict,
    ControlHeld,
    Forbidden,
    GenesisError,
    NotFound,
    PatchConflict,
    PayloadTooLarge,
    PreconditionFailed,
    QuotaExceeded,
    RangeNotSatisfiable,
    RateLimited,
    RuntimeUnavailable,
    ServiceUnavailable,
    StreamError,
    Unauthorized,
    VolumeBusy,
    VolumeInUse,
)
from .types import BrowserResult, CodeResult, ComputerResult, ExecResult, FileWritten, LogEvent, Snapshot

__version__ = "0.1.0"

__all__ = [
    "AsyncTerminal",
    "Terminal",
    "AsyncCodeContext", "AsyncGenesis", "AsyncJob", "AsyncLease", "AsyncMcpServer", "AsyncSandbox", "AsyncSession",
    "BadRequest", "BrowserResult", "CapacityExhausted", "CodeContext", "CodeResult", "ComputerResult", "Conflict",
    "ControlHeld", "DEFAULT_URL", "ENV_API_KEY", "ENV_URL",
    "ExecResult", "FileWritten", "Forbidden", "Genesis", "GenesisError", "Job", "Lease", "LogEvent",
    "McpServer", "NotFound", "PatchConflict", "PayloadTooLarge", "PreconditionFailed", "QuotaExceeded", "RangeNotSatisfiable",
    "RateLimited", "RuntimeUnavailable", "Sandbox", "ServiceUnavailable", "Session", "Snapshot", "StreamError",
    "Unauthorized", "VolumeBusy", "VolumeInUse",
]
