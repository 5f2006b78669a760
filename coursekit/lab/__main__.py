"""``python -m coursekit.lab``: see the package's docstring."""

from coursekit.lab import main

raise SystemExit(main())
