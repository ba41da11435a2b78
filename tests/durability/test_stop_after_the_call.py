"""A stop after the call has saved everything: the CLI's late handler must re-enter nothing.

It runs between two bytecodes of whatever the main thread was doing. In a CI run a SIGHUP came
while the reply was being printed, inside rich's lazy import of its emoji table; the handler
printed through the same console, the import failed as "partially initialized", and the
command exited 1 with a traceback instead of 129.
"""

from __future__ import annotations

import signal

import pytest

from harness.cli import _common


class _ConsoleInUse:
    def print(self, *args: object, **kwargs: object) -> None:
        msg = "the console was re-entered from a signal handler"
        raise ImportError(msg)


def test_a_late_stop_exits_as_a_stop_without_touching_the_console(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_common, "err", _ConsoleInUse())
    with pytest.raises(SystemExit) as stopped:
        _common._stopped_late(signal.SIGHUP, None)
    assert stopped.value.code == 128 + signal.SIGHUP
    assert capfd.readouterr().err == "stopped by SIGHUP; the session keeps every completed turn\n"
