"""One exception family, so the CLI can turn any failure into one clear line."""

from __future__ import annotations


class CompassMemError(Exception):
    """Base for every error a user can cause or fix."""


class ConfigError(CompassMemError):
    """A malformed config file, spec string or option value."""


class InputError(CompassMemError):
    """Bad input data: wrong format, empty file, duplicate ids, undecodable bytes."""


class StepConflict(InputError):
    """A step number is already taken by other content. `retryable`: an add without a step number lost
    a race with another process so often that it gave up; sending the same add again will work (REST:
    409 with Retry-After). Not retryable: the caller named a step that holds something else."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class StoreError(CompassMemError):
    """The database cannot be opened or is inconsistent with what was asked."""


class NotFound(CompassMemError):
    """Something named by id does not exist (REST: 404). Catch this for any of the three below."""


class NamespaceNotFound(NotFound, StoreError):
    """No memory by that name (REST: 404)."""


class EventNotFound(NotFound, InputError):
    """No event with that id in the namespace (REST: 404)."""


class ObservationNotFound(NotFound, InputError):
    """No observation (turn) with that id in the namespace (REST: 404)."""


class ServiceError(CompassMemError):
    """A CompassMem server answered with an error the library has no type for, or could not be reached
    (status 0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"server error {status}: {message}" if status else message)
        self.status = status


class LLMError(CompassMemError):
    """An LLM role failed after its retries; carries the role and the last raw output."""

    def __init__(self, role: str, message: str, raw: str | None = None) -> None:
        self.role = role
        self.raw = raw
        shown = f" Last raw output: {raw[:300]!r}" if raw else ""
        super().__init__(f"LLM role '{role}': {message}.{shown}")


class LLMUnavailable(LLMError):
    """The provider cannot be reached or the model cannot be loaded."""


class BudgetExceeded(CompassMemError):
    """An operation hit its configured call or token budget."""


class DeadlineExceeded(CompassMemError):
    """An operation (one ask, one construction step) ran past its deadline; nothing partial is kept."""
