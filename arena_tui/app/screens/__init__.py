"""The app's screens, one per module; `app.py` switches between them as modes."""
