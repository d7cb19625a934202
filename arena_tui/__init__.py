"""The `arena` command line (and, later, the Textual app)."""
