"""InfiLoop companion: looped reasoners with learned loop connections.

The mathematical contract of the paper lives at the top level:
``infiloop.aggregate`` (eq. 2, explicit) and ``infiloop.stream`` (eq. 4, streaming).
"""

import sys

from . import numeric

numeric.apply()  # before torch computes: the CPU kernels every process of this package uses (infiloop/numeric.py)

try:
    from .model.connections import CONNECTIONS, ConnectionConfig, aggregate, build_connection, stream
except ModuleNotFoundError as e:  # `python -m infiloop` (sys.argv[0] is "-m" while the package loads) outside .venv
    if sys.argv[:1] == ["-m"] and e.name in ("torch", "numpy"):
        raise SystemExit(f"error: {e.name} is not installed for {sys.executable}: run in the project's environment "
                         "(source .venv/bin/activate, after ./reproduce.sh setup; or .venv/bin/python -m infiloop ...)"
                         ) from None
    raise

__version__ = "0.1.0"

__all__ = ["CONNECTIONS", "ConnectionConfig", "aggregate", "build_connection", "stream", "__version__"]
