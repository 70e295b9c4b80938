"""A fleet benchmark cell's dump as a timeline (see ``fleetbench.timeline``)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fleetbench.timeline import main

if __name__ == "__main__":
    raise SystemExit(main())
