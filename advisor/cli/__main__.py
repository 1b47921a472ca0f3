"""`python -m advisor.cli ...`: the `advisor` command."""

import sys

from advisor.cli.main import main

sys.exit(main())
