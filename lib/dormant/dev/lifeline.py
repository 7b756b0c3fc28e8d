"""A child process that never outlives its parent, even when the parent is killed with SIGKILL.

Three independent signals, because none covers every case alone:
- Linux `prctl(PR_SET_PDEATHSIG, SIGTERM)`: the kernel signals the child when the parent dies (strictly,
  when the parent *thread* that forked it ends, hence the other two);
- end of file on a pipe whose write end only the parent holds (`stdin=PIPE`): the kernel closes it
  when the parent process dies, on every Unix;
- the parent's pid: polled, in case the child was started without the pipe.
Each calls `on_death` once; the child then stops the way SIGTERM stops it (and saves its state).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
import threading
import time
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def death_signal(signum: int) -> bool:
    """Ask Linux to send `signum` to this process when its parent (thread) dies; False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return bool(libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def watch_parent(parent_pid: int, on_death: Callable[[], None], *, pipe_fd: int | None = None,
                 poll_seconds: float = 0.5) -> None:
    """Arrange for `on_death()` to run (once) when the process `parent_pid` ends."""
    fired = threading.Event()

    def die() -> None:
        if not fired.is_set():
            fired.set()
            on_death()

    death_signal(signal.SIGTERM)
    if os.getppid() != parent_pid:  # the parent died before the signal was armed
        die()
        return

    def read_until_eof() -> None:
        assert pipe_fd is not None
        try:
            while os.read(pipe_fd, 4096):
                pass
        except OSError:
            pass
        die()

    def poll() -> None:
        while not fired.is_set():
            if os.getppid() != parent_pid:
                die()
                return
            time.sleep(poll_seconds)

    if pipe_fd is not None:
        threading.Thread(target=read_until_eof, name="lifeline-pipe", daemon=True).start()
    threading.Thread(target=poll, name="lifeline-pid", daemon=True).start()
