"""``python -m sparkforge``: the same as the ``sparkforge`` console script."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import sys

from sparkforge.cli import main

sys.exit(main())
