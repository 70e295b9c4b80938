"""The engine layer: one async engine (batch, retries, outcomes), its settings, its HTTP
transport, and the sync facade that runs it from scripts and Jupyter alike."""

from geotoolkit.engine.engine import Engine
from geotoolkit.engine.settings import EngineSettings
from geotoolkit.engine.sync import BackgroundRun, run_sync

__all__ = ["BackgroundRun", "Engine", "EngineSettings", "run_sync"]
