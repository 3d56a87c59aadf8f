"""CompassMem: event-centric memory for LLM agents.

The public names load on first use (PEP 562), so `import compassmem` and `compassmem --help` do not pay
for numpy, ONNX or scikit-learn."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {"Memory": ".memory", "AsyncMemory": ".aio", "Client": ".client", "AsyncClient": ".client",
            "Settings": ".config",
            **{name: ".models" for name in ("Answer", "Event", "Observation", "Relation", "Topic", "SearchHit",
                                             "ObservationHit", "EventDetail", "EventPage", "HistoryEntry",
                                             "StepRecord", "EditReceipt", "ForgetReceipt", "Filters")},
            **{name: ".errors" for name in ("CompassMemError", "ConfigError", "InputError", "StepConflict",
                                             "StoreError", "NotFound", "NamespaceNotFound", "EventNotFound",
                                             "ObservationNotFound", "LLMError", "LLMUnavailable", "BudgetExceeded",
                                             "DeadlineExceeded", "ServiceError")}}
__all__ = list(_EXPORTS)

if TYPE_CHECKING:
    from .aio import AsyncMemory  # noqa: F401
    from .config import Settings  # noqa: F401
    from .client import AsyncClient, Client  # noqa: F401
    from .errors import (BudgetExceeded, CompassMemError, ConfigError, DeadlineExceeded, EventNotFound,  # noqa: F401
                         InputError, LLMError, LLMUnavailable, NamespaceNotFound, NotFound, ObservationNotFound,
                         ServiceError, StepConflict, StoreError)
    from .memory import Memory  # noqa: F401
    from .models import (Answer, EditReceipt, Event, EventDetail, EventPage, Filters, ForgetReceipt,  # noqa: F401
                         HistoryEntry, Observation, ObservationHit, Relation, SearchHit, StepRecord, Topic)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'compassmem' has no attribute '{name}'")
    value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    globals()[name] = value
    return value
