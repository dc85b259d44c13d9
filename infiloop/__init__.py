"""InfiLoop companion: looped reasoners with learned loop connections.

The mathematical contract of the paper lives at the top level:
``infiloop.aggregate`` (eq. 2, explicit) and ``infiloop.stream`` (eq. 4, streaming).
"""

from . import numeric

numeric.apply()  # before torch computes: the CPU kernels every process of this package uses (infiloop/numeric.py)

from .model.connections import CONNECTIONS, ConnectionConfig, aggregate, build_connection, stream  # noqa: E402

__version__ = "0.1.0"

__all__ = ["CONNECTIONS", "ConnectionConfig", "aggregate", "build_connection", "stream", "__version__"]
