"""`python -m engine.cli`: the same as the `plet` command."""

from engine.cli import main

main()
