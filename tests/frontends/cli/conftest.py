"""Make the scripted loopback gazetteer of tests/orchestration importable here."""

from __future__ import annotations

import sys
from pathlib import Path

_SUPPORT = str(Path(__file__).resolve().parents[2] / "orchestration")
if _SUPPORT not in sys.path:
    sys.path.append(_SUPPORT)
