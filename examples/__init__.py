"""The RivetKit workflow patterns as runnable Dormant actors (one module each); see `catalog.py`."""
