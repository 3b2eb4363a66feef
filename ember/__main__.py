"""``python -m ember demo`` runs the ``ember`` command."""
import sys

from ember.cli import main

sys.exit(main())
