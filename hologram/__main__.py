"""`python -m hologram` is the `hologram` command."""

from hologram.cli.main import main

raise SystemExit(main())
