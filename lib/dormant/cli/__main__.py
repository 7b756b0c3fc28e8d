"""`python -m dormant.cli`: the same as the `dormant` command."""

import sys

from dormant.cli.main import main

sys.exit(main())
