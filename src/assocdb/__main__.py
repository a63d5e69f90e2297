"""`python -m assocdb`: the `assocdb` command."""

from .cli.main import main

main()
