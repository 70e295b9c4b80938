"""``python -m geotoolkit``."""

import sys

from geotoolkit.frontends.cli import main

sys.exit(main())
