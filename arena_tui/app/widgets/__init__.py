"""Renderables and widgets of the app, one job per module."""
