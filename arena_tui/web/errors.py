"""Refusals as JSON, the checked reading of request fields, and `endpoint`: a handler's dict as
the 200 answer, its HttpError as the refusal, a bug as a 500 that still answers in JSON.

Every refusal is `{"error": {"status", "field", "message"}}`: the status, the field at fault
(None when it is the request as a whole) and a message that says what to do."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

log = logging.getLogger("arena.serve")
Handler = Callable[[Request], Awaitable[dict[str, Any]]]


class HttpError(Exception):
    """A request the server refuses: the status, the field at fault (if any) and what to do."""

    def __init__(
        self,
        status: int,
        message: str,
        field_name: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.field, self.headers = (
            status,
            message,
            field_name,
            headers or {},
        )

    def payload(self) -> dict[str, Any]:
        return error_payload(self.status, self.message, self.field)

    def response(self) -> JSONResponse:
        return JSONResponse(self.payload(), status_code=self.status, headers=self.headers)


class BodyTooLarge(Exception):
    """A body (sent without Content-Length, in chunks) grew past the server's limit."""

    def __init__(self, limit: int):
        super().__init__(
            f"the body is more than the {limit} bytes allowed: a candidate is at most 1 MiB; split a batch"
        )
        self.limit = limit

    def error(self) -> HttpError:
        return HttpError(413, str(self))


def error_payload(status: int, message: str, field_name: str | None = None) -> dict[str, Any]:
    return {"error": {"status": status, "field": field_name, "message": message}}


def json_object(body: bytes) -> dict[str, Any]:
    """The body as one JSON object; an empty body is {}."""
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise HttpError(
            400,
            f"the body is not valid JSON ({exc}): send one JSON object with Content-Type: application/json",
        ) from None
    if not isinstance(data, dict):
        raise HttpError(
            400,
            f'the body is a JSON {type(data).__name__}: send one JSON object, e.g. {{"task_id": "elementwise/axpy"}}',
        )
    return data


def take(
    body: dict[str, Any],
    name: str,
    kind: type | tuple[type, ...],
    example: str,
    required: bool = False,
    where: str = "",
) -> Any:
    """A field of the body, checked: a missing required one or a wrong type is a 400 that
    names the field and shows a correct value."""
    path = f"{where}{name}"
    if name not in body or body[name] is None:
        if required:
            raise HttpError(400, f"`{path}` is missing: add it, e.g. {example}", path)
        return None
    value = body[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in kinds):
        raise HttpError(400, f"`{path}` is {json.dumps(value)[:60]}: it must be {example}", path)
    return value


def no_unknown(body: dict[str, Any], allowed: tuple[str, ...], where: str = "") -> None:
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        hint = (
            " (the candidate's source goes in `action.code`)"
            if unknown[0] in ("source", "solution", "content")
            else ""
        )
        raise HttpError(
            400,
            f"`{where}{unknown[0]}` is not a field here{hint}: use {', '.join(allowed)}",
            f"{where}{unknown[0]}",
        )


def seed_field(body: dict[str, Any], where: str = "") -> int | None:
    seed = take(body, "seed", int, "a non-negative integer such as 0", where=where)
    if seed is not None and seed < 0:
        raise HttpError(
            400, f"`{where}seed` is {seed}: give a non-negative integer", f"{where}seed"
        )
    return seed


def endpoint(fn: Handler) -> Callable[[Request], Awaitable[JSONResponse]]:
    """A JSON endpoint: its dict is the 200 answer, an HttpError the refusal, a bug a 500 that
    still answers in JSON (never a dropped connection)."""

    async def handle(request: Request) -> JSONResponse:
        try:
            return JSONResponse(await fn(request))
        except HttpError as exc:
            return exc.response()
        except Exception as exc:
            log.exception("arena serve: %s %s failed", request.method, request.url.path)
            return JSONResponse(
                error_payload(
                    500, f"internal error ({type(exc).__name__}: {exc}); see the server's log"
                ),
                status_code=500,
            )

    handle.__name__ = handle.__qualname__ = fn.__name__
    handle.__doc__ = fn.__doc__
    return handle
