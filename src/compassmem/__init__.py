"""CompassMem: event-centric memory for LLM agents.

The public names load on first use (PEP 562), so `import compassmem` and `compassmem --help` do not pay
for numpy, ONNX or scikit-learn."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {"Memory": ".memory", "AsyncMemory": ".aio", "Settings": ".config", "Answer": ".models", "Event": ".models",
            "Observation": ".models", "Relation": ".models", "Topic": ".models", "CompassMemError": ".errors"}
__all__ = list(_EXPORTS)

if TYPE_CHECKING:
    from .aio import AsyncMemory  # noqa: F401
    from .config import Settings  # noqa: F401
    from .errors import CompassMemError  # noqa: F401
    from .memory import Memory  # noqa: F401
    from .models import Answer, Event, Observation, Relation, Topic  # noqa: F401


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'compassmem' has no attribute '{name}'")
    value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    globals()[name] = value
    return value
