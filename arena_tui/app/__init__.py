"""The `arena` Textual app (docs/app.md): `app.ArenaApp` over a `source.RunSource`.

This package's `__init__` and `launch.interactive` import no Textual, so that the command line
can ask whether to open the app on a GPU box that has only torch and triton."""
