from __future__ import annotations

import sys

from lemon_quality.cli import main

sys.exit(main())
