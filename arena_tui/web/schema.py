"""JSON schemas of the RL endpoints' bodies (GET /schema), and the OpenAPI document built
from them (GET /openapi.json, read at /docs)."""

from __future__ import annotations

from typing import Any

from core import __version__

_OBSERVATION = {
    "type": "object",
    "properties": {
        "task_id": {"type": "string"},
        "prompt": {"type": "string"},
        "starter": {"type": "string"},
        "signature": {"type": "string"},
        "visible_workloads": {"type": "array", "items": {"type": "object"}},
        "device": {"type": "string"},
        "turn": {"type": "integer"},
        "max_turns": {"type": "integer"},
        "feedback": {"type": "string"},
        "last": {
            "type": ["object", "null"],
            "description": "the latest turn: outcome, reward, stages, compile_error, mismatch, timings",
        },
        "best_turn": {"type": ["integer", "null"]},
        "best_reward": {"type": ["number", "null"]},
        "done": {"type": "boolean"},
        "final": {
            "type": ["object", "null"],
            "description": "set once the episode is over: the best candidate on every workload",
        },
    },
}
SCHEMA: dict[str, Any] = {
    "action": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "code": {
                "type": "string",
                "description": "the candidate: one Python module defining run(*inputs)",
            },
            "final": {
                "type": "boolean",
                "description": "end the episode after this action (code optional)",
            },
        },
    },
    "observation": _OBSERVATION,
    "state": {
        "type": "object",
        "properties": {
            "episode_id": {"type": "string"},
            "task_id": {"type": "string"},
            "step_count": {"type": "integer"},
            "max_turns": {"type": "integer"},
            "done": {"type": "boolean"},
            "turn_rewards": {"type": "array"},
            "best_turn": {"type": ["integer", "null"]},
            "final_reward": {"type": ["number", "null"]},
            "busy": {"type": "boolean"},
        },
    },
    "reset": {
        "type": "object",
        "required": ["task_id"],
        "additionalProperties": False,
        "properties": {
            "task_id": {"type": "string"},
            "seed": {"type": "integer", "minimum": 0},
            "max_turns": {"type": "integer", "minimum": 1},
            "device": {"type": "string"},
            "episode_id": {"type": "string"},
            "profile": {
                "enum": ["train", "full"],
                "description": "train: the cheap profile a trainer asks for; full (default): what the leaderboard ranks",
            },
        },
    },
    "evaluate": {
        "type": "object",
        "required": ["task_id", "code"],
        "additionalProperties": False,
        "properties": {
            "task_id": {"type": "string"},
            "code": {"type": "string"},
            "seed": {"type": "integer", "minimum": 0},
            "visible_only": {"type": "boolean"},
            "device": {"type": "string"},
            "profile": {
                "enum": ["train", "full"],
                "description": "train: the cheap profile a trainer asks for; full (default): what the leaderboard ranks",
            },
        },
    },
    "reward": "null means an infrastructure fault: not the candidate's fault; retry the request",
}

_CANDIDATE = SCHEMA["evaluate"]["properties"]
SCHEMA["evaluate"]["properties"] = {
    **_CANDIDATE,
    "agent": {"type": "string", "description": "the name the leaderboard shows (default: serve)"},
    "group": {
        "type": "string",
        "description": "a GRPO group's name: its members are held until group_size arrived, then evaluated as one batch",
    },
    "group_size": {"type": "integer", "minimum": 1},
}
SCHEMA["evaluate_batch"] = {
    "type": "object",
    "required": ["candidates"],
    "additionalProperties": False,
    "properties": {
        "candidates": {"type": "array", "minItems": 1, "items": SCHEMA["evaluate"]},
        "agent": {
            "type": "string",
            "description": "the name the leaderboard shows, for every candidate that names none",
        },
    },
}
SCHEMA["reset"]["properties"]["agent"] = {
    "type": "string",
    "description": "the name the leaderboard shows for the episode's final result",
}
SCHEMA["error"] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "status": {"type": "integer"},
                "field": {
                    "type": ["string", "null"],
                    "description": "the field at fault, e.g. action.code",
                },
                "message": {"type": "string", "description": "what was wrong and what to do"},
            },
        }
    },
}

