"""moesim from Python: runs, sweeps and traces as data, policies written in Python.

The package wraps the same C library as the ``moesim`` command line
(docs/python.md)::

    import moesim
    r = moesim.run("mix.h5", model="mixtral-8x7b", cache="lfu", cache_experts=32)
    r.metrics["hit_rate"]
"""
import os as _os

_here = _os.path.dirname(_os.path.abspath(__file__))
# The profiles and plot scripts ship inside the package (the build tree links
# them); the C library finds them through MOESIM_DATA_DIR unless it is set.
if not _os.environ.get("MOESIM_DATA_DIR") and _os.path.isdir(_os.path.join(_here, "data", "profiles")):
    _os.environ["MOESIM_DATA_DIR"] = _os.path.join(_here, "data")

from . import _core  # noqa: E402
from ._core import ArgumentError, Error, PolicyError, TraceError, View  # noqa: E402
from ._policy import Cache, Prefetcher, Scheduler, register  # noqa: E402
from ._trace import Request, Trace, write_trace  # noqa: E402
from ._run import Result, claims, models, platforms, policies, run, sweep  # noqa: E402

__version__ = _core.version()[0]
__commit__ = _core.version()[1]

__all__ = [
    "ArgumentError", "Cache", "Error", "PolicyError", "Prefetcher", "Request", "Result", "Scheduler", "Trace",
    "TraceError", "View", "write_trace",
    "claims", "models", "platforms", "policies", "register", "run", "sweep", "__version__",
]
