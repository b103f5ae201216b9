"""``python -m learnopt``: the same as the ``learnopt`` command."""

import sys

from learnopt.cli import main

if __name__ == "__main__":
    sys.exit(main())
