"""Refusals as JSON, the checked reading of request fields, and `endpoint`: a handler's dict as
the 200 answer, its HttpError as the refusal, a bug as a 500 that still answers in JSON.

Every refusal is `{"error": {"status", "field", "message"}}`: the status, the field at fault
(None when it is the request as a whole) and a message that says what to do."""

from __future__ import annotations

import asyncio
import json
import logging
import math
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
        return SafeJSONResponse(self.payload(), status_code=self.status, headers=self.headers)


class BodyTooLarge(Exception):
    """A body (sent without Content-Length, in chunks) grew past the server's limit."""

    def __init__(self, limit: int):
        super().__init__(
            f"the body is more than the {limit} bytes allowed: a candidate is at most 1 MiB; split a batch"
        )
        self.limit = limit

    def error(self) -> HttpError:
        return HttpError(413, str(self))


class SafeJSONResponse(JSONResponse):
    """Starlette's JSONResponse, except that what it cannot encode as it does (a lone surrogate
    in a message, a NaN in a figure) is still an answer: ASCII escapes, and null for a
    non-finite number, never a 500 from inside the error handler."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except (UnicodeEncodeError, ValueError):
            return json.dumps(_finite(content), ensure_ascii=True, separators=(",", ":")).encode()


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def error_payload(status: int, message: str, field_name: str | None = None) -> dict[str, Any]:
    return {"error": {"status": status, "field": field_name, "message": message}}


MAX_DEPTH = 32  # nesting of a request body: the deepest field of any endpoint is 3 levels down
INT_RANGE = (-(2**63), 2**63 - 1)  # what SQLite, numpy and torch seeds hold
PARSE_OFF_LOOP = 64 << 10  # bodies larger than this are parsed in a thread: the loop serves others


async def json_body(request: Request) -> dict[str, Any]:
    """The request's body as one JSON object, checked (`json_object`); a large one is parsed
    off the event loop."""
    body = await request.body()
    if len(body) > PARSE_OFF_LOOP:
        return await asyncio.to_thread(json_object, body)
    return json_object(body)


def json_object(body: bytes) -> dict[str, Any]:
    """The body as one JSON object; an empty body is {}. Refused with a 400 that names the
    field: invalid JSON, another JSON type, nesting deeper than MAX_DEPTH, an integer outside
    64 bits, a string that is not valid Unicode (a lone surrogate such as \\ud800)."""
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except RecursionError:
        raise HttpError(
            400, f"the body is nested too deeply: at most {MAX_DEPTH} levels of objects and lists"
        ) from None
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, an integer of 4300+ digits
        raise HttpError(
            400,
            f"the body is not valid JSON ({str(exc)[:200]}): send one JSON object with Content-Type: application/json",
        ) from None
    if not isinstance(data, dict):
        raise HttpError(
            400,
            f'the body is a JSON {type(data).__name__}: send one JSON object, e.g. {{"task_id": "elementwise/axpy"}}',
        )
    _check_values(data)
    return data


def _check_values(data: dict[str, Any]) -> None:
    """Walk the body once (no recursion): depth, integer range, valid Unicode."""
    todo: list[tuple[str, Any, int]] = [("", data, 1)]
    while todo:
        path, value, depth = todo.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                raise HttpError(
                    400,
                    f"`{path}` is nested {depth} levels deep: at most {MAX_DEPTH} levels of objects and lists",
                    path,
                )
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str) and not _unicode(key):
                    raise HttpError(
                        400,
                        f"a field name in `{path or 'the body'}` is not valid Unicode (a lone surrogate): send UTF-8 text",
                        path or None,
                    )
                if isinstance(key, str) and len(key) > 60:
                    key = key[:57] + "..."
                where = (
                    f"{path}[{key}]"
                    if isinstance(value, list)
                    else f"{path}.{key}"
                    if path
                    else key
                )
                todo.append((where, item, depth + 1))
        elif isinstance(value, str) and not _unicode(value):
            raise HttpError(
                400,
                f"`{path}` is not valid Unicode: it holds a lone surrogate (\\ud800-\\udfff); send UTF-8 text",
                path,
            )
        elif isinstance(value, int) and not isinstance(value, bool):
            if not INT_RANGE[0] <= value <= INT_RANGE[1]:
                raise HttpError(
                    400,
                    f"`{path}` is an integer of {len(str(abs(value)))} digits, outside 64 bits: give one between -2**63 and 2**63-1",
                    path,
                )


def _unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


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
        raise HttpError(400, f"`{path}` is {_shown(value)}: it must be {example}", path)
    return value


def _shown(value: Any) -> str:
    """A value in a message: short, and always encodable (no lone surrogate reaches a reply)."""
    text = json.dumps(value, ensure_ascii=True)  # checked values: finite depth, 64-bit integers
    return text if len(text) <= 60 else text[:57] + "..."


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
            return SafeJSONResponse(await fn(request))
        except HttpError as exc:
            return exc.response()
        except Exception as exc:
            log.exception("arena serve: %s %s failed", request.method, request.url.path)
            return SafeJSONResponse(
                error_payload(
                    500, f"internal error ({type(exc).__name__}: {exc}); see the server's log"
                ),
                status_code=500,
            )

    handle.__name__ = handle.__qualname__ = fn.__name__
    handle.__doc__ = fn.__doc__
    return handle
