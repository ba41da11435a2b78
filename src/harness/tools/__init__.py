"""The harness's built-in tools, one module per family."""

from harness.tools.files import FileTools
from harness.tools.memory import MemoryTools
from harness.tools.sessions import SessionTools

__all__ = ["FileTools", "MemoryTools", "SessionTools"]
