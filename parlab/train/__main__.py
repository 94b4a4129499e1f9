"""``python -m parlab.train`` and ``torchrun ... -m parlab.train``."""

import sys

from parlab.train.cli import main

sys.exit(main())
