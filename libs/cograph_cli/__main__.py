"""`python -m cograph_cli` is the same as `cograph`."""

import sys

from cograph_cli.main import main

sys.exit(main())
