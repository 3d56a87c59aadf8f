"""Memory construction: segmentation, relations, fusion and topics, one step at a time."""

from .pipeline import ConstructionRoles, Constructor, content_hash

__all__ = ["ConstructionRoles", "Constructor", "content_hash"]
