"""The web front: the RL environment over HTTP and the live leaderboard page, on Starlette and
uvicorn (docs/web.md). `app.make_app` builds the ASGI app, `app.WebServer` runs it."""
