"""lemon_openai's errors: one base, and the API error every refusal is answered with."""

from __future__ import annotations

__all__ = ["ApiError", "OpenAIApiError"]


class OpenAIApiError(Exception):
    """Base of this app's errors."""


class ApiError(OpenAIApiError):
    """A refusal in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param

    def body(self) -> dict[str, object]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }
