"""`python -m hologram` is the `hologram` command."""

from .cli import main

raise SystemExit(main())