_ERR = {
    "description": "refused: the body names the field and the fix",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/error"}}},
}
_OBJ = {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}


def _op(
    summary: str,
    body: str | None = None,
    answer: dict[str, Any] | None = None,
    errors: tuple[int, ...] = (400, 401),
) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "responses": {"200": answer or _OBJ, **{str(s): _ERR for s in errors}},
    }
    if body:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{body}"}}},
        }
    return op


def _ref(name: str) -> dict[str, Any]:
    return {
        "description": "OK",
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}},
    }


def openapi(leaderboard_only: bool = False) -> dict[str, Any]:
    """The OpenAPI 3.1 document of what this server serves."""
    board = {
        "/api/boards": {
            "get": _op(
                "every leaderboard (one per timing kind), its entries' results and the filters' choices",
                errors=(400,),
            )
        },
        "/api/results/{job_id}": {
            "get": {
                **_op(
                    "one result's public view: stage verdicts, per-workload times, SOL, the candidate's source",
                    errors=(404,),
                ),
                "parameters": [
                    {
                        "name": "job_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "integer"},
                    }
                ],
            }
        },
        "/api/events": {
            "get": {
                "summary": "server-sent events: `results` each time results land in the store",
                "responses": {
                    "200": {
                        "description": "text/event-stream",
                        "content": {"text/event-stream": {}},
                    }
                },
            }
        },
    }
    rl = {
        "/health": {
            "get": _op("liveness, devices, slots, open episodes (no token needed)", errors=())
        },
        "/tasks": {
            "get": _op(
                "every task: id, signature, languages, baseline, visible workloads", errors=(401,)
            )
        },
        "/schema": {"get": _op("JSON schemas of the bodies", errors=(401,))},
        "/reset": {"post": _op("start an episode", "reset", errors=(400, 401, 409, 429, 503))},
        "/step": {
            "post": _op("one turn of an episode", "step", errors=(400, 401, 404, 409, 429, 503))
        },
        "/evaluate": {
            "post": {
                **_op(
                    "score one candidate, or a batch ({candidates: [...]})",
                    errors=(400, 401, 413, 429, 503),
                ),
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "oneOf": [
                                    {"$ref": "#/components/schemas/evaluate"},
                                    {"$ref": "#/components/schemas/evaluate_batch"},
                                ]
                            }
                        }
                    },
                },
            }
        },
        "/state": {
            "get": {
                **_op("an episode's bookkeeping", errors=(400, 401, 404)),
                "parameters": [
                    {
                        "name": "episode_id",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string"},
                    }
                ],
            },
            "post": _op("an episode's bookkeeping", "episode", errors=(400, 401, 404)),
        },
        "/close": {"post": _op("forget an episode", "episode", errors=(400, 401, 404))},
    }
    schemas = {k: v for k, v in SCHEMA.items() if isinstance(v, dict)}
    schemas["step"] = {
        "type": "object",
        "required": ["episode_id", "action"],
        "properties": {
            "episode_id": {"type": "string"},
            "action": {"$ref": "#/components/schemas/action"},
        },
    }
    schemas["episode"] = {
        "type": "object",
        "required": ["episode_id"],
        "properties": {"episode_id": {"type": "string"}},
    }
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "Kernel Arena",
            "version": __version__,
            "description": "The RL environment (reset/step/evaluate) and the live leaderboard. A reward of null is an infrastructure fault: retry.",
        },
        "paths": board if leaderboard_only else {**rl, **board},
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
    if not leaderboard_only:
        doc["security"] = [{"bearer": []}, {}]  # the token is needed off loopback
    return doc
