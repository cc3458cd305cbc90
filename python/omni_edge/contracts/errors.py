"""The one error type of the contract: a stable machine code plus a message naming the field or rule."""

from __future__ import annotations


class ContractError(ValueError):
    """A refusal under the Omni stage contract.

    ``code`` is stable across the Python reference and the native controller
    (fixtures and the differential test compare it); ``message`` is for people.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
