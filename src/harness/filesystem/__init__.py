"""Filesystem backends: local, sandbox, remote (over a key-value store), composite.

Two contracts (:mod:`harness.filesystem.base`): :class:`FileTools`, what the model's file tools
do, and :class:`Storage`, what the harness's own files need; every backend here is both
(:class:`AbstractFilesystem`).
"""

from harness.filesystem.base import (
    DEFAULT_MAX_STORAGE_BYTES,
    MAX_GREP_MATCHES,
    MISSING,
    AbstractFilesystem,
    Appender,
    Confinement,
    EditResult,
    ExecuteResult,
    FileData,
    FileInfo,
    FileTools,
    FsError,
    FsErrorCode,
    GrepMatch,
    GrepResult,
    IsolationScope,
    ListResult,
    ReadResult,
    ShellFilesystem,
    Storage,
    TransferResult,
    Version,
    WriteResult,
    check_path,
    namespace_prefix,
)
from harness.filesystem.composite import CompositeFilesystem, ShellCompositeFilesystem
from harness.filesystem.local import LocalFilesystem
from harness.filesystem.remote import RemoteFilesystem
from harness.filesystem.sandbox import SandboxFilesystem
from harness.filesystem.shell import LocalShell

__all__ = [
    "DEFAULT_MAX_STORAGE_BYTES",
    "MAX_GREP_MATCHES",
    "MISSING",
    "AbstractFilesystem",
    "Appender",
    "CompositeFilesystem",
    "Confinement",
    "EditResult",
    "ExecuteResult",
    "FileData",
    "FileInfo",
    "FileTools",
    "FsError",
    "FsErrorCode",
    "GrepMatch",
    "GrepResult",
    "IsolationScope",
    "ListResult",
    "LocalFilesystem",
    "LocalShell",
    "ReadResult",
    "RemoteFilesystem",
    "SandboxFilesystem",
    "ShellCompositeFilesystem",
    "ShellFilesystem",
    "Storage",
    "TransferResult",
    "Version",
    "WriteResult",
    "check_path",
    "namespace_prefix",
]
