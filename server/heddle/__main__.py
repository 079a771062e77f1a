"""`python -m heddle` is the `heddle` command."""

from heddle.cli import main

raise SystemExit(main())
