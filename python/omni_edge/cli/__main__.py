"""`python -m omni_edge.cli ...`: the same command line as `omni-edge ...`."""

import sys

from omni_edge.cli import main

sys.exit(main())
