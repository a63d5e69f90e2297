"""`python -m assocdb`: the `assocdb` command."""

from ._cli import main

main()
