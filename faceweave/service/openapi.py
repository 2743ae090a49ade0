"""Pieces of the OpenAPI schema that FastAPI cannot infer: the streamed
``multipart/form-data`` bodies, which the routes read themselves."""

from __future__ import annotations

from typing import Any

#: a file part (or a file answer)
BINARY: dict[str, Any] = {"type": "string", "format": "binary"}


def multipart_body(required: list[str], properties: dict[str, Any]) -> dict[str, Any]:
    """A route's ``openapi_extra`` for a required multipart body with these parts."""
    schema = {"type": "object", "required": required, "properties": properties}
    return {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": schema}}}}
