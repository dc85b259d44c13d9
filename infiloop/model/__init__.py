"""The method: loop connections (eqs. 1-5 of the paper and the baselines of its §6-§8), the block's layers, the
conditioners, the nested looped reasoner, the looped decoder of the looped-LM study (``looplm``) and the fused
kernels of the streaming step.

Imports nothing from the other wings (``tasks``, ``analysis``, ``experiments``) or from training and
evaluation: only the base utilities (``config``, ``errors``).
"""

from .connections import CONNECTIONS, ConnectionConfig, aggregate, build_connection, stream
from .looplm import LoopLM, LoopLMConfig
from .reasoner import Carry, LoopedReasoner, ModelConfig

__all__ = ["CONNECTIONS", "Carry", "ConnectionConfig", "LoopLM", "LoopLMConfig", "LoopedReasoner", "ModelConfig",
           "aggregate", "build_connection", "stream"]
