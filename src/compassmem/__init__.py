"""CompassMem: event-centric memory for LLM agents."""

from .config import Settings
from .errors import CompassMemError
from .memory import Memory
from .models import Answer, Event, Observation, Relation, Topic

__all__ = ["Memory", "Settings", "Answer", "Event", "Observation", "Relation", "Topic", "CompassMemError"]
__version__ = "0.1.0"
