"""Rendering progress: the shared view model, the terminal line and JSON lines, the notebook
panel, and the one rule that picks among them. A new renderer goes here; it reads progress
events and never drives the engine."""
