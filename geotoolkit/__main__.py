"""``python -m geotoolkit``."""

import sys

from geotoolkit.cli import main

sys.exit(main())
