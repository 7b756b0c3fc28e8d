"""Internals shared by the runtime and the backends: the rules every backend follows, written once (limits of what
can be stored, flow-control limits, search attributes and how a search reads an index, listing cursors, callback
records, slot leases, text that is safe to print). No I/O; nothing here imports a backend, a surface or the
runtime."""
