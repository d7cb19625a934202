"""The web front: the RL environment over HTTP and the live leaderboard page, on Starlette and
uvicorn (docs/web.md). `app.make_app` builds the ASGI app, `app.WebServer` runs it.

Only constants here: the command line imports this package at start-up, the web stack itself
(starlette, uvicorn) only when `arena serve` runs."""

DEFAULT_PORT = 8765
TOKEN_ENV = "ARENA_SERVE_TOKEN"
MIB = 1 << 20
