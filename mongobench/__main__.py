"""`python -m mongobench`."""

import sys

from mongobench.cli import main

sys.exit(main())
